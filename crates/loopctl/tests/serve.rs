//! End-to-end tests of `loopctl serve` and `loopctl export prometheus`: a real server on a
//! loopback port, real HTTP over TCP, promtool where installed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use serde_json::{Value, json};

mod common;
use common::logs::{append, event, root_with_alpha, value};
use common::server::Server;

fn fixtures() -> PathBuf {
    loopctl_tests::repo().join("fixtures")
}

/// Sample lines (no comments), without the server's own scrape duration.
fn samples(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter(|l| !l.starts_with("loopctl_scrape_duration_seconds"))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn export(paths: &[&Path], textfile: &Path) {
    let out = Command::new(cargo_bin("loopctl"))
        .args(["export", "prometheus", "--textfile"])
        .arg(textfile)
        .args(paths)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `promtool` when installed; under CI=true it must be.
fn promtool() -> Option<&'static str> {
    if Command::new("promtool").arg("--version").output().is_ok() {
        return Some("promtool");
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "promtool is missing and CI=true (.ci/run installs Debian's prometheus package)"
    );
    eprintln!("notice: skipping the promtool check: promtool not found");
    None
}

fn promtool_check(text: &str) {
    let Some(p) = promtool() else { return };
    let mut c = Command::new(p)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn all_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("history.jsonl").is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn the_textfile_and_a_scrape_print_the_same_series_and_pass_promtool() {
    let paths = all_fixtures();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("loopctl.prom");
    export(&refs, &file);
    let textfile = std::fs::read_to_string(&file).unwrap();
    let s = Server::start(&refs, &[]);
    let scrape = s.metrics();
    assert!(scrape.contains("loopctl_scrape_duration_seconds"));
    assert!(samples(&textfile).len() > 100, "{textfile}");
    assert_eq!(samples(&textfile), samples(&scrape));
    promtool_check(&scrape);
    promtool_check(&textfile);
    // No temporary file is left beside the textfile.
    let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1);

    let (code, head, body) = s.request(
        b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n",
    );
    assert_eq!(code, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(body.ends_with("# EOF\n"));
    // Damaged lines were reported on stderr, each naming its file.
    let notices = s.notices().join("\n");
    assert!(notices.contains("bad-middle/history.jsonl"), "{notices}");
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn a_scrape_of_the_corpus_passes_promtool_and_lists_its_runs() {
    let Some(shared) = loopctl_tests::shared("the corpus scrape") else {
        return;
    };
    let corpus = shared.join("corpus");
    let roots = [
        corpus.join("aif-loop/vedo-hub"),
        corpus.join("avenor/accumulate.ndjson"),
    ];
    let refs: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
    let s = Server::start(&refs, &[]);
    let scrape = s.metrics();
    promtool_check(&scrape);
    let folders = std::fs::read_dir(&roots[0])
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("history.jsonl").is_file())
        .count();
    let (code, body) = s.get("/api/runs");
    assert_eq!(code, 200);
    let rows: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert!(rows.len() > folders, "{body}");
    // The same fields as `list --json`.
    let listed = Command::new(cargo_bin("loopctl"))
        .arg("list")
        .arg(&roots[0])
        .arg("--json")
        .output()
        .unwrap();
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&rows[0]), keys(&listed[0]));
    // The same values too (aif-loop's `max_iterations` from run.json included), but the idle
    // time: it is measured at each request.
    for l in &listed {
        let row = rows.iter().find(|r| r["run_id"] == l["run_id"]).unwrap();
        for k in keys(l).iter().filter(|k| *k != "idle_ms") {
            assert_eq!(row[k], l[k], "{k} of {}", l["run_id"]);
        }
    }
}

