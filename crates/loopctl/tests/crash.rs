//! Crash test: SIGKILL the runner at random moments of a deterministic loop, resume it, and check
//! that the log and the outcome are exactly those of an uninterrupted run.
//!
//! LOOPCTL_CRASH_TRIALS (default 200) and LOOPCTL_CRASH_SEED change the run; the seed is printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use serde_json::{Value, json};

fn config() -> Value {
    json!({
        "max_iterations": 5,
        "pre": [{"name": "setup", "run": "sleep 0.01; echo ready"}],
        "loop": [
            {"name": "work", "run": "echo iteration $LOOPCTL_ITERATION; sleep 0.01"},
            {"name": "check", "run": "sleep 0.005; test $LOOPCTL_ITERATION -ge 3 && printf '%s\\n' '<|workflow: exit | done|>'; true"}
        ],
        "post": [{"name": "report", "run": "sleep 0.005"}]
    })
}

fn loopctl(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cargo_bin("loopctl"));
    c.current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("LOOPCTL_ROOT")
        .args(["--root", "root"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

const RUN: &[&str] = &["run", "--loop-file", "loop.json", "--run-id", "r", "-q"];

fn setup(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("loop.json"), config().to_string()).unwrap();
}

fn log_of(dir: &Path) -> PathBuf {
    dir.join("root/r/history.jsonl")
}

/// What the loop did, minus what differs between runs (times, attempts, sessions, resumes).
#[derive(Debug, PartialEq)]
struct Summary {
    finished: Vec<String>,
    status: Value,
    stop: Value,
    exit_reason: Value,
    iterations_completed: Value,
    stopped_events: usize,
}

fn summarize(dir: &Path) -> Summary {
    let text = std::fs::read_to_string(log_of(dir)).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", dir.display()))
        })
        .collect();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{}: seq not contiguous",
        dir.display()
    );
    // Every attempt of a position is numbered anew: nothing is written twice.
    let mut attempts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["event"] == "phase_started") {
        attempts
            .entry(format!("{}@{}", e["step"], e["iteration"]))
            .or_default()
            .push(e["payload"]["attempt"].as_u64().unwrap());
    }
    for (pos, a) in &attempts {
        assert_eq!(
            *a,
            (1..=a.len() as u64).collect::<Vec<_>>(),
            "{}: attempts of {pos}",
            dir.display()
        );
    }
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("root/r/run.json")).unwrap())
            .unwrap();
    Summary {
        finished: events
            .iter()
            .filter(|e| e["event"] == "phase_finished" && e["payload"]["stop_reason"] == "end_turn")
            .map(|e| format!("{}@{}", e["step"].as_str().unwrap(), e["iteration"]))
            .collect(),
        status: state["status"].clone(),
        stop: state["stop"].clone(),
        exit_reason: state["exit_reason"].clone(),
        iterations_completed: state["iterations_completed"].clone(),
        stopped_events: events.iter().filter(|e| e["event"] == "stopped").count(),
    }
}

/// Where the kill landed, read off the log it left.
fn moment(dir: &Path) -> &'static str {
    let Ok(bytes) = std::fs::read(log_of(dir)) else {
        return "before the log existed";
    };
    if bytes.is_empty() {
        return "before the first event";
    }
    if bytes.last() != Some(&b'\n') {
        return "while writing an event";
    }
    let last = bytes[..bytes.len() - 1]
        .rsplit(|&b| b == b'\n')
        .next()
        .unwrap_or_default();
    let ev: Value = serde_json::from_slice(last).unwrap_or(Value::Null);
    match ev["event"].as_str() {
        Some("phase_started") => "inside a phase",
        Some("stopped") => "after the stop event",
        Some(_) => "between phases",
        None => "while writing an event",
    }
}

