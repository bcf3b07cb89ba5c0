//! `export otel` and `serve --otlp-metrics` against collectors that fail: unreachable, silent,
//! not speaking TLS, or named by a URL that is not OTLP/HTTP's.

#[path = "otel/cli.rs"]
mod cli;

use std::process::Stdio;
use std::time::{Duration, Instant};

use cli::{fixture, loopctl};

#[test]
fn an_unreachable_endpoint_is_an_error_naming_it() {
    let out = loopctl()
        .args(["export", "otel", &fixture("native-clean")])
        .args(["--endpoint", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http://127.0.0.1:9/v1/traces"), "{err}");
}

/// An `https://` endpoint is spoken to over TLS: the collector's port gets a TLS handshake
/// record (a ClientHello), not an HTTP request; with no TLS server there, the export fails
/// naming the endpoint.
#[test]
fn an_https_endpoint_is_spoken_to_over_tls() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let first = std::thread::spawn(move || {
        // No connection at all within the time (a client without TLS never opens one): None.
        let start = Instant::now();
        let mut conn = loop {
            match listener.accept() {
                Ok((conn, _)) => break conn,
                Err(_) if start.elapsed() < Duration::from_secs(20) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(_) => return None,
            }
        };
        conn.set_nonblocking(false).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let mut head = [0u8; 3];
        conn.read_exact(&mut head).map(|_| head).ok()
    });
    let url = format!("https://127.0.0.1:{port}");
    let err = export_failing_to(&url);
    assert!(err.contains(&format!("{url}/v1/traces")), "{err}");
    // A TLS record: type 22 (handshake), version 3.x.
    assert_eq!(first.join().unwrap().map(|h| [h[0], h[1]]), Some([22, 3]));
}

/// A failed TLS exchange is named: a plain HTTP server on an https endpoint is "a corrupt
/// message", not only the exporter's "network error".
#[test]
fn a_failed_tls_exchange_says_why() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let err = export_failing_to(&format!("https://127.0.0.1:{port}"));
    assert!(err.contains("corrupt message"), "{err}");
}

/// A collector that takes the connection and never answers: the export gives up after
/// OTEL_EXPORTER_OTLP_TIMEOUT and says so; `serve --otlp-metrics` to it stops soon after
/// SIGTERM (within its metrics timeout, with no second wait for a last push); a URL that is
/// not OTLP/HTTP's is refused before anything is read.
#[test]
fn a_silent_collector_is_waited_for_as_long_as_the_timeout_says() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (accepted, held) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut hold = Vec::new();
        for conn in listener.incoming().flatten() {
            hold.push(conn);
            let _ = accepted.send(());
        }
    });
    let out = loopctl()
        .args([
            "export",
            "otel",
            "--endpoint",
            &url,
            &fixture("native-clean"),
        ])
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no answer within 500 ms"), "{err}");

    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("loopctl"))
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-metrics", &url])
        .arg(fixture("native-clean"))
        .env("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1000")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Its first push is in flight.
    while held.try_recv().is_ok() {}
    held.recv_timeout(Duration::from_secs(30)).unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let asked = Instant::now();
    // The default timeout is 10 s, a last push another 10 s: a bound between.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if asked.elapsed() > Duration::from_secs(8) {
            let _ = child.kill();
            panic!("serve still running 8 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");

    for bad in ["ftp://collector:4318", "not a url", "http://"] {
        let out = loopctl()
            .args(["serve", "--listen", "127.0.0.1:0", "--otlp-metrics", bad])
            .arg(fixture("native-clean"))
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("OTLP metrics endpoint"), "{err}");
    }
    let err = export_failing_to("ftp://collector:4318");
    assert!(err.contains("not ftp://"), "{err}");
}

/// A timeout variable that holds no number is refused before anything is read or sent, naming
/// it: the default wait would not be what was asked for.
#[test]
fn a_timeout_that_is_no_number_is_refused() {
    let out = loopctl()
        .args(["export", "otel", "--endpoint", "http://127.0.0.1:9"])
        .arg(fixture("native-clean"))
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_TIMEOUT=10s is not a number"),
        "{err}"
    );

    let out = loopctl()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--otlp-metrics", "http://127.0.0.1:9"])
        .arg(fixture("native-clean"))
        .env("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "soon")
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT=soon"),
        "{err}"
    );
}

/// `export otel` of a fixture to `url`, which must fail with exit code 2: its stderr.
fn export_failing_to(url: &str) -> String {
    let out = loopctl()
        .args([
            "export",
            "otel",
            "--endpoint",
            url,
            &fixture("native-clean"),
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}
