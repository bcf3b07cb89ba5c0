//! Spans to the OTLP/HTTP exporter (protobuf, blocking reqwest client, no async runtime).
//!
//! The model's spans become the SDK's `SpanData` as they are, ids and times included, and go
//! straight to `opentelemetry_otlp::SpanExporter`. Not through a `Tracer` (nor, live,
//! through `tracing-opentelemetry`, which sits on one): the 0.33 SDK's tracer draws every span
//! id from its id generator, so neither could give the ids and original times derived from
//! the log that make a live trace equal to `export otel` of its log.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event as OtelEvent, Link, SpanContext, SpanId, SpanKind as OtelKind, Status, TraceFlags,
    TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};

use super::config::Config;
use super::model::{AttrValue, Attrs, Span, SpanKind, SpanStatus};

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("OTLP endpoint {url}: {reason}")]
    Endpoint { url: String, reason: String },
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn key_values(attrs: &Attrs) -> Vec<KeyValue> {
    attrs
        .iter()
        .map(|(k, v)| {
            let v = match v {
                AttrValue::Str(s) => Value::from(s.clone()),
                AttrValue::Int(i) => Value::I64(*i),
                AttrValue::Float(f) => Value::F64(*f),
                AttrValue::Bool(b) => Value::Bool(*b),
            };
            KeyValue::new(*k, v)
        })
        .collect()
}

fn context(trace: [u8; 16], span: [u8; 8]) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(trace),
        SpanId::from_bytes(span),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    )
}

/// The model's span as the SDK's.
pub fn span_data(s: &Span, scope: &InstrumentationScope) -> SpanData {
    // Both are `non_exhaustive` with public fields.
    let mut events = SpanEvents::default();
    events.events = s
        .events
        .iter()
        .map(|e| OtelEvent::new(e.name, time(e.time_ms), key_values(&e.attributes), 0))
        .collect();
    let mut links = SpanLinks::default();
    links.links = s
        .links
        .iter()
        .map(|l| Link::new(context(l.trace_id, l.span_id), key_values(&l.attributes), 0))
        .collect();
    SpanData {
        span_context: context(s.trace_id, s.span_id),
        parent_span_id: s.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: false,
        span_kind: match s.kind {
            SpanKind::Server => OtelKind::Server,
            SpanKind::Internal => OtelKind::Internal,
        },
        name: s.name.clone().into(),
        start_time: time(s.start_ms),
        end_time: time(s.end_ms),
        attributes: key_values(&s.attributes),
        dropped_attributes_count: 0,
        events,
        links,
        status: match &s.status {
            SpanStatus::Unset => Status::Unset,
            SpanStatus::Ok => Status::Ok,
            SpanStatus::Error(d) => Status::error(d.clone()),
        },
        instrumentation_scope: scope.clone(),
    }
}

/// An OTLP/HTTP span exporter for one configuration.
pub struct Sender {
    exporter: opentelemetry_otlp::SpanExporter,
    scope: InstrumentationScope,
    url: String,
    timeout: Duration,
}

