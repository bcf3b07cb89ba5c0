//! Helpers for loopctl's workspace-level tests.

pub mod module_graph;

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the shared corpus is looked for: `$LOOPCTL_SHARED` when set (a checkout elsewhere, such
/// as a git worktree), else `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("LOOPCTL_SHARED") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo().join("../shared"),
    }
}

/// `../shared` beside the repository (or `$LOOPCTL_SHARED`), when present. Under `CI=true` a missing `../shared` is a
/// failure (CI always has it); elsewhere the test is skipped with a notice, since a user's clone
/// has no `../shared`.
pub fn shared(what: &str) -> Option<PathBuf> {
    let p = shared_dir();
    if p.is_dir() {
        return Some(p);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{} is missing and CI=true: CI always has ../shared; {what} cannot be tested",
            p.display()
        );
    }
    eprintln!(
        "notice: skipping {what}: {} not found (only the project's own checkout has it)",
        p.display()
    );
    None
}

/// Every file below `dir`, sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p)
            } else {
                out.push(p)
            }
        }
    }
    out.sort();
    out
}

/// `expected` is a subset of `actual`: every key it names has an equal value (floats to 1e-9).
pub fn assert_subset(ctx: &str, expected: &serde_json::Value, actual: &serde_json::Value) {
    use serde_json::Value;
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let got = a.get(k).unwrap_or(&Value::Null);
                assert_subset(&format!("{ctx}.{k}"), v, got);
            }
        }
        (Value::Number(e), Value::Number(a)) => {
            let (e, a) = (
                e.as_f64().unwrap_or(f64::NAN),
                a.as_f64().unwrap_or(f64::NAN),
            );
            assert!((e - a).abs() < 1e-9, "{ctx}: expected {e}, got {a}");
        }
        _ => assert_eq!(expected, actual, "{ctx}"),
    }
}
