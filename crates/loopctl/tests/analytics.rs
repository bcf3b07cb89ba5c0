#![cfg(feature = "analytics")]
//! `aggregate`, `query` and `export parquet` end to end, over logs this file writes: every
//! report's values are computed here from what the generator wrote, not read off the output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

mod common;
use common::{json_of, loopctl};

/// One phase attempt as the generator wrote it.
#[derive(Clone)]
struct Attempt {
    phase: &'static str,
    attempt: u64,
    duration_ms: u64,
    failed: bool,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
}

/// One run as the generator wrote it.
struct Run {
    run_id: String,
    loop_name: &'static str,
    day: String,
    start_ms: i64,
    /// Last event's time.
    end_ms: i64,
    iterations: u64,
    /// `None` while running; else (exit_reason, passed).
    stop: Option<(&'static str, bool)>,
    attempts: Vec<Attempt>,
    /// (iteration, score, passed, ts) of each evaluation.
    scores: Vec<(u64, f64, bool, i64)>,
}

const LOOPS: [&str; 3] = ["alpha", "beta", "gamma"];

fn rfc3339(ms: i64) -> String {
    // Every generated time is on 2026-11-20..22.
    let day = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let d = 20 + (day - DAY20) as u32;
    let (h, m, s, f) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    format!("2026-11-{d:02}T{h:02}:{m:02}:{s:02}.{f:03}Z")
}

/// 2026-11-20 in days since 1970-01-01.
const DAY20: i64 = 20_777;

/// Writes run folders under `root` (one `history.jsonl` each) and returns what they hold.
fn generate(root: &Path, runs: usize) -> Vec<Run> {
    let mut out = Vec::new();
    for i in 0..runs {
        let loop_name = LOOPS[i % 3];
        let dd = 20 + (i % 3) as i64;
        let hh = i as i64 % 24;
        let run_id = format!("{loop_name}-202611{dd}-{hh:02}0000");
        let start_ms = (DAY20 + dd - 20) * 86_400_000 + hh * 3_600_000;
        let k = 1 + (i as u64 % 4);
        let running = i % 5 == 4;
        let passes = !running && i % 2 == 0;
        // gamma's scores never move: a score stagnation once it has three evaluations.
        let flat = loop_name == "gamma";
        let mut lines = Vec::new();
        let mut seq = 0u64;
        let mut t = start_ms;
        let mut ev = |t: i64,
                      event: &str,
                      iteration: Option<u64>,
                      step: Option<&str>,
                      payload: Value| {
            seq += 1;
            let mut e = json!({"v": 1, "seq": seq, "ts": rfc3339(t), "run_id": run_id, "event": event, "payload": payload});
            if let Some(it) = iteration {
                e["iteration"] = json!(it);
            }
            if let Some(s) = step {
                e["step"] = json!(s);
            }
            lines.push(e.to_string());
        };
        ev(
            t,
            "run_started",
            None,
            None,
            json!({"max_iterations": 4, "task": "t"}),
        );
        let mut attempts = Vec::new();
        let mut scores = Vec::new();
        for it in 1..=k {
            let retry = (i as u64 + it).is_multiple_of(3);
            let builds = if retry { 2 } else { 1 };
            for a in 1..=builds {
                let failed = retry && a == 1;
                let dur = 1000 * (i as u64 + 1) * it + 500 * a;
                attempts.push(Attempt {
                    phase: "build",
                    attempt: a,
                    duration_ms: dur,
                    failed,
                    input_tokens: 100 * (i as u64 + 1),
                    output_tokens: 10 * it,
                    cost_usd: 0.01 * (i as f64 + 1.0),
                });
                ev(
                    t,
                    "phase_started",
                    Some(it),
                    Some("build"),
                    json!({"attempt": a, "kind": "loop"}),
                );
                t += dur as i64;
                ev(
                    t,
                    "phase_finished",
                    Some(it),
                    Some("build"),
                    json!({"attempt": a, "kind": "loop", "duration_ms": dur,
                        "exit_code": if failed { 1 } else { 0 },
                        "stop_reason": if failed { "error" } else { "end_turn" },
                        "usage": {"input_tokens": 100 * (i as u64 + 1), "output_tokens": 10 * it,
                            "cost_usd": 0.01 * (i as f64 + 1.0), "turns": 1, "model": format!("m-{loop_name}")}}),
                );
                if failed {
                    ev(
                        t + 1,
                        "phase_retry",
                        Some(it),
                        Some("build"),
                        json!({"attempt": a, "next_attempt": a + 1, "exit_code": 1}),
                    );
                }
                t += 100;
            }
            let dur = 200 * (i as u64 + it);
            attempts.push(Attempt {
                phase: "review",
                attempt: 1,
                duration_ms: dur,
                failed: false,
                input_tokens: 7,
                output_tokens: 3,
                cost_usd: 0.5,
            });
            ev(
                t,
                "phase_started",
                Some(it),
                Some("review"),
                json!({"attempt": 1, "kind": "loop"}),
            );
            t += dur as i64;
            ev(
                t,
                "phase_finished",
                Some(it),
                Some("review"),
                json!({"attempt": 1, "kind": "loop", "duration_ms": dur, "exit_code": 0, "stop_reason": "end_turn",
                    "usage": {"input_tokens": 7, "output_tokens": 3, "cost_usd": 0.5}}),
            );
            let last = it == k;
            let score = if flat {
                0.5
            } else if passes && last {
                0.9
            } else {
                0.1 + 0.15 * it as f64 + 0.01 * i as f64
            };
            let ok = passes && last;
            t += 10;
            ev(
                t,
                "evaluation_done",
                Some(it),
                Some("review"),
                json!({"score": score, "passed": ok, "threshold": 0.8}),
            );
            scores.push((it, score, ok, t));
            t += 100;
        }
        let stop = if running {
            None
        } else if passes {
            Some(("marker", true))
        } else {
            Some(("max_iterations", false))
        };
        if let Some((reason, _)) = stop {
            t += 50;
            ev(
                t,
                "stopped",
                None,
                None,
                json!({"exit_reason": reason, "iterations_completed": k}),
            );
        }
        let dir = root.join(&run_id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
        out.push(Run {
            run_id,
            loop_name,
            day: format!("2026-11-{dd}"),
            start_ms,
            // A running run's last event is its last evaluation.
            end_ms: if stop.is_some() { t } else { t - 100 },
            iterations: k,
            stop,
            attempts,
            scores,
        });
    }
    out
}

fn report(name: &str, root: &Path) -> Vec<Value> {
    let v = json_of(&["aggregate", "--report", name, "--json"], &[root]);
    v.as_array().unwrap().clone()
}

/// Linear interpolation between closest ranks (numpy's default).
fn quantile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = p * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

fn close(a: &Value, b: f64, what: &str) {
    let a = a
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {a} is not a number"));
    assert!(
        (a - b).abs() < 1e-9 * b.abs().max(1.0),
        "{what}: {a} != {b}"
    );
}

fn by<'a>(rows: &'a [Value], key: &str, val: &str) -> &'a Value {
    rows.iter()
        .find(|r| {
            r[key].as_str() == Some(val)
                || r[key].as_u64().map(|n| n.to_string()).as_deref() == Some(val)
        })
        .unwrap_or_else(|| panic!("no row with {key}={val} in {rows:#?}"))
}

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    runs: Vec<Run>,
}