/// Cuts the log's last event at byte `at` of it, as a write cut short would leave it.
fn tear(dir: &Path, at: f64) -> bool {
    let Ok(bytes) = std::fs::read(log_of(dir)) else {
        return false;
    };
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let Some(start) = body.iter().rposition(|&b| b == b'\n').map(|i| i + 1) else {
        return false;
    };
    let cut = start + 1 + ((body.len() - start - 1) as f64 * at) as usize;
    std::fs::write(log_of(dir), &bytes[..cut]).unwrap();
    true
}

fn trial(dir: &Path, delay: Duration, torn: Option<f64>) -> &'static str {
    setup(dir);
    let mut child = loopctl(dir, RUN).spawn().unwrap();
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    let mut m = moment(dir);
    if let Some(at) = torn
        && m != "after the stop event"
        && tear(dir, at)
    {
        m = "while writing an event (torn by the test)";
    }
    let has_event = std::fs::metadata(log_of(dir)).is_ok_and(|m| m.len() > 0);
    let out = if !has_event {
        loopctl(dir, RUN).output().unwrap()
    } else {
        loopctl(dir, &["resume", "r", "-q"]).output().unwrap()
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || (m == "after the stop event" && err.contains("nothing to resume")),
        "{}: killed {m}; resume: {:?} {err}",
        dir.display(),
        out.status.code()
    );
    if m.contains("torn") {
        let side = std::fs::read_dir(dir.join("root/r"))
            .unwrap()
            .flatten()
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("history.jsonl.torn-")
            });
        assert!(
            side,
            "{}: the torn bytes were not kept aside",
            dir.display()
        );
    }
    // run.json is exactly what a replay of the log gives.
    let replayed = loopctl(dir, &["replay", "r"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(replayed.status.success());
    assert_eq!(
        String::from_utf8_lossy(&replayed.stdout),
        std::fs::read_to_string(dir.join("root/r/run.json")).unwrap(),
        "{}: run.json differs from the replay",
        dir.display()
    );
    m
}

#[test]
fn sigkill_at_random_moments_then_resume_gives_the_uninterrupted_outcome() {
    let trials: usize = std::env::var("LOOPCTL_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("LOOPCTL_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    let tmp = tempfile::tempdir().unwrap();

    let reference_dir = tmp.path().join("reference");
    setup(&reference_dir);
    let started = Instant::now();
    assert!(loopctl(&reference_dir, RUN).status().unwrap().success());
    let span = started.elapsed();
    let reference = summarize(&reference_dir);
    assert_eq!(reference.finished.len(), 8, "{reference:?}");
    assert_eq!(reference.exit_reason, json!("marker"));

    let mut rng = fastrand::Rng::with_seed(seed);
    let delays: Vec<Duration> = (0..trials).map(|_| span.mul_f64(rng.f64() * 1.1)).collect();
    // One trial in five also has its last event torn at a random byte.
    let tears: Vec<Option<f64>> = (0..trials)
        .map(|i| (i % 5 == 4).then(|| rng.f64()))
        .collect();
    let tally = std::sync::Mutex::new(BTreeMap::<&'static str, usize>::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= trials {
                        return;
                    }
                    let dir = tmp.path().join(format!("t{i}"));
                    let m = trial(&dir, delays[i], tears[i]);
                    assert_eq!(
                        summarize(&dir),
                        reference,
                        "trial {i} (killed {m} after {:?})",
                        delays[i]
                    );
                    *tally.lock().unwrap().entry(m).or_default() += 1;
                    let _ = std::fs::remove_dir_all(&dir);
                }
            });
        }
    });
    let tally = tally.into_inner().unwrap();
    eprintln!(
        "crash test: {trials} trials, seed {seed}, uninterrupted run {span:?}; kills landed: {tally:?}"
    );
    assert_eq!(tally.values().sum::<usize>(), trials);
    if trials >= 100 {
        assert!(
            tally.get("inside a phase").copied().unwrap_or(0) >= trials / 10,
            "{tally:?}"
        );
        assert!(
            tally.get("between phases").copied().unwrap_or(0) >= 1,
            "{tally:?}"
        );
        assert!(tally.keys().any(|k| k.contains("torn")), "{tally:?}");
    }
}
