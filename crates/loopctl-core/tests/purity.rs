//! The core stays pure: its source names no file, process, clock, thread, environment or
//! network API. `clippy.toml` beside the manifest forbids the calls by their resolved paths;
//! this scan also catches a module imported and used under a short name (`use std::fs;`).

// Reading the core's own source is what this test is for.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::process",
    "std::thread",
    "std::env",
    "std::net",
    "std::os",
    "std::io::stdin",
    "std::io::stdout",
    "std::io::stderr",
    "Instant",
    "SystemTime",
    "now_utc",
    "now_local",
    "UtcDateTime::now",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("core source folder") {
        let path = entry.expect("core source entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The forbidden names on the code part of `line` (comments may talk about them).
fn violations(line: &str) -> Vec<&'static str> {
    let code = line.split("//").next().unwrap_or("");
    FORBIDDEN
        .iter()
        .copied()
        .filter(|f| code.contains(f))
        .collect()
}

#[test]
fn the_scan_sees_a_violation() {
    assert_eq!(violations("use std::fs;"), ["std::fs"]);
    assert_eq!(
        violations("let t = std::time::Instant::now(); // not pure"),
        ["Instant"]
    );
    assert_eq!(
        violations("let t = OffsetDateTime::now_utc();"),
        ["now_utc"]
    );
    assert!(violations("// std::fs is the store's").is_empty());
    assert!(violations("use std::time::Duration;").is_empty());
}

#[test]
fn core_source_uses_no_io_clock_thread_or_env() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(
        files.len() > 5,
        "no core source found under {}",
        src.display()
    );
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("core source readable");
        for (n, line) in text.lines().enumerate() {
            for f in violations(line) {
                found.push(format!(
                    "{}:{}: {f}: {}",
                    file.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "loopctl-core must stay pure (files: loopctl-store, processes: loopctl-runner, the clock: \
         an argument):\n{}",
        found.join("\n")
    );
}