fn fixture(n: usize) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let runs = generate(&root, n);
    Fixture {
        _tmp: tmp,
        root,
        runs,
    }
}

#[test]
fn success_rate_by_loop() {
    let f = fixture(15);
    let rows = report("success-rate", &f.root);
    assert_eq!(rows.len(), 3);
    for l in LOOPS {
        let mine: Vec<&Run> = f.runs.iter().filter(|r| r.loop_name == l).collect();
        let ended = mine.iter().filter(|r| r.stop.is_some()).count() as u64;
        let passed = mine.iter().filter(|r| r.stop.is_some_and(|s| s.1)).count() as u64;
        let row = by(&rows, "loop", l);
        assert_eq!(row["runs"], json!(mine.len()), "{l}");
        assert_eq!(row["ended"], json!(ended), "{l}");
        assert_eq!(row["passed"], json!(passed), "{l}");
        close(&row["success_rate"], passed as f64 / ended as f64, l);
    }
}

#[test]
fn iterations_by_outcome() {
    let f = fixture(15);
    let rows = report("iterations", &f.root);
    let mut groups: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in &f.runs {
        let status = match r.stop {
            None => "running",
            Some((_, true)) => "completed",
            Some(_) => "stopped",
        };
        groups.entry(status).or_default().push(r.iterations as f64);
    }
    assert_eq!(rows.len(), groups.len());
    for (status, its) in groups {
        let row = by(&rows, "status", status);
        assert_eq!(row["runs"], json!(its.len()));
        close(&row["p50"], quantile(&its, 0.5), status);
        close(&row["p90"], quantile(&its, 0.9), status);
        close(&row["max"], quantile(&its, 1.0), status);
    }
}

