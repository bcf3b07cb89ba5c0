//! The small HTTP/1.1 responder `serve` answers with (see the parent module's comment for why
//! not tiny_http): a request head read within bounds, a response written and the connection
//! closed, and the choice between the text format and OpenMetrics.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{HEAD_TIMEOUT, MAX_HEAD};

/// A request head: method, path (without query), and the `Accept` header.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) accept: String,
}

pub(super) enum HeadError {
    TooLarge,
    Timeout,
    Malformed,
    Closed,
}

pub(super) fn read_head(s: &mut TcpStream) -> Result<Head, HeadError> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(i) = find_end(&buf) {
            break i;
        }
        if buf.len() >= MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Timeout);
        }
        let _ = s.set_read_timeout(Some(left.min(Duration::from_millis(500))));
        let want = chunk.len().min(MAX_HEAD - buf.len());
        match s.read(&mut chunk[..want]) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(HeadError::Closed),
        }
    };
    parse_head(&buf[..end]).ok_or(HeadError::Malformed)
}

fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.lines();
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    // The absolute form (`GET http://host:9477/metrics`, as proxies send it), which a server
    // must accept (RFC 9112, 3.2.2): its path is what follows the authority.
    let target = match target.split_once("://") {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
        {
            match rest.find(['/', '?']) {
                Some(i) if rest[i..].starts_with('/') => &rest[i..],
                _ => "/",
            }
        }
        _ => target,
    };
    if parts.next().is_some()
        || !version.starts_with("HTTP/1.")
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        // `*`, the asterisk form, is OPTIONS's alone (answered 405 as any method but GET).
        || !(target.starts_with('/') || (target == "*" && method == "OPTIONS"))
    {
        return None;
    }
    let mut accept = String::new();
    for l in lines {
        let (k, v) = l.split_once(':')?;
        if k.trim().eq_ignore_ascii_case("accept") {
            accept = v.trim().to_string();
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Some(Head {
        method: method.to_string(),
        path: path.to_string(),
        accept,
    })
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

pub(super) fn respond(
    s: &mut TcpStream,
    code: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
    extra: &[(&str, &str)],
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(code),
        body.len()
    );
    for (k, v) in extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    s.write_all(out.as_bytes())?;
    if !head_only {
        s.write_all(body)?;
    }
    s.flush()
}

/// Whether an `Accept` header prefers OpenMetrics to the text format: named with a weight above
/// zero and no lower than any range text 0.0.4 matches (`text/plain`, `text/*`, `*/*`). Media
/// types are compared without regard to case; a range without `q` weighs 1. Prometheus names
/// OpenMetrics first, weighted highest.
pub(super) fn wants_openmetrics(accept: &str) -> bool {
    let (mut open, mut text) = (0.0f32, 0.0f32);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let ty = parts.next().unwrap_or_default().trim();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(1.0));
        let is = |t: &str| ty.eq_ignore_ascii_case(t);
        if is("application/openmetrics-text") {
            open = open.max(q);
        } else if is("text/plain") || is("text/*") || is("*/*") {
            text = text.max(q);
        }
    }
    open > 0.0 && open >= text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_served_when_the_accept_header_prefers_it() {
        for (accept, open) in [
            // Prometheus 2 and 3.
            (
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                true,
            ),
            (
                "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                true,
            ),
            ("Application/OpenMetrics-Text", true),
            ("text/plain, application/openmetrics-text", true),
            ("", false),
            ("text/plain", false),
            ("*/*", false),
            ("application/openmetrics-text;q=0, text/plain", false),
            ("text/plain;q=1, application/openmetrics-text;q=0.1", false),
            ("application/openmetrics-text; Q=0", false),
        ] {
            assert_eq!(wants_openmetrics(accept), open, "{accept}");
        }
    }

    #[test]
    fn heads_parse_or_are_refused() {
        let h = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text; version=1.0.0\r\n").unwrap();
        assert_eq!(
            h,
            Head {
                method: "GET".into(),
                path: "/metrics".into(),
                accept: "application/openmetrics-text; version=1.0.0".into()
            }
        );
        let options = parse_head(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n").unwrap();
        assert_eq!(
            (options.method.as_str(), options.path.as_str()),
            ("OPTIONS", "*")
        );
        for (absolute, path) in [
            ("http://127.0.0.1:9477/healthz", "/healthz"),
            ("HTTP://h/metrics?x=1", "/metrics"),
            ("http://h", "/"),
            ("http://h?x", "/"),
            ("https://h/api/runs", "/api/runs"),
        ] {
            let head = format!("GET {absolute} HTTP/1.1\r\nHost: h\r\n");
            let h = parse_head(head.as_bytes());
            assert_eq!(h.map(|h| h.path), Some(path.to_string()), "{absolute}");
        }
        for bad in [
            &b"GET /metrics"[..],
            b"GET ftp://h/metrics HTTP/1.1",
            b"GET ?x HTTP/1.1",
            b"GET * HTTP/1.1",
            b"GET metrics HTTP/1.1",
            b"get / HTTP/1.1",
            b"GET / HTTP/2 x",
            b"GET / HTTP/1.1\r\nno colon here",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_head(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