#[test]
fn runs_appended_added_torn_and_deleted_while_serving_show_in_the_next_scrapes() {
    let tmp = tempfile::tempdir().unwrap();
    let run_a = "alpha-20260101-000000";
    let (root, a) = root_with_alpha(tmp.path(), run_a);
    let s = Server::start(&[&root], &[]);
    let started = r#"loopctl_runs_started_total{loop="alpha"}"#;
    assert_eq!(value(&s.metrics(), started), Some(1.0));

    // An event appended to a followed log.
    append(
        &a.join("history.jsonl"),
        &event(
            2,
            run_a,
            "evaluation_done",
            json!({"score": 0.5, "passed": false}),
        ),
    );
    let evals = r#"loopctl_evaluations_total{loop="alpha",result="fail"}"#;
    s.wait_until(
        |s| value(&s.metrics(), evals) == Some(1.0),
        "the appended event",
    );

    // A new run folder.
    let b = root.join("beta");
    std::fs::create_dir_all(&b).unwrap();
    append(
        &b.join("history.jsonl"),
        &event(1, "beta-20260101-000000", "run_started", json!({})),
    );
    let beta = r#"loopctl_runs_started_total{loop="beta"}"#;
    s.wait_until(|s| value(&s.metrics(), beta) == Some(1.0), "the new run");

    // A torn line: scrapes go on; once its writer ends the line, it is a damaged line and
    // the events after it count.
    append(&a.join("history.jsonl"), r#"{"v":1,"seq":3,"run_id":"al"#);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(value(&s.metrics(), evals), Some(1.0));
    append(
        &a.join("history.jsonl"),
        &format!(
            "\n{}",
            event(
                4,
                run_a,
                "evaluation_done",
                json!({"score": 0.6, "passed": false})
            )
        ),
    );
    s.wait_until(
        |s| value(&s.metrics(), evals) == Some(2.0),
        "the event after the torn line",
    );
    let m = s.metrics();
    assert_eq!(
        value(&m, r#"loopctl_log_findings_total{kind="bad_line"}"#),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        value(&m, r#"loopctl_log_findings_total{kind="seq_gap"}"#),
        Some(1.0)
    );
    let notices = s.notices().join("\n");
    assert_eq!(notices.matches("not valid JSON").count(), 1, "{notices}");

    // A deleted run folder leaves the runs gauge; what it counted stays counted, else
    // Prometheus would read a reset and `increase()` count it all again.
    let beta_running = r#"loopctl_runs{loop="beta",status="running"}"#;
    assert_eq!(value(&s.metrics(), beta_running), Some(1.0));
    std::fs::remove_dir_all(&b).unwrap();
    s.wait_until(
        |s| value(&s.metrics(), beta_running).unwrap_or(0.0) == 0.0,
        "the deleted run to leave the gauge",
    );
    let m = s.metrics();
    assert_eq!(value(&m, beta), Some(1.0), "{m}");
    assert_eq!(value(&m, started), Some(1.0));
    assert_eq!(
        value(
            &m,
            r#"loopctl_events_total{dialect="native",event="run_started"}"#
        ),
        Some(2.0),
        "{m}"
    );
}

/// Start-up takes a root's subfolders without a look inside (no stat of every log before the
/// replay): those holding no log (none yet, a folder, a fifo) are skipped, not waited on, not
/// counted, and a log that appears later is picked up.
/// A damaged line read while following is named by file and line, as at start-up: the lines
/// the replay read are counted.
#[test]
fn damaged_lines_read_while_following_are_named_by_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let run = "alpha-20260101-000000";
    let (root, a) = root_with_alpha(tmp.path(), run);
    let log = a.join("history.jsonl");
    append(
        &log,
        &event(2, run, "evaluation_done", json!({"score": 0.5})),
    );
    let s = Server::start(&[&root], &["--max-line-bytes", "300"]);
    let before = std::fs::metadata(&log).unwrap().len();
    append(
        &log,
        &format!("{{\"x\":\"{}\"}}\nnot json\n", "y".repeat(400)),
    );
    s.wait_until(
        |s| {
            value(
                &s.metrics(),
                r#"loopctl_log_findings_total{kind="bad_line"}"#,
            ) == Some(1.0)
        },
        "the damaged lines",
    );
    let notices = s.notices().join("\n");
    let log = log.display();
    assert!(
        notices.contains(&format!(
            "{log}:3: byte {before}: oversize: line of 408 bytes"
        )),
        "{notices}"
    );
    assert!(
        notices.contains(&format!("{log}:4: byte {}: bad_line", before + 409)),
        "{notices}"
    );
    // Printed as `export prometheus` and the read commands print findings.
    assert!(
        notices.contains(&format!("warning: {log}:4: byte")),
        "{notices}"
    );
}

#[test]
fn subfolders_without_a_log_are_skipped_at_start_up_and_picked_up_once_they_have_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _) = root_with_alpha(tmp.path(), "alpha-20260101-000000");
    let pending = root.join("pending");
    std::fs::create_dir_all(root.join("folder/history.jsonl")).unwrap();
    std::fs::create_dir_all(&pending).unwrap();
    std::fs::create_dir_all(root.join("fifo")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(root.join("fifo/history.jsonl"))
        .status();
    assert!(fifo.is_ok_and(|s| s.success()), "mkfifo");
    std::fs::write(root.join("notes.txt"), "not a run\n").unwrap();

    let s = Server::start(&[&root], &[]);
    let notices = s.notices().join("\n");
    assert!(notices.contains("1 log(s) replayed"), "{notices}");
    let (code, runs) = s.get("/api/runs");
    assert_eq!(code, 200);
    let runs: Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");

    append(
        &pending.join("history.jsonl"),
        &event(1, "pending-20260101-000000", "run_started", json!({})),
    );
    let later = r#"loopctl_runs_started_total{loop="pending"}"#;
    s.wait_until(
        |s| value(&s.metrics(), later) == Some(1.0),
        "the log that came later",
    );
}