/// Installs rustls's crypto provider (ring) for the OTLP clients' TLS, once per process: the
/// client is built without one so that only ring, which the rest of loopctl builds anyway, is
/// compiled in.
pub(crate) fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err: another provider is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Sender {
    pub fn new(cfg: &Config) -> Result<Sender, SendError> {
        let fail = |reason: String| SendError::Endpoint {
            url: cfg.url.clone(),
            reason,
        };
        cfg.check().map_err(fail)?;
        tls_provider();
        let headers: HashMap<String, String> = cfg.headers.iter().cloned().collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(cfg.url.clone())
            .with_timeout(cfg.timeout)
            .with_headers(headers)
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let mut resource = Resource::builder_empty().with_attributes(
            cfg.resource
                .iter()
                .filter(|(k, _)| k != "service.name")
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        );
        resource = resource.with_service_name(cfg.service_name.clone());
        exporter.set_resource(&resource.build());
        let scope = InstrumentationScope::builder("loopctl")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Ok(Sender {
            exporter,
            scope,
            url: cfg.url.clone(),
            timeout: cfg.timeout,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one batch and waits for the collector's answer.
    pub fn send(&self, spans: &[Span]) -> Result<(), SendError> {
        if spans.is_empty() {
            return Ok(());
        }
        let batch: Vec<SpanData> = spans.iter().map(|s| span_data(s, &self.scope)).collect();
        let start = std::time::Instant::now();
        futures_executor::block_on(self.exporter.export(batch)).map_err(|e| {
            // The exporter says "network error" and no more: say why, when it is the connection
            // or its TLS, or a collector that kept silent.
            let silent = (start.elapsed() >= self.timeout).then(|| {
                format!(
                    "no answer within {} ms (the OTLP timeout: OTEL_EXPORTER_OTLP_TIMEOUT)",
                    self.timeout.as_millis()
                )
            });
            let cause =
                silent.or_else(|| connect_cause(&self.url).or_else(|| tls_cause(&self.url)));
            let reason = match cause {
                Some(cause) => format!("{e} ({cause})"),
                None => e.to_string(),
            };
            SendError::Endpoint {
                url: self.url.clone(),
                reason,
            }
        })
    }
}

/// An error and its causes, outermost first: reqwest's own text leaves out what TLS said.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text = format!("{text}: {c_text}");
        }
        cause = c.source();
    }
    text
}

/// Why an `https://` endpoint that takes connections cannot be spoken to (its certificate, or
/// no TLS there), found by a `GET` (which sends no data) when an export to it failed.
fn tls_cause(url: &str) -> Option<String> {
    if !url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    {
        return None;
    }
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    client.get(url).send().err().map(|e| with_causes(&e))
}

/// Why `url`'s host and port cannot be reached over TCP, if they cannot.
fn connect_cause(url: &str) -> Option<String> {
    use std::net::{TcpStream, ToSocketAddrs};
    let (rest, default_port) = match url.split_once("://") {
        Some(("https", r)) => (r, 443),
        Some((_, r)) => (r, 80),
        None => (url, 80),
    };
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, p.parse().ok()?),
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = match (host, port).to_socket_addrs() {
        Ok(mut a) => a.next()?,
        Err(e) => return Some(format!("cannot resolve {host}: {e}")),
    };
    TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
        .err()
        .map(|e| format!("cannot connect to {addr}: {e}"))
}

#[cfg(test)]
mod connect_tests {
    use super::connect_cause;

    #[test]
    fn an_error_is_told_with_its_causes_each_once() {
        let inner = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let outer = std::io::Error::other(inner);
        let text = super::with_causes(&outer);
        assert_eq!(text.matches("UnknownIssuer").count(), 1, "{text}");
        #[derive(Debug)]
        struct Wrap(std::io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error sending request")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let text = super::with_causes(&Wrap(std::io::Error::other("corrupt message")));
        assert_eq!(text, "error sending request: corrupt message");
    }

    #[test]
    fn an_unreachable_endpoint_is_named_with_its_cause() {
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = open.local_addr().unwrap().port();
        assert_eq!(
            connect_cause(&format!("http://127.0.0.1:{port}/v1/traces")),
            None
        );
        drop(open);
        let cause = connect_cause(&format!("http://127.0.0.1:{port}/v1/traces")).unwrap();
        assert!(
            cause.starts_with(&format!("cannot connect to 127.0.0.1:{port}: ")),
            "{cause}"
        );
        assert!(cause.contains("refused"), "{cause}");
        let cause = connect_cause("http://no-such-host.invalid:4318/v1/traces").unwrap();
        assert!(
            cause.starts_with("cannot resolve no-such-host.invalid"),
            "{cause}"
        );
    }
}
