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
