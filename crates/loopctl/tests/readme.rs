//! The README's first screen works as written: the quick-start run, the commands that look at
//! it afterwards, and the damaged-run recipe, run twice in a row (as a new user would), with the
//! built binary in place of `cargo run -q --`.

use std::path::Path;
use std::process::Command;

/// The `cargo run` lines of the README's ```sh blocks, up to the section after "The first
/// five minutes", with continuation lines joined.
fn first_screen_commands(readme: &str) -> Vec<String> {
    let end = readme.find("## What works today").unwrap_or(readme.len());
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme[..end].lines() {
        if line.starts_with("```") {
            in_block = line.starts_with("```sh");
            continue;
        }
        if !in_block {
            continue;
        }
        let line = line.split(" #").next().unwrap_or(line).trim_end();
        if let Some(cont) = line.strip_suffix('\\') {
            pending.push_str(cont);
            continue;
        }
        pending.push_str(line);
        if pending.contains("cargo run") {
            out.push(std::mem::take(&mut pending));
        }
        pending.clear();
    }
    out
}

#[test]
fn the_readme_first_screen_runs_as_written_twice() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let commands = first_screen_commands(&readme);
    assert!(
        commands.len() >= 6,
        "the README's first screen lost its commands: {commands:#?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("loopctl-demo");
    let bin = env!("CARGO_BIN_EXE_loopctl");
    let mut script = String::new();
    for round in 0..2 {
        for (i, c) in commands.iter().enumerate() {
            let c = c
                .replace("cargo run -q --", bin)
                .replace("/tmp/loopctl-demo", &demo.to_string_lossy());
            // Braces, not a subshell: the quick start's `d=...` is used by what follows.
            script.push_str(&format!(
                "{{ {c}; }} >/dev/null 2>&1 || echo \"round {round}: command {i} failed\"\n"
            ));
        }
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(&repo)
        .env("TMPDIR", tmp.path())
        .env_remove("LOOPCTL_ROOT")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.is_empty(), "{said}\n{script}");
    // The recipe rebuilt the damaged run from a fresh copy: the log wins.
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(demo.join("run.json")).unwrap()).unwrap();
    assert_eq!(state["status"], "completed");
    assert!(demo.join("run.json.damaged").is_file());
    assert!(!demo.join("damaged-run").exists(), "copied into itself");
}
