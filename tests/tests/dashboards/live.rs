//! Every dashboard and alert expression against a real Prometheus scraping the real exporter
//! (`loopctl_export::serve`, in-process) over the fixtures and the corpus, while a day of runs
//! is appended to the followed logs: the counters move between scrapes, as they do in use.
//!
//! Each expression must return a finite value, except the ones named in `EMPTY_HERE`, which
//! must return nothing (the test says so when the data starts to support one of them).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loopctl_export::serve::{self, Config, Ui};

use super::*;

/// Expressions that return no data on these logs, and why. Matched on a piece of the
/// expression (or the alert name).
const EMPTY_HERE: [(&str, &str); 1] = [(
    "LoopctlLoopKeepsFailing",
    "no loop has failed 3 times in the window without completing once; three more failed runs \
     are appended at the end of the test, and then it must fire",
)];

#[derive(Default)]
struct Captured {
    addr: Mutex<Option<SocketAddr>>,
    notices: Mutex<Vec<String>>,
}

impl Ui for Captured {
    fn listening(&self, addr: SocketAddr) {
        *self.addr.lock().unwrap() = Some(addr);
    }
    fn progress(&self, _: usize, _: usize) {}
    fn replayed(&self, _: usize) {}
    fn notice(&self, text: &str) {
        self.notices.lock().unwrap().push(text.to_string());
    }
}

fn copy_run(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("run folder");
    std::fs::copy(from.join("history.jsonl"), to.join("history.jsonl")).expect("copy a log");
}

fn native(run: &str, seq: u64, event: &str, step: &str, payload: &str) -> String {
    format!(
        "{{\"v\":1,\"seq\":{seq},\"ts\":\"2026-11-23T00:00:{:02}.000Z\",\"run_id\":\"{run}\",\"event\":\"{event}\",\"step\":\"{step}\",\"iteration\":1,\"payload\":{payload}}}\n",
        seq % 60
    )
}

/// A completed run of loop `live-usage`, written by the test: the logs of the fixtures and the
/// corpus carry no cost and no cache tokens, so this one does (a Claude `result`-style usage
/// payload); its `test` phase fails `failures` times first.
fn usage_run(run: &str, failures: u64) -> String {
    let mut out = native(run, 1, "run_started", "", "{\"max_iterations\":2}");
    let mut seq = 2;
    for _ in 0..failures {
        out += &native(run, seq, "phase_started", "test", "{}");
        out += &native(
            run,
            seq + 1,
            "phase_finished",
            "test",
            "{\"stop_reason\":\"error\"}",
        );
        seq += 2;
    }
    out += &native(run, seq, "phase_started", "build", "{}");
    out += &native(
        run,
        seq + 1,
        "phase_finished",
        "build",
        "{\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":1200,\"output_tokens\":300,\"cache_read_input_tokens\":900,\"cache_creation_input_tokens\":100},\"total_cost_usd\":0.42}",
    );
    out += &native(
        run,
        seq + 2,
        "evaluation_done",
        "",
        "{\"score\":0.93,\"passed\":true}",
    );
    out + &native(
        run,
        seq + 3,
        "stopped",
        "",
        "{\"reason\":\"threshold_reached\"}",
    )
}

/// A run of loop `live-usage` left in an open phase.
fn open_run(run: &str) -> String {
    native(run, 1, "run_started", "", "{\"max_iterations\":2}")
        + &native(run, 2, "phase_started", "build", "{}")
}

/// Runs `expr`; the values of its result, or why the query failed.
fn run_query(prom: &Prometheus, expr: &str) -> Result<Vec<f64>, String> {
    let (code, v) = prom.query(expr);
    if code != 200 || v["status"] != "success" {
        return Err(format!("HTTP {code} {v}"));
    }
    Ok(values(&v["data"]["result"])
        .into_iter()
        .filter(|x| x.is_finite())
        .collect())
}

