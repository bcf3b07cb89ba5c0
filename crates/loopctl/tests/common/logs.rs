//! Logs written by hand for the end-to-end tests of `serve` and `export prometheus`, and a
//! scrape read back.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// One native event line (with its newline), at second `seq % 60` of 2026-01-01.
pub fn event(seq: u64, run: &str, name: &str, payload: Value) -> String {
    json!({"v": 1, "seq": seq, "ts": format!("2026-01-01T00:00:{:02}.000Z", seq % 60),
           "run_id": run, "event": name, "iteration": 1, "payload": payload})
    .to_string()
        + "\n"
}

/// `<tmp>/root/alpha`, its log holding `run`'s `run_started`: (root, alpha).
pub fn root_with_alpha(tmp: &Path, run: &str) -> (PathBuf, PathBuf) {
    let root = tmp.join("root");
    let a = root.join("alpha");
    std::fs::create_dir_all(&a).unwrap();
    append(
        &a.join("history.jsonl"),
        &event(1, run, "run_started", json!({})),
    );
    (root, a)
}

pub fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The value of one series (its name and labels, whole) in a scrape.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}