/// A log that cannot be read (a link to itself) is an `unreadable` row of `/api/runs` with its
/// error, as `list --json` shows it, not an empty run.
#[test]
fn an_unreadable_log_is_an_unreadable_row_as_list_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _) = root_with_alpha(tmp.path(), "alpha-20260101-000000");
    std::fs::create_dir_all(root.join("loop")).unwrap();
    std::os::unix::fs::symlink("../loop/history.jsonl", root.join("loop/history.jsonl")).unwrap();
    let s = Server::start(&[&root], &[]);
    let row = |s: &Server| -> Option<Value> {
        let runs: Value = serde_json::from_str(&s.get("/api/runs").1).ok()?;
        runs.as_array()?
            .iter()
            .find(|r| r["run_id"] == "loop")
            .cloned()
    };
    s.wait_until(|s| row(s).is_some(), "the unreadable log's row");
    let row = row(&s).unwrap();
    assert_eq!(row["status"], "unreadable", "{row}");
    assert!(
        row["error"]
            .as_str()
            .unwrap_or_default()
            .contains("symbolic link loop"),
        "{row}"
    );
    let out = Command::new(cargo_bin("loopctl"))
        .args(["list", "--json"])
        .arg(&root)
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "loop")
        .unwrap();
    assert_eq!(
        (&listed["status"], &listed["error"]),
        (&row["status"], &row["error"])
    );
}

#[test]
fn before_the_first_run_serve_starts_empty_and_picks_the_runs_up_as_they_appear() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start_in(tmp.path(), &[], &[]);
    let early = s.early.join("\n");
    assert!(
        early.contains("no runs under .loopctl yet: serving its runs as they appear"),
        "{early}"
    );
    assert_eq!(s.get("/api/runs"), (200, "[]\n".to_string()));
    // The first run creates the default root and its folder.
    let run = "alpha-20260101-000000";
    let dir = tmp.path().join(".loopctl").join(run);
    std::fs::create_dir_all(&dir).unwrap();
    append(
        &dir.join("history.jsonl"),
        &event(1, run, "run_started", json!({})),
    );
    s.wait_until(
        |s| value(&s.metrics(), r#"loopctl_runs_started_total{loop="alpha"}"#) == Some(1.0),
        "the first run",
    );
    // A root named (--root) must exist.
    let out = Command::new(cargo_bin("loopctl"))
        .current_dir(tmp.path())
        .args(["--root", "missing", "serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no root folder missing"), "{err}");
}