#[test]
#[cfg_attr(
    no_prometheus,
    ignore = "promtool or prometheus not on PATH (apt-get install prometheus)"
)]
#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
fn every_expression_returns_data_from_prometheus_scraping_serve_over_fixtures_and_corpus() {
    let Some(bin) = tool("prometheus") else {
        return;
    };
    let Some(shared) = loopctl_tests::shared("the dashboards over the corpus") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().join("runs");
    let fixtures: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .expect("fixtures")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("history.jsonl").is_file())
        .collect();
    for f in &fixtures {
        copy_run(f, &root.join(f.file_name().expect("name")));
    }
    let corpus = shared.join("corpus");
    let roots = vec![
        root.clone(),
        corpus.join("aif-loop/vedo-hub"),
        corpus.join("avenor/accumulate.ndjson"),
    ];
    let cfg = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        roots,
        options: Default::default(),
        max_line: 1 << 20,
        threads: 2,
        poll: Duration::from_millis(50),
        rescan: Duration::from_millis(100),
        max_connections: 16,
        otlp_metrics: None,
        missing_roots_wait: false,
        root: root.clone(),
    };
    let ui = Arc::new(Captured::default());
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (ui, stop) = (Arc::clone(&ui), Arc::clone(&stop));
        std::thread::spawn(move || serve::serve(cfg, stop, &*ui))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr = loop {
        if let Some(a) = *ui.addr.lock().unwrap() {
            break a;
        }
        assert!(Instant::now() < deadline, "serve never listened");
        std::thread::sleep(Duration::from_millis(20));
    };
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let _stop = StopOnDrop(Arc::clone(&stop));

    let mut prom = start_prometheus(&bin, tmp.path(), addr.port());
    prom.wait_for("the first scrape (up == 1)", r#"up{job="loopctl"}"#, |v| {
        v == 1.0
    });
    prom.wait_for(
        "3 scrapes",
        r#"count_over_time(loopctl_build_info[1m])"#,
        |v| v >= 3.0,
    );

    // The day: every fixture runs again (new run folders under the root), a run with cost is
    // appended, a torn line and a damaged line are written to a followed log.
    for f in &fixtures {
        let name = f.file_name().expect("name").to_string_lossy().to_string();
        copy_run(f, &root.join(format!("{name}-again")));
    }
    std::fs::create_dir_all(root.join("live-usage")).expect("dir");
    let usage =
        usage_run("live-usage-20261123-000000", 1) + &open_run("live-usage-20261123-000100");
    std::fs::write(root.join("live-usage/history.jsonl"), usage).expect("write");
    // A run whose runner died: its lock file is there, and free.
    std::fs::create_dir_all(root.join("live-usage-lost")).expect("dir");
    std::fs::write(
        root.join("live-usage-lost/history.jsonl"),
        open_run("live-usage-20261123-000300"),
    )
    .expect("write");
    std::fs::write(root.join("live-usage-lost/.history.jsonl.lock"), "").expect("lock file");
    let torn = root.join("healthy-native/history.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&torn)
        .expect("open");
    f.write_all(b"not json at all\n{\"v\":1,\"seq\":99,\"ts\":")
        .expect("append");
    drop(f);
    prom.wait_for(
        "the day's runs in a scrape",
        r#"loopctl_runs_started_total{loop="live-usage"}"#,
        |v| v > 0.0,
    );
    // Another run of the loop completes in the same log: its counters move after they appeared.
    // Its `test` phase fails 5 times in a row.
    let again = usage_run("live-usage-20261123-000200", 5);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("live-usage/history.jsonl"))
        .expect("open");
    f.write_all(again.as_bytes()).expect("append");
    drop(f);
    prom.wait_for(
        "the appended run",
        r#"sum(loopctl_runs_finished_total{loop="live-usage"})"#,
        |v| v >= 2.0,
    );
    prom.wait_for(
        "the damaged line",
        r#"sum(increase(loopctl_log_findings_total{kind="bad_line"}[1m]))"#,
        |v| v > 0.0,
    );
    // Two more scrapes, so that rate() over 1m spans the change.
    prom.wait_for(
        "more scrapes",
        r#"count_over_time(loopctl_build_info[1m])"#,
        |v| v >= 6.0,
    );

    // Each expression runs with every combination of variable values; it must return data
    // with at least one (`stuck` has the stagnation, `live-usage` the cost and an open phase).
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut expected_empty = BTreeSet::new();
    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    for name in DASHBOARDS {
        let d = dashboard(name);
        let combos: Vec<Vec<(&str, &str)>> = if name == "loopctl-loop.json" {
            vec![
                vec![("loop", "stuck"), ("phase", ".*")],
                vec![("loop", "live-usage"), ("phase", ".*")],
                vec![("loop", "stuck"), ("phase", "(fix|review)")],
                vec![("loop", "live-usage"), ("phase", "(build|test)")],
            ]
        } else {
            vec![vec![("loop", ".*")], vec![("loop", "(stuck|live-usage)")]]
        };
        for (ctx, expr) in panel_exprs(name, &d) {
            let exprs = combos
                .iter()
                .map(|combo| {
                    let mut vars: BTreeMap<String, String> = BUILTINS
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    vars.insert("window".into(), "1h".into());
                    vars.extend(combo.iter().map(|(k, v)| (k.to_string(), v.to_string())));
                    substitute(&expr, &vars)
                })
                .collect();
            runs.push((ctx, exprs));
        }
    }
    runs.extend(alert_exprs().into_iter().map(|(n, e)| (n, vec![e])));
    for (ctx, exprs) in &runs {
        let empty_reason = EMPTY_HERE
            .iter()
            .find(|(k, _)| exprs[0].contains(k) || ctx.contains(k));
        let mut data = Vec::new();
        for expr in exprs {
            ran += 1;
            match run_query(&prom, expr) {
                Err(e) => failures.push(format!("{ctx}: {e}\n  {expr}")),
                Ok(v) => data.extend(v),
            }
        }
        match empty_reason {
            None if data.is_empty() => {
                failures.push(format!("{ctx}: no data\n  {}", exprs.join("\n  ")))
            }
            Some((k, _)) if !data.is_empty() => failures.push(format!(
                "{ctx}: returns data now ({data:?}): take {k:?} out of EMPTY_HERE\n  {}",
                exprs[0]
            )),
            Some((k, _)) => {
                expected_empty.insert(*k);
            }
            None => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} expressions failed on serve's scrape:\n{}",
        failures.len(),
        runs.len(),
        failures.join("\n")
    );
    let unused: Vec<_> = EMPTY_HERE
        .iter()
        .filter(|(k, _)| !expected_empty.contains(k))
        .collect();
    assert!(
        unused.is_empty(),
        "EMPTY_HERE entries matching nothing: {unused:?}"
    );

    // LoopctlLoopKeepsFailing: three more failed runs of the failing loop, and it fires.
    for i in 0..3 {
        copy_run(
            &repo().join("fixtures/failed-run"),
            &root.join(format!("failed-run-{i}")),
        );
    }
    let keeps_failing = alert_exprs()
        .into_iter()
        .find(|(n, _)| n == "LoopctlLoopKeepsFailing")
        .expect("the alert")
        .1;
    prom.wait_for("LoopctlLoopKeepsFailing", &keeps_failing, |v| v >= 3.0);

    // The damaged line was reported on stderr, naming its file, and the server still runs.
    let notices = ui.notices.lock().unwrap().join("\n");
    assert!(
        notices.contains("healthy-native/history.jsonl"),
        "{notices}"
    );
    drop(_stop);
    let r = server.join().expect("serve thread");
    assert!(r.is_ok(), "serve: {:?}", r.err());
    eprintln!("{ran} expressions run on serve's scrape of the fixtures and the corpus");
}