fn attempts_by_phase(runs: &[Run]) -> BTreeMap<&'static str, Vec<Attempt>> {
    let mut m: BTreeMap<&str, Vec<Attempt>> = BTreeMap::new();
    for r in runs {
        for a in &r.attempts {
            m.entry(a.phase).or_default().push(a.clone());
        }
    }
    m
}

#[test]
fn phase_durations_and_flaky_phases() {
    let f = fixture(15);
    let durations = report("phase-durations", &f.root);
    let flaky = report("flaky-phases", &f.root);
    let phases = attempts_by_phase(&f.runs);
    for (phase, atts) in &phases {
        let d: Vec<f64> = atts.iter().map(|a| a.duration_ms as f64).collect();
        let row = by(&durations, "phase", phase);
        assert_eq!(row["attempts"], json!(d.len()));
        close(&row["p50_ms"], quantile(&d, 0.5), phase);
        close(&row["p95_ms"], quantile(&d, 0.95), phase);
        close(&row["max_ms"], quantile(&d, 1.0), phase);
        let retries = atts.iter().filter(|a| a.attempt > 1).count();
        let failures = atts.iter().filter(|a| a.failed).count();
        let row = by(&flaky, "phase", phase);
        assert_eq!(row["attempts"], json!(atts.len()), "{phase}");
        assert_eq!(row["retries"], json!(retries), "{phase}");
        assert_eq!(row["failures"], json!(failures), "{phase}");
        close(
            &row["failure_rate"],
            failures as f64 / atts.len() as f64,
            phase,
        );
    }
    // Flakiest first: build is the one that fails.
    assert_eq!(flaky[0]["phase"], "build");
}

