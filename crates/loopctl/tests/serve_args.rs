//! `loopctl serve`'s arguments: the runs it is given, --strict, --listen.

use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

mod common;
use common::logs::{root_with_alpha, value};
use common::server::Server;

/// `loopctl serve ARGS` under `root`: (exit code, stderr), for the arguments it refuses.
fn refused(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(cargo_bin("loopctl"))
        .env("NO_COLOR", "1")
        .arg("--root")
        .arg(root)
        .arg("serve")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A name that is no path is a run id (or alias) under the root, as for `export prometheus`.
#[test]
fn serve_takes_a_run_id_as_export_prometheus_does() {
    let tmp = tempfile::tempdir().unwrap();
    let run = "alpha-20260101-000000";
    let (root, _) = root_with_alpha(tmp.path(), run);
    let root_arg = root.to_str().unwrap();
    let s = Server::start(&[Path::new(run)], &["--root", root_arg]);
    let m = s.metrics();
    assert_eq!(
        value(&m, r#"loopctl_runs_started_total{loop="alpha"}"#),
        Some(1.0),
        "{m}"
    );
    let (code, err) = refused(&root, &["--listen", "127.0.0.1:0", "nosuch"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nosuch"), "{err}");
}

/// Stops `s` with SIGTERM: (exit code, all it wrote on stderr).
fn terminate(mut s: Server) -> (Option<i32>, String) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = s.child.wait().unwrap();
    let err = s.stderr.iter().collect::<Vec<_>>().join("\n");
    (status.code(), err)
}

/// Under --strict, findings (at start-up or while following) make the exit code 1 once the
/// server stops, as `tail --strict` does; the series are served all the same.
#[test]
fn serve_strict_exits_1_on_findings_once_stopped() {
    let fixtures = loopctl_tests::repo().join("fixtures");
    let torn = fixtures.join("torn-tail");
    let s = Server::start(&[&torn], &["--strict"]);
    assert!(s.metrics().contains("loopctl_log_findings_total"));
    let (code, err) = terminate(s);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("1 finding(s) in the logs (--strict)"), "{err}");

    let (code, err) = terminate(Server::start(&[&torn], &[]));
    assert_eq!(code, Some(0), "{err}");

    // Damage appended while following counts as well.
    let tmp = tempfile::tempdir().unwrap();
    let (_, alpha) = root_with_alpha(tmp.path(), "alpha-20260101-000000");
    let s = Server::start(&[&alpha], &["--strict"]);
    common::logs::append(&alpha.join("history.jsonl"), "not json\n");
    s.wait_until(
        |s| {
            s.metrics()
                .contains(r#"loopctl_log_findings_total{kind="bad_line"} 1"#)
        },
        "the damaged line",
    );
    let (code, err) = terminate(s);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("1 finding(s) in the logs (--strict)"), "{err}");
}

/// --listen takes a host name (resolved) as well as an IP address; a value of neither form is
/// refused with the form expected.
#[test]
fn serve_listens_on_a_host_name_and_says_the_form_it_expects() {
    let fixtures = loopctl_tests::repo().join("fixtures");
    let s = Server::start_on("localhost:0", &[&fixtures.join("healthy-native")], &[]);
    assert!(s.metrics().contains("loopctl_runs{"));
    let ip: std::net::SocketAddr = s.addr.parse().unwrap();
    assert!(ip.ip().is_loopback(), "{ip}");
    let notices = s.notices().join("\n");
    assert!(!notices.contains("reachable from other hosts"), "{notices}");

    let tmp = tempfile::tempdir().unwrap();
    for bad in [
        "localhost",
        "9477",
        ":9477",
        "localhost:port",
        "127.0.0.1:99999",
    ] {
        let (code, err) = refused(tmp.path(), &["--listen", bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(
            err.contains("HOST:PORT") && err.contains("localhost:9477"),
            "{bad}: {err}"
        );
    }
    let (code, err) = refused(tmp.path(), &["--listen", "no-such-host.invalid:9477"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no-such-host.invalid"), "{err}");
}