#[test]
fn bad_requests_are_answered_and_a_slow_client_does_not_stall_a_scrape() {
    let s = Server::start(&[&fixtures().join("native-clean")], &[]);
    assert_eq!(s.request(b"garbage\r\n\r\n").0, 400);
    assert_eq!(s.request(b"\xff\xfe\r\n\r\n").0, 400);
    assert_eq!(s.request(b"POST /metrics HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(s.request(b"DELETE /api/runs HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(s.request(b"OPTIONS * HTTP/1.1\r\n\r\n").0, 405);
    let absolute = format!("GET http://{}/healthz HTTP/1.1\r\n\r\n", s.addr);
    assert_eq!(s.request(absolute.as_bytes()).0, 200);
    assert_eq!(s.get("/nope").0, 404);
    assert_eq!(s.get("/metrics/../etc/passwd").0, 404);
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 64 << 10));
    huge.extend_from_slice(b"\r\n\r\n");
    assert_eq!(s.request(&huge).0, 431);
    // A client closing early, a HEAD request.
    drop(TcpStream::connect(&s.addr).unwrap());
    let (code, head, body) = s.request(b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!((code, body.as_str()), (200, ""), "{head}");

    // Clients sending one byte a second, more of them than there are workers: a scrape made
    // meanwhile is answered while they are all still sending.
    let done = Arc::new(Mutex::new(0));
    let slow: Vec<_> = (0..8)
        .map(|_| {
            let (addr, done) = (s.addr.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                for b in b"GET /metrics HTTP/1.1\r\n" {
                    if c.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                *done.lock().unwrap() += 1;
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let scrape = s.metrics();
    assert!(scrape.contains("loopctl_runs_started_total"));
    assert_eq!(
        *done.lock().unwrap(),
        0,
        "the slow clients were still sending"
    );
    for t in slow {
        t.join().unwrap();
    }
}

#[test]
fn sigterm_stops_the_server_cleanly_and_live_series_can_be_turned_off() {
    let s = Server::start(
        &[&fixtures().join("torn-tail")],
        &["--per-run-series=false"],
    );
    let m = s.metrics();
    assert!(m.contains("loopctl_runs{"), "{m}");
    assert!(
        !m.contains("loopctl_run_last_event_timestamp_seconds"),
        "{m}"
    );
    let mut s = s;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let out = s.notices().join("\n");
    assert!(out.contains("stopped"), "{out}");
}

#[test]
fn serve_help_says_how_to_listen_beyond_loopback() {
    let out = Command::new(cargo_bin("loopctl"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("127.0.0.1:9477"), "{help}");
    assert!(help.contains("non-loopback"), "{help}");
}

/// GET on a host:port, the body.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    c.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

fn encode_query(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A real Prometheus scraping `serve` (it asks for OpenMetrics first): the target is up and
/// the series arrive with the values the scrape shows.
#[test]
fn a_real_prometheus_scrapes_serve() {
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "prometheus is missing and CI=true"
        );
        eprintln!("notice: skipping the Prometheus scrape: prometheus not found");
        return;
    }
    let s = Server::start(
        &[
            &fixtures().join("healthy-native"),
            &fixtures().join("avenor-loop"),
        ],
        &[],
    );
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let prom_addr = format!("127.0.0.1:{port}");
    let config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: loopctl\n    static_configs:\n      - targets: ['{}']\n",
            s.addr
        ),
    )
    .unwrap();
    let mut prom = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            tmp.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={prom_addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let query = |q: &str| -> Vec<Value> {
        http_get(
            &prom_addr,
            &format!("/api/v1/query?query={}", encode_query(q)),
        )
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .and_then(|v| v["data"]["result"].as_array().cloned())
        .unwrap_or_default()
    };
    let start = Instant::now();
    let mut up = false;
    while start.elapsed() < Duration::from_secs(60) {
        let r = query(r#"up{job="loopctl"}"#);
        if r.first().is_some_and(|x| x["value"][1] == "1") {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let phases = query(r#"sum(loopctl_phases_total{loop="healthy"})"#);
    let tokens = query(r#"loopctl_tokens_total{loop="avenor-loop",type="input"}"#);
    let buckets =
        query(r#"histogram_quantile(0.5, sum by (le) (loopctl_phase_duration_seconds_bucket))"#);
    let _ = prom.kill();
    let _ = prom.wait();
    assert!(up, "Prometheus never saw the target up");
    let scrape = s.metrics();
    let expect: f64 = scrape
        .lines()
        .filter(|l| l.starts_with(r#"loopctl_phases_total{loop="healthy""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(phases[0]["value"][1], expect.to_string(), "{phases:?}");
    let input = value(
        &scrape,
        r#"loopctl_tokens_total{loop="avenor-loop",type="input"}"#,
    );
    assert_eq!(
        tokens[0]["value"][1],
        input.unwrap().to_string(),
        "{tokens:?}"
    );
    assert_eq!(buckets.len(), 1, "{buckets:?}");
}

#[test]
fn a_log_rewritten_from_its_start_is_read_anew() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gamma");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("history.jsonl");
    let old = "gamma-20260101-000000";
    let text = event(1, old, "run_started", json!({}))
        + &event(
            2,
            old,
            "evaluation_done",
            json!({"score": 0.9, "passed": true}),
        )
        + &event(3, old, "stopped", json!({"reason": "threshold_reached"}));
    append(&log, &text);
    let s = Server::start(&[&dir], &[]);
    let done = r#"loopctl_runs_finished_total{loop="gamma",status="completed",exit_reason="threshold_reached"}"#;
    assert_eq!(value(&s.metrics(), done), Some(1.0));
    // Rewritten shorter, in place: a different run.
    std::fs::write(
        &log,
        event(1, "delta-20260101-000000", "run_started", json!({})),
    )
    .unwrap();
    let delta = r#"loopctl_runs_started_total{loop="delta"}"#;
    s.wait_until(
        |s| value(&s.metrics(), delta) == Some(1.0),
        "the rewritten log",
    );
    // The old run leaves the gauge; what it counted stays counted (a counter never goes
    // down), and the rewritten log's events count on top.
    let m = s.metrics();
    assert_eq!(value(&m, done), Some(1.0), "{m}");
    assert_eq!(
        value(&m, r#"loopctl_runs{loop="gamma",status="completed"}"#).unwrap_or(0.0),
        0.0,
        "{m}"
    );
    assert_eq!(
        value(&m, r#"loopctl_runs{loop="delta",status="running"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(
            &m,
            r#"loopctl_events_total{dialect="native",event="run_started"}"#
        ),
        Some(2.0)
    );
}

/// `export prometheus` with extra flags; (stdout, stderr).
fn export_with(paths: &[&Path], flags: &[&str]) -> (String, String) {
    let out = Command::new(cargo_bin("loopctl"))
        .env("NO_COLOR", "1")
        .args(["export", "prometheus"])
        .args(flags)
        .args(paths)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The replay folds the logs on `--threads` threads and merges the folds: the bytes printed
/// (series, damaged lines, caps notices) are those of one thread.
#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn export_prints_the_same_bytes_on_one_thread_or_many() {
    let mut all = all_fixtures();
    if let Some(shared) = loopctl_tests::shared("the corpus export on threads") {
        all.push(shared.join("corpus/aif-loop/vedo-hub"));
        all.push(shared.join("corpus/avenor/accumulate.ndjson"));
    }
    let paths: Vec<&Path> = all.iter().map(PathBuf::as_path).collect();
    for caps in [&[][..], &["--max-loops", "2", "--max-phases", "1"][..]] {
        let one = export_with(&paths, &[&["--threads", "1"], caps].concat());
        let many = export_with(&paths, &[&["--threads", "3"], caps].concat());
        assert!(one.0.contains("loopctl_runs_started_total"), "{}", one.0);
        assert_eq!(one, many, "{caps:?}");
    }
}

#[test]
fn a_running_run_whose_runner_lock_is_free_is_interrupted_in_export_and_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("omega");
    std::fs::create_dir_all(&dir).unwrap();
    let run = "omega-20260101-000000";
    append(
        &dir.join("history.jsonl"),
        &(event(1, run, "run_started", json!({})) + &event(2, run, "phase_started", json!({}))),
    );
    let running = r#"loopctl_runs{loop="omega",status="running"}"#;
    let interrupted = r#"loopctl_runs{loop="omega",status="interrupted"}"#;
    // No lock file (a log no runner writes): running.
    let (text, _) = export_with(&[&dir], &[]);
    assert_eq!(value(&text, running), Some(1.0), "{text}");
    assert_eq!(value(&text, interrupted), Some(0.0), "{text}");
    // The runner's lock, held: running, with its live series.
    let lock = std::fs::File::create(dir.join(".history.jsonl.lock")).unwrap();
    lock.lock().unwrap();
    let (text, _) = export_with(&[&dir], &[]);
    assert_eq!(value(&text, running), Some(1.0), "{text}");
    let s = Server::start(&[&dir], &[]);
    assert_eq!(value(&s.metrics(), running), Some(1.0));
    // Released (the runner died): interrupted, and no live series for it.
    lock.unlock().unwrap();
    for text in [export_with(&[&dir], &[]).0, s.metrics()] {
        assert_eq!(value(&text, running), Some(0.0), "{text}");
        assert_eq!(value(&text, interrupted), Some(1.0), "{text}");
        assert!(
            !text.contains("loopctl_run_last_event_timestamp_seconds{"),
            "{text}"
        );
    }
}

#[test]
fn the_caps_and_the_stagnation_flags_reach_the_series() {
    let paths = all_fixtures();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (text, err) = export_with(&refs, &["--max-loops", "3", "--max-phases", "1"]);
    let loops: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("loopctl_runs_started_total{loop=\""))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert_eq!(loops.len(), 4, "3 kept and other: {loops:?}");
    assert!(loops.contains("other"), "{loops:?}");
    assert!(text.contains("phase=\"other\""), "{text}");
    let named = err
        .lines()
        .filter(|l| l.contains("folded into \"other\""))
        .count();
    assert!(named >= 2, "{err}");
    // Each folded loop is named once.
    let mut lines: Vec<&str> = err.lines().collect();
    let all = lines.len();
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), all, "{err}");

    let stag = [fixtures().join("stagnation")];
    let stag: Vec<&Path> = stag.iter().map(PathBuf::as_path).collect();
    let verdicts = |text: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("loopctl_stagnation_verdicts_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert!(verdicts(&export_with(&stag, &[]).0) > 0.0);
    assert_eq!(verdicts(&export_with(&stag, &["--limit", "50"]).0), 0.0);
}

/// The compose stack's `loopctl` service runs as written: its `command` (a JSON-style flow
/// sequence in docker-compose.yml) is a `serve` invocation that starts and answers, with the
/// container's `/runs` mount and listen address swapped for a folder and a free loopback port.
#[test]
fn the_compose_stacks_serve_command_starts_and_answers() {
    let compose =
        std::fs::read_to_string(loopctl_tests::repo().join("dashboards/docker-compose.yml"))
            .unwrap();
    let line = compose
        .lines()
        .find(|l| l.trim_start().starts_with("command: [\"serve\""))
        .expect("the loopctl service's command");
    let args: Vec<String> = serde_json::from_str(line.trim_start()["command:".len()..].trim())
        .expect("command as a flow sequence");
    assert_eq!(args[0], "serve", "{args:?}");
    assert!(
        args.contains(&"/runs".to_string()),
        "serves the mount: {args:?}"
    );
    let listen = args.iter().position(|a| a == "--listen").expect("--listen");
    assert!(args[listen + 1].ends_with(":9477"), "{args:?}");
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    std::fs::create_dir_all(runs.join("native-clean")).unwrap();
    std::fs::copy(
        fixtures().join("native-clean/history.jsonl"),
        runs.join("native-clean/history.jsonl"),
    )
    .unwrap();
    let rest: Vec<String> = args[1..]
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != listen - 1 && *i != listen)
        .map(|(_, a)| a.replace("/runs", &runs.to_string_lossy()))
        .collect();
    let paths: Vec<PathBuf> = rest.iter().map(PathBuf::from).collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let s = Server::start(&refs, &[]);
    let m = s.metrics();
    assert_eq!(
        value(&m, r#"loopctl_runs_started_total{loop="native-clean"}"#),
        Some(1.0),
        "{m}"
    );
}

/// A log of many damaged lines: the first 50 per log are printed, the rest counted (export says
/// how many more and how to list them; serve says once that it stops printing them), and the
/// findings metric counts them all.
#[test]
fn findings_are_printed_fifty_per_log_and_counted_all() {
    let tmp = tempfile::tempdir().unwrap();
    let noisy = tmp.path().join("noisy.jsonl");
    let quiet = tmp.path().join("quiet.jsonl");
    let mut text = event(1, "noisy-20260101-000000", "run_started", json!({}));
    text.push_str(&"{not json\n".repeat(70));
    std::fs::write(&noisy, &text).unwrap();
    let mut text = event(1, "quiet-20260101-000000", "run_started", json!({}));
    text.push_str(&"{not json\n".repeat(3));
    std::fs::write(&quiet, &text).unwrap();
    let (out, err) = export_with(&[&noisy, &quiet], &[]);
    let printed = |err: &str, log: &Path| {
        let prefix = format!("warning: {}:", log.display());
        err.lines().filter(|l| l.starts_with(&prefix)).count()
    };
    assert_eq!(printed(&err, &noisy), 50, "{err}");
    assert_eq!(printed(&err, &quiet), 3, "{err}");
    let more = format!("20 more findings in {}", noisy.display());
    assert!(err.contains(&more), "{err}");
    let bad = r#"loopctl_log_findings_total{kind="bad_line"}"#;
    assert_eq!(value(&out, bad), Some(73.0));

    let s = Server::start(&[&noisy, &quiet], &[]);
    // Everything it printed up to the end of its replay (read on by another thread).
    let mut lines = s.early.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !lines.iter().any(|l| l.contains("replayed; following them")) {
        assert!(Instant::now() < deadline, "{lines:?}");
        lines.extend(s.notices());
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = lines.join("\n");
    assert_eq!(printed(&err, &noisy), 50, "{err}");
    assert_eq!(printed(&err, &quiet), 3, "{err}");
    let stop = format!("further findings in {} are not printed", noisy.display());
    assert_eq!(err.matches(&stop).count(), 1, "{err}");
    assert_eq!(value(&s.metrics(), bad), Some(73.0));
}