#[test]
fn exit_and_stop_reasons() {
    let f = fixture(15);
    let rows = report("reasons", &f.root);
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in &f.runs {
        if let Some((reason, _)) = r.stop {
            *want.entry(("exit".into(), reason.into())).or_default() += 1;
        }
        for a in &r.attempts {
            let s = if a.failed { "error" } else { "end_turn" };
            *want.entry(("stop".into(), s.into())).or_default() += 1;
        }
    }
    let got: BTreeMap<(String, String), u64> = rows
        .iter()
        .map(|r| {
            (
                (
                    r["kind"].as_str().unwrap().to_string(),
                    r["reason"].as_str().unwrap().to_string(),
                ),
                r["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn scores_per_iteration_and_first_pass() {
    let f = fixture(15);
    let rows = report("scores", &f.root);
    let mut per: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for r in &f.runs {
        for (it, s, _, _) in &r.scores {
            per.entry(*it).or_default().push(*s);
        }
    }
    assert_eq!(rows.len(), per.len());
    for (it, s) in &per {
        let row = by(&rows, "iteration", &it.to_string());
        let n = s.len() as f64;
        let mean = s.iter().sum::<f64>() / n;
        assert_eq!(row["runs"], json!(s.len()));
        close(&row["mean"], mean, "mean");
        close(&row["p50"], quantile(s, 0.5), "p50");
        close(&row["min"], quantile(s, 0.0), "min");
        close(&row["max"], quantile(s, 1.0), "max");
        if s.len() > 1 {
            let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            close(&row["std"], var.sqrt(), "std");
        }
    }
    let rows = report("first-pass", &f.root);
    let mut per_loop: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in &f.runs {
        if let Some((it, _, _, ts)) = r.scores.iter().find(|s| s.2) {
            let e = per_loop.entry(r.loop_name).or_default();
            e.0.push(*it as f64);
            e.1.push((ts - r.start_ms) as f64);
        }
    }
    assert_eq!(rows.len(), per_loop.len());
    for (l, (its, ms)) in per_loop {
        let row = by(&rows, "loop", l);
        assert_eq!(row["runs"], json!(its.len()));
        close(&row["iterations_p50"], quantile(&its, 0.5), l);
        close(&row["iterations_max"], quantile(&its, 1.0), l);
        close(&row["ms_p50"], quantile(&ms, 0.5), l);
        close(&row["ms_p90"], quantile(&ms, 0.9), l);
    }
}

#[test]
fn stagnation_by_detector() {
    let f = fixture(15);
    let rows = report("stagnation", &f.root);
    // Flat scores over three evaluations or more: the score rule (two without progress).
    let mut want: BTreeMap<&str, u64> = BTreeMap::new();
    for r in &f.runs {
        if r.loop_name == "gamma" && r.scores.len() >= 3 {
            *want.entry(r.loop_name).or_default() += 1;
        }
    }
    assert!(!want.is_empty(), "the fixture has a stagnating run");
    let got: BTreeMap<&str, u64> = rows
        .iter()
        .filter(|r| r["detector"] == "score")
        .map(|r| (r["loop"].as_str().unwrap(), r["runs"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn tokens_and_cost_by_loop_and_day_and_slowest_runs() {
    let f = fixture(15);
    let rows = report("cost", &f.root);
    let mut want: BTreeMap<(&str, &str), (u64, u64, u64, f64)> = BTreeMap::new();
    for r in &f.runs {
        let e = want.entry((r.loop_name, &r.day)).or_default();
        e.0 += 1;
        for a in &r.attempts {
            e.1 += a.input_tokens;
            e.2 += a.output_tokens;
            e.3 += a.cost_usd;
        }
    }
    assert_eq!(rows.len(), want.len());
    for ((l, d), (n, i, o, c)) in want {
        let row = rows
            .iter()
            .find(|r| r["loop"] == l && r["day"] == d)
            .unwrap_or_else(|| panic!("no {l} {d}"));
        assert_eq!(row["runs"], json!(n));
        assert_eq!(row["input_tokens"], json!(i), "{l} {d}");
        assert_eq!(row["output_tokens"], json!(o), "{l} {d}");
        close(&row["cost_usd"], c, "cost");
    }
    let rows = report("slowest", &f.root);
    let mut d: Vec<(i64, &str)> = f
        .runs
        .iter()
        .map(|r| (r.end_ms - r.start_ms, r.run_id.as_str()))
        .collect();
    d.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let got: Vec<(i64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["duration_ms"].as_i64().unwrap(),
                r["run_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, d[..10].to_vec());
}

#[test]
fn the_summary_has_every_report_and_group_by_filters() {
    let f = fixture(15);
    let all = json_of(&["aggregate", "--json"], &[&f.root]);
    for name in [
        "success-rate",
        "iterations",
        "phase-durations",
        "flaky-phases",
        "reasons",
        "scores",
        "first-pass",
        "stagnation",
        "cost",
        "slowest",
    ] {
        assert!(all[name].is_array(), "{name} missing from the summary");
    }
    // --by loop,day --where status=completed --since: counts from the generator.
    let rows = json_of(
        &[
            "aggregate",
            "--by",
            "loop,day",
            "--where",
            "status=completed",
            "--since",
            "2026-11-21",
            "--json",
        ],
        &[&f.root],
    );
    let mut want: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for r in &f.runs {
        if r.stop.is_some_and(|s| s.1) && r.day.as_str() >= "2026-11-21" {
            *want.entry((r.loop_name, &r.day)).or_default() += 1;
        }
    }
    let got: BTreeMap<(&str, &str), u64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                (r["loop"].as_str().unwrap(), r["day"].as_str().unwrap()),
                r["runs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    // --by phase groups attempts.
    let rows = json_of(&["aggregate", "--by", "phase", "--json"], &[&f.root]);
    let phases = attempts_by_phase(&f.runs);
    for (phase, atts) in &phases {
        assert_eq!(
            by(rows.as_array().unwrap(), "phase", phase)["attempts"],
            json!(atts.len())
        );
    }
}

#[test]
fn formats_csv_ndjson_and_table() {
    let f = fixture(6);
    let out = loopctl()
        .args(["aggregate", "--report", "success-rate", "--format", "csv"])
        .arg(&f.root)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("loop,runs,ended,passed,success_rate"));
    assert_eq!(lines.count(), 3);
    let out = loopctl()
        .args(["aggregate", "--report", "slowest", "--format", "ndjson"])
        .arg(&f.root)
        .output()
        .unwrap();
    let n = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).unwrap().is_object())
        .count();
    assert_eq!(n, 6);
    // No progress bar when stderr is not a terminal: stderr stays empty.
    let out = loopctl().arg("aggregate").arg(&f.root).output().unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("== flaky-phases")
    );
}

#[test]
fn damaged_lines_are_reported_and_a_missing_path_is_an_error() {
    let f = fixture(3);
    let log = f.root.join(&f.runs[0].run_id).join("history.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    let offset = text.find('\n').unwrap() + 1;
    text.insert_str(offset, "{not json\n");
    std::fs::write(&log, text).unwrap();
    let out = loopctl()
        .args(["aggregate", "--report", "success-rate", "--json"])
        .arg(&f.root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}:2: byte {offset}", log.display())),
        "{err}"
    );
    assert!(err.contains("1 finding(s) in 1 file(s)"), "{err}");
    // The damaged line costs nothing else: every run is still counted.
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let total: u64 = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runs"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 3);
    // A path that is no file, folder or run: exit 2, as for `export prometheus`.
    let missing = f.root.join("nope.jsonl");
    let out = loopctl()
        .args(["aggregate"])
        .arg(&f.root)
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&missing.display().to_string()), "{err}");
}

#[test]
fn query_runs_sql_and_a_bad_query_exits_2_with_polars_message() {
    let f = fixture(9);
    let rows = json_of(
        &[
            "query",
            "SELECT loop, count(*) AS n FROM runs WHERE status = 'stopped' GROUP BY loop ORDER BY loop",
            "--json",
        ],
        &[&f.root],
    );
    let mut want: BTreeMap<&str, u64> = BTreeMap::new();
    for r in &f.runs {
        if r.stop.is_some_and(|s| !s.1) {
            *want.entry(r.loop_name).or_default() += 1;
        }
    }
    let got: BTreeMap<&str, u64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["loop"].as_str().unwrap(), r["n"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want);
    let events: usize = f
        .runs
        .iter()
        .map(|r| {
            std::fs::read_to_string(f.root.join(&r.run_id).join("history.jsonl"))
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    let rows = json_of(
        &["query", "SELECT count(*) AS n FROM events", "--json"],
        &[&f.root],
    );
    assert_eq!(rows[0]["n"], json!(events));

    let out = loopctl()
        .args(["query", "SELECT nosuchcolumn FROM runs"])
        .arg(&f.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nosuchcolumn"), "{err}");
    let out = loopctl()
        .args(["query", "SELEC oops"])
        .arg(&f.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn the_corpus_reads_into_the_tables() {
    let Some(shared) = loopctl_tests::shared("the analytics tables over the corpus") else {
        return;
    };
    let aif = shared.join("corpus/aif-loop/vedo-hub");
    let avenor = shared.join("corpus/avenor/accumulate.ndjson");
    let rows = json_of(
        &[
            "query",
            "SELECT dialect, count(*) AS n FROM runs GROUP BY dialect ORDER BY dialect",
            "--json",
        ],
        &[&aif, &avenor],
    );
    let runs = std::fs::read_dir(&aif)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("history.jsonl").is_file())
        .count();
    assert_eq!(
        rows,
        json!([{"dialect": "aif-loop", "n": runs}, {"dialect": "avenor", "n": 1}])
    );
    // Every readable event of the corpus is a row of `events`.
    let lines: usize = std::fs::read_dir(&aif)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("history.jsonl")).ok())
        .chain(std::fs::read_to_string(&avenor).ok())
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
        .sum();
    let rows = json_of(
        &["query", "SELECT count(*) AS n FROM events", "--json"],
        &[&aif, &avenor],
    );
    assert_eq!(rows[0]["n"], json!(lines));
}

#[test]
fn tokens_and_cost_are_null_not_zero_where_no_log_records_usage() {
    let clean = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aif-loop-clean");
    let rows = report("cost", &clean);
    assert!(!rows.is_empty(), "the fixture has a run");
    for row in &rows {
        for k in ["input_tokens", "output_tokens", "cost_usd"] {
            assert_eq!(row[k], Value::Null, "{k} in {row}");
        }
    }
    // A group where some runs record usage sums what is known.
    let f = fixture(6);
    assert!(
        report("cost", &f.root)
            .iter()
            .all(|r| r["cost_usd"].is_f64())
    );
}

/// Files under `dir` with their bytes, by path.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn export_parquet_writes_a_partition_per_table_and_day_and_a_failure_exits_2() {
    let f = fixture(12);
    let lake = f._tmp.path().join("lake");
    let done = json_of(
        &[
            "export",
            "parquet",
            "--json",
            "--out",
            lake.to_str().unwrap(),
        ],
        &[&f.root],
    );
    assert!(done["unchanged"].as_array().unwrap().is_empty());
    let files = files_under(&lake);
    // A partition per table and day of the runs, and nothing else.
    let days: std::collections::BTreeSet<&str> = f.runs.iter().map(|r| r.day.as_str()).collect();
    for table in ["runs", "phases", "events"] {
        for day in &days {
            let p = lake.join(format!("{table}/day={day}/part-0.parquet"));
            assert!(
                files.get(&p).is_some_and(|b| b.starts_with(b"PAR1")),
                "{}",
                p.display()
            );
        }
    }
    assert_eq!(files.len(), 3 * days.len(), "{:?}", files.keys());
    assert_eq!(done["written"].as_array().unwrap().len(), files.len());
    // Again: every partition is unchanged, no byte moves.
    let again = json_of(
        &[
            "export",
            "parquet",
            "--json",
            "--out",
            lake.to_str().unwrap(),
        ],
        &[&f.root],
    );
    assert!(again["written"].as_array().unwrap().is_empty(), "{again}");
    assert_eq!(files_under(&lake), files);
    // An output folder that is a file: exit 2, the path named, nothing left behind.
    let blocked = f._tmp.path().join("blocked");
    std::fs::write(&blocked, b"").unwrap();
    let out = loopctl()
        .args(["export", "parquet", "--quiet", "--out"])
        .arg(&blocked)
        .arg(&f.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("blocked"), "{err}");
    let left: Vec<_> = std::fs::read_dir(f._tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
