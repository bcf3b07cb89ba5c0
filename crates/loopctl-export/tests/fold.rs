//! The metric fold on the fixture logs of each dialect. Expected values are counted from the
//! fixture lines here with serde_json alone (not loopctl's parser), so a fold that miscounts
//! cannot agree with them by construction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loopctl_core::decode::lines::Pos;
use loopctl_export::feed::Feed;
use loopctl_export::model::{Metric, MetricState, Type, Val};
use loopctl_export::textfile::{LogRef, logs, read_log, render, replay};
use loopctl_export::{Options, encode};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn state_of(names: &[&str]) -> MetricState {
    let paths: Vec<PathBuf> = names.iter().map(|n| fixture(n)).collect();
    let logs = logs(&paths).unwrap();
    replay(&logs, Options::default(), 1 << 20, &mut |_, _| {}).unwrap()
}

/// Value of a counter or gauge series (0 when absent).
fn count(m: &MetricState, metric: Metric, labels: &[&str]) -> f64 {
    m.series()
        .into_iter()
        .find(|(k, _)| k.0 == metric && k.1 == labels)
        .map_or(0.0, |(_, v)| match v {
            Val::Count(n) => *n as f64 / metric.scale(),
            Val::Hist(_) => f64::NAN,
        })
}

/// (count, sum) of a histogram series.
fn hist(m: &MetricState, metric: Metric, labels: &[&str]) -> (i64, f64) {
    m.series()
        .into_iter()
        .find(|(k, _)| k.0 == metric && k.1 == labels)
        .map_or((0, 0.0), |(_, v)| match v {
            Val::Hist(h) => (h.count, h.sum as f64 / metric.scale()),
            Val::Count(_) => (-1, f64::NAN),
        })
}

/// Sum of a counter over every label set whose leading labels are `prefix`.
fn total(m: &MetricState, metric: Metric, prefix: &[&str]) -> f64 {
    m.series()
        .into_iter()
        .filter(|(k, _)| k.0 == metric && k.1.iter().zip(prefix).all(|(a, b)| a == b))
        .map(|(_, v)| match v {
            Val::Count(n) => *n as f64 / metric.scale(),
            Val::Hist(h) => h.count as f64,
        })
        .sum()
}

fn lines(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixture(name).join("history.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn per<'a>(lines: &'a [Value], event: &str, key: &str) -> BTreeMap<&'a str, u64> {
    let mut out = BTreeMap::new();
    for l in lines.iter().filter(|l| l["event"] == event) {
        *out.entry(l[key].as_str().unwrap_or("")).or_default() += 1;
    }
    out
}

fn sum_u64(lines: &[Value], f: impl Fn(&Value) -> Option<u64>) -> u64 {
    lines.iter().filter_map(f).sum()
}

#[test]
fn native_runner_log_phases_retries_tokens_and_verdicts() {
    let m = state_of(&["healthy-native"]);
    let ls = lines("healthy-native");
    let lp = "healthy";
    let finished = per(&ls, "phase_finished", "step");
    assert_eq!(finished.len(), 2, "build and review");
    for (phase, n) in &finished {
        assert_eq!(
            total(&m, Metric::Phases, &[lp, phase]),
            *n as f64,
            "{phase}"
        );
        let ms: u64 = ls
            .iter()
            .filter(|l| l["event"] == "phase_finished" && l["step"] == *phase)
            .filter_map(|l| l["payload"]["duration_ms"].as_u64())
            .sum();
        assert_eq!(
            hist(&m, Metric::PhaseDuration, &[lp, phase, "loop"]),
            (*n as i64, ms as f64 / 1e3),
            "{phase}"
        );
    }
    let failed = ls
        .iter()
        .filter(|l| l["event"] == "phase_finished" && l["payload"]["exit_code"] != 0)
        .count();
    assert_eq!(
        total(&m, Metric::Phases, &[lp, "build", "error"]) as usize,
        failed
    );
    let retries = per(&ls, "phase_retry", "step");
    for (phase, n) in &retries {
        assert_eq!(count(&m, Metric::PhaseRetries, &[lp, phase]), *n as f64);
    }
    let input = sum_u64(&ls, |l| l["payload"]["input_tokens"].as_u64());
    let output = sum_u64(&ls, |l| l["payload"]["output_tokens"].as_u64());
    assert!(input > 0);
    assert_eq!(count(&m, Metric::Tokens, &[lp, "input"]), input as f64);
    assert_eq!(count(&m, Metric::Tokens, &[lp, "output"]), output as f64);
    let evals: Vec<&Value> = ls
        .iter()
        .filter(|l| l["event"] == "evaluation_done")
        .collect();
    let passed = evals
        .iter()
        .filter(|l| l["payload"]["passed"] == true)
        .count();
    assert_eq!(count(&m, Metric::Evaluations, &[lp, "pass"]), passed as f64);
    assert_eq!(
        count(&m, Metric::Evaluations, &[lp, "fail"]),
        (evals.len() - passed) as f64
    );
    let score: f64 = evals
        .iter()
        .filter_map(|l| l["payload"]["score"].as_f64())
        .sum();
    let (n, sum) = hist(&m, Metric::EvaluationScore, &[lp]);
    assert_eq!(n as usize, evals.len());
    assert!((sum - score).abs() < 1e-9, "{sum} vs {score}");
    let stop = ls.iter().find(|l| l["event"] == "stopped").unwrap();
    let reason = stop["payload"]["exit_reason"].as_str().unwrap();
    assert_eq!(
        count(&m, Metric::RunsFinished, &[lp, "completed", reason]),
        1.0
    );
    assert_eq!(count(&m, Metric::Runs, &[lp, "completed"]), 1.0);
    assert_eq!(count(&m, Metric::Runs, &[lp, "running"]), 0.0);
    assert_eq!(total(&m, Metric::StagnationVerdicts, &[lp]), 0.0);

    // The stagnating twin: its verdicts are counted once per detector.
    let m = state_of(&["stagnating-native"]);
    assert_eq!(
        count(&m, Metric::StagnationVerdicts, &["stuck", "score"]),
        1.0
    );
    assert_eq!(
        count(&m, Metric::StagnationVerdicts, &["stuck", "no_change"]),
        1.0
    );
}

#[test]
fn avenor_log_phases_by_kind_tokens_and_exit() {
    let m = state_of(&["avenor-loop"]);
    let ls = lines("avenor-loop");
    // Avenor run ids are bare ids: the loop label is the log's folder.
    let lp = "avenor-loop";
    let ends = per(&ls, "avenor.phase.end", "phase");
    for (phase, n) in &ends {
        assert_eq!(
            total(&m, Metric::Phases, &[lp, phase]),
            *n as f64,
            "{phase}"
        );
    }
    let kinds: BTreeMap<&str, &str> = ls
        .iter()
        .filter(|l| l["event"] == "avenor.phase.start")
        .map(|l| (l["phase"].as_str().unwrap(), l["kind"].as_str().unwrap()))
        .collect();
    for (phase, kind) in &kinds {
        let (n, _) = hist(&m, Metric::PhaseDuration, &[lp, phase, kind]);
        assert_eq!(n as u64, ends[phase], "{phase} {kind}");
    }
    let tokens = |k: &str| {
        sum_u64(&ls, |l| {
            l.get(k)
                .or_else(|| l.get("usage").and_then(|u| u.get(k)))
                .and_then(Value::as_u64)
        })
    };
    assert_eq!(
        count(&m, Metric::Tokens, &[lp, "input"]),
        tokens("input_tokens") as f64
    );
    assert_eq!(
        count(&m, Metric::Tokens, &[lp, "output"]),
        tokens("output_tokens") as f64
    );
    let retries = per(&ls, "avenor.retry", "phase");
    assert_eq!(
        count(&m, Metric::PhaseRetries, &[lp, "fix"]),
        retries["fix"] as f64
    );
    assert_eq!(
        count(&m, Metric::RunsFinished, &[lp, "completed", "marker"]),
        1.0
    );
    let (n, iterations) = hist(&m, Metric::RunIterations, &[lp, "completed"]);
    let last = ls.iter().filter_map(|l| l["iteration"].as_u64()).max();
    assert_eq!((n, iterations), (1, last.unwrap() as f64));
    let first = ls.first().unwrap()["ts"].as_i64().unwrap();
    let end = ls.last().unwrap()["ts"].as_i64().unwrap();
    assert_eq!(
        hist(&m, Metric::RunDuration, &[lp, "completed"]),
        (1, (end - first) as f64 / 1e3)
    );
    // Unknown Avenor events of the session fixture are `other`.
    let m = state_of(&["avenor-session"]);
    let ls = lines("avenor-session");
    let known = ["session.end"];
    let other = ls
        .iter()
        .filter(|l| !known.contains(&l["event"].as_str().unwrap()))
        .count();
    assert_eq!(
        count(&m, Metric::Events, &["avenor", "other"]),
        other as f64
    );
    assert_eq!(count(&m, Metric::Events, &["avenor", "session_ended"]), 1.0);
}

#[test]
fn aif_loop_log_steps_evaluations_and_events() {
    let m = state_of(&["aif-loop-clean"]);
    let ls = lines("aif-loop-clean");
    let run = ls[0]["run_id"].as_str().unwrap();
    let lp = loopctl_core::fold::run_state::alias_of(run);
    let mut by_event: BTreeMap<&str, u64> = BTreeMap::new();
    for l in &ls {
        *by_event.entry(l["event"].as_str().unwrap()).or_default() += 1;
    }
    for (event, n) in &by_event {
        assert_eq!(
            count(&m, Metric::Events, &["aif-loop", event]),
            *n as f64,
            "{event}"
        );
    }
    let evaluations = by_event["evaluation_done"];
    assert_eq!(total(&m, Metric::Evaluations, &[lp]), evaluations as f64);
    // Steps: consecutive events of one step, iteration and quality phase are one step (what
    // `Trace` derives); a switch event already belongs to the phase it switches to.
    let mut steps: BTreeMap<&str, u64> = BTreeMap::new();
    let mut prev: Option<(&str, u64, &str)> = None;
    for l in &ls {
        let phase = match l["event"].as_str() {
            Some("phase_switched") => &l["payload"]["to_phase"],
            _ => &l["phase"],
        };
        let key = (
            l["step"].as_str().unwrap(),
            l["iteration"].as_u64().unwrap(),
            phase.as_str().unwrap_or(""),
        );
        if prev != Some(key) {
            *steps.entry(key.0).or_default() += 1;
        }
        prev = Some(key);
    }
    for (step, n) in &steps {
        assert_eq!(total(&m, Metric::Phases, &[lp, step]), *n as f64, "{step}");
    }
    // A step lasts from the event before its first to its last: each event's gap to the
    // previous one belongs to its step.
    let ts = |l: &Value| {
        loopctl_core::Ts::parse_rfc3339(l["ts"].as_str().unwrap())
            .unwrap()
            .0
    };
    let mut gaps: BTreeMap<&str, i64> = BTreeMap::new();
    for w in ls.windows(2) {
        *gaps.entry(w[1]["step"].as_str().unwrap()).or_default() += ts(&w[1]) - ts(&w[0]);
    }
    for (step, ms) in &gaps {
        let (_, sum) = hist(&m, Metric::PhaseDuration, &[lp, step, "step"]);
        assert_eq!(sum, *ms as f64 / 1e3, "{step}");
    }
    let stop = ls.iter().find(|l| l["event"] == "stopped").unwrap();
    assert_eq!(
        count(
            &m,
            Metric::RunsFinished,
            &[lp, "completed", stop["payload"]["reason"].as_str().unwrap()]
        ),
        1.0
    );
}

#[test]
fn damaged_lines_count_as_findings() {
    let m = state_of(&["bad-middle", "torn-tail", "seq-problems"]);
    let expect = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(fixture(name).join("expect.json")).unwrap())
            .unwrap()
    };
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for name in ["bad-middle", "torn-tail", "seq-problems"] {
        for f in expect(name)["findings"].as_array().unwrap() {
            *kinds.entry(f["kind"].as_str().unwrap().into()).or_default() += 1;
        }
    }
    assert!(kinds.len() >= 4, "{kinds:?}");
    for (kind, n) in &kinds {
        assert_eq!(count(&m, Metric::LogFindings, &[kind]), *n as f64, "{kind}");
    }
}

#[test]
fn same_logs_same_series_in_any_order_and_a_dropped_log_leaves_only_its_counts() {
    let all = [
        "native-clean",
        "aif-drift",
        "avenor-abort",
        "merged-runs",
        "stagnation",
        "failed-run",
        "bad-middle",
    ];
    let paths: Vec<PathBuf> = all.iter().map(|n| fixture(n)).collect();
    let logs: Vec<LogRef> = logs(&paths).unwrap();
    let text = |logs: &[LogRef]| {
        render(replay(logs, Options::default(), 1 << 20, &mut |_, _| {}).unwrap()).unwrap()
    };
    let forward = text(&logs);
    let mut rev = logs.clone();
    rev.reverse();
    assert_eq!(forward, text(&rev));

    // Every log added, then all but the first dropped: the gauges are the first one's alone,
    // the counters and histograms all the logs' (a counter never goes down).
    let mut m = MetricState::new(Options::default());
    let mut sources = Vec::new();
    for l in &logs {
        sources.push(read_log(&mut m, l, 1 << 20, &mut |_| {}).unwrap().0);
    }
    let owned = |m: &MetricState, gauges: bool| -> Vec<(String, Val)> {
        m.series()
            .into_iter()
            .filter(|(k, _)| (k.0.kind() == Type::Gauge) == gauges)
            .map(|(k, v)| (format!("{k:?}"), v.clone()))
            .collect()
    };
    let counted = owned(&m, false);
    for s in &sources[1..] {
        m.drop_source(*s);
    }
    let first = replay(&logs[..1], Options::default(), 1 << 20, &mut |_, _| {}).unwrap();
    assert!(!owned(&first, true).is_empty());
    assert_eq!(owned(&m, true), owned(&first, true));
    assert_eq!(owned(&m, false), counted);
    assert_ne!(counted, owned(&first, false), "the dropped logs counted");
}

/// A torn tail stays counted once its writer ends the line (a counter never goes down), and
/// is counted once however often it is read still torn.
#[test]
fn a_torn_tail_completed_by_its_writer_stays_counted_once() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("r");
    let mut feed = Feed::new(s, 1 << 20);
    let whole = br#"{"v":1,"seq":1,"run_id":"r","event":"run_started","payload":{}}"#;
    let cut = &whole[..20];
    let mut reported = 0;
    feed.line(&mut m, Pos { line: 1, offset: 0 }, cut, false, &mut |_| {
        reported += 1
    });
    assert_eq!(count(&m, Metric::LogFindings, &["torn_tail"]), 1.0);
    assert_eq!(feed.next_offset, 0, "the torn tail is read again");
    let longer = &whole[..40];
    feed.line(
        &mut m,
        Pos { line: 1, offset: 0 },
        longer,
        false,
        &mut |_| reported += 1,
    );
    assert_eq!(count(&m, Metric::LogFindings, &["torn_tail"]), 1.0);
    assert_eq!(reported, 1, "reported once");
    feed.line(&mut m, Pos { line: 1, offset: 0 }, whole, true, &mut |_| {});
    assert_eq!(count(&m, Metric::LogFindings, &["torn_tail"]), 1.0);
    assert_eq!(count(&m, Metric::RunsStarted, &["r"]), 1.0);
    assert_eq!(feed.next_offset, whole.len() as u64 + 1);
}

#[test]
fn live_run_gauges_follow_running_runs_and_can_be_turned_off() {
    let paths = [fixture("torn-tail"), fixture("native-clean")];
    let logs = logs(&paths).unwrap();
    let on = render(replay(&logs, Options::default(), 1 << 20, &mut |_, _| {}).unwrap()).unwrap();
    let live: Vec<&str> = on
        .lines()
        .filter(|l| l.starts_with("loopctl_run_last_event_timestamp_seconds{"))
        .collect();
    // torn-tail's run is still running; native-clean's ended.
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(
        live[0].contains("run=\"tt-20260308-090000\""),
        "{}",
        live[0]
    );
    let off = Options {
        per_run_series: false,
        ..Options::default()
    };
    let text = render(replay(&logs, off, 1 << 20, &mut |_, _| {}).unwrap()).unwrap();
    assert!(!text.contains("run=\""), "{text}");
}

#[test]
fn openmetrics_names_counters_without_total_and_ends_with_eof() {
    let m = state_of(&["native-clean"]);
    let families = encode::families(&m, None, &Default::default());
    let om = encode::openmetrics(&families);
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE loopctl_runs_started counter\n"));
    assert!(om.contains("loopctl_runs_started_total{loop=\"native-clean\"} 1\n"));
    assert!(om.contains("loopctl_evaluation_score_bucket{loop=\"native-clean\",le=\"+Inf\"} 2\n"));
}

fn apply_lines(m: &mut MetricState, source: usize, lines: &[&str]) {
    for l in lines {
        m.apply(source, &loopctl_core::parse_line(l).unwrap());
    }
}

#[test]
fn cache_tokens_and_cost_are_counted_where_a_log_carries_them() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("c");
    apply_lines(
        &mut m,
        s,
        &[
            r#"{"v":1,"seq":1,"run_id":"c-20260101-000000","event":"usage","payload":{"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":700,"cache_creation_input_tokens":30},"cost_usd":0.125}}"#,
            r#"{"v":1,"seq":2,"run_id":"c-20260101-000000","event":"phase_finished","step":"x","payload":{"total_cost_usd":0.375,"usage":{"cache_read_input_tokens":300}}}"#,
        ],
    );
    assert_eq!(count(&m, Metric::Tokens, &["c", "input"]), 10.0);
    assert_eq!(count(&m, Metric::Tokens, &["c", "cache_read"]), 1000.0);
    assert_eq!(count(&m, Metric::Tokens, &["c", "cache_creation"]), 30.0);
    assert_eq!(count(&m, Metric::Cost, &["c"]), 0.5);
}

/// `loopctl_run_iterations` is the count a run's end states, else the iteration it ended in:
/// aif-loop's `stopped` states none, and a run that passed in iteration 2 took 2 (the
/// reducer's `iterations_completed`, iterations advanced past, says 1).
#[test]
fn run_iterations_are_the_stated_count_else_the_iteration_a_run_ended_in() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("runs");
    let aif = |it: u64, event: &str, payload: &str| {
        format!(
            r#"{{"ts":"2026-03-02T10:0{it}:00Z","run_id":"pass-20260302-100000","iteration":{it},"phase":"A","step":"EVALUATE","event":"{event}","status":"ok","payload":{payload}}}"#
        )
    };
    let lines = [
        aif(1, "run_started", "{}"),
        aif(1, "evaluation_done", r#"{"score":0.5,"passed":false}"#),
        aif(2, "iteration_advanced", r#"{"new_iteration":2}"#),
        aif(2, "evaluation_done", r#"{"score":0.95,"passed":true}"#),
        aif(2, "stopped", r#"{"reason":"threshold_reached"}"#),
    ];
    apply_lines(
        &mut m,
        s,
        &lines.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(
        run_of(&m, "pass-20260302-100000")
            .state
            .iterations_completed,
        1
    );
    assert_eq!(
        hist(&m, Metric::RunIterations, &["pass", "completed"]),
        (1, 2.0)
    );

    // A stated count wins over the iterations the events reached.
    let stated = [
        native(1, "told-20260101-000000", "run_started", "", "{}"),
        native(
            2,
            "told-20260101-000000",
            "phase_started",
            "fix",
            r#"{"iteration":2}"#,
        )
        .replace(r#""iteration":1"#, r#""iteration":2"#),
        native(
            3,
            "told-20260101-000000",
            "stopped",
            "",
            r#"{"reason":"marker","exit_reason":"marker","iterations_completed":1}"#,
        ),
    ];
    apply_lines(
        &mut m,
        s,
        &stated.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(run_of(&m, "told-20260101-000000").state.iteration, 2);
    let (n, sum) = hist(&m, Metric::RunIterations, &["told", "stopped"]);
    assert_eq!((n, sum), (1, 1.0));
}

#[test]
fn bare_run_ids_take_the_log_name_until_the_run_names_its_alias() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("folder");
    apply_lines(
        &mut m,
        s,
        &[
            r#"{"v":1,"seq":1,"run_id":"9f8e7d","event":"evaluation_done","payload":{"score":0.5,"passed":false}}"#,
        ],
    );
    assert_eq!(count(&m, Metric::Evaluations, &["folder", "fail"]), 1.0);
    apply_lines(
        &mut m,
        s,
        &[
            r#"{"v":1,"seq":2,"run_id":"9f8e7d","event":"run_started","payload":{"task_alias":"billing"}}"#,
        ],
    );
    // What it counted stays under the folder's name (a counter never goes down); its gauge
    // moved to its alias, and what it counts now counts there. No series names the id.
    assert_eq!(count(&m, Metric::Evaluations, &["folder", "fail"]), 1.0);
    assert_eq!(count(&m, Metric::RunsStarted, &["folder"]), 1.0);
    assert_eq!(count(&m, Metric::Runs, &["billing", "running"]), 1.0);
    assert_eq!(total(&m, Metric::Runs, &["folder"]), 0.0);
    apply_lines(
        &mut m,
        s,
        &[
            r#"{"v":1,"seq":3,"run_id":"9f8e7d","event":"evaluation_done","payload":{"score":0.9,"passed":true}}"#,
        ],
    );
    assert_eq!(count(&m, Metric::Evaluations, &["billing", "pass"]), 1.0);
    assert_eq!(total(&m, Metric::Evaluations, &["folder"]), 1.0);
    let text = render(m).unwrap();
    assert!(!text.contains("loop=\"9f8e7d\""), "{text}");
}

/// A native event line; `step` "" for none.
fn native(seq: u64, run: &str, event: &str, step: &str, payload: &str) -> String {
    let step = if step.is_empty() {
        String::new()
    } else {
        format!(r#""step":"{step}","#)
    };
    format!(
        r#"{{"v":1,"seq":{seq},"ts":"2026-01-01T00:00:{:02}.000Z","run_id":"{run}","event":"{event}",{step}"iteration":1,"payload":{payload}}}"#,
        seq % 60
    )
}

fn run_of<'a>(m: &'a MetricState, run: &str) -> &'a loopctl_export::model::RunMetrics {
    m.runs()
        .map(|(_, r)| r)
        .find(|r| r.state.run_id == run)
        .unwrap()
}

#[test]
fn an_ended_run_drops_its_trace_and_a_resumed_one_counts_from_a_fresh_one() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("r");
    let run = "r-20260101-000000";
    let first = [
        native(
            1,
            run,
            "run_started",
            "",
            r#"{"task":"a long task text","max_iterations":9}"#,
        ),
        native(2, run, "phase_started", "build", "{}"),
        native(
            3,
            run,
            "phase_finished",
            "build",
            r#"{"stop_reason":"end_turn"}"#,
        ),
        native(
            4,
            run,
            "evaluation_done",
            "",
            r#"{"score":0.5,"passed":false}"#,
        ),
        native(5, run, "stopped", "", r#"{"reason":"user_stop"}"#),
    ];
    let lines: Vec<&str> = first.iter().map(String::as_str).collect();
    apply_lines(&mut m, s, &lines);
    let r = run_of(&m, run);
    assert!(!r.is_live(), "an ended run keeps its trace");
    assert_eq!(r.state.task, None, "an ended run keeps run.json's task");
    assert!(r.state.score_history.len() <= 1);
    assert_eq!(count(&m, Metric::Phases, &["r", "build", "end_turn"]), 1.0);
    assert_eq!(count(&m, Metric::Evaluations, &["r", "fail"]), 1.0);
    // An event after the end counts, and adds no phase.
    apply_lines(
        &mut m,
        s,
        &[&native(6, run, "phase_finished", "build", "{}")],
    );
    assert_eq!(count(&m, Metric::Phases, &["r", "build", "end_turn"]), 1.0);
    assert!(!run_of(&m, run).is_live());
    // Resumed: running again, with a trace; its new phases and evaluations count.
    let again = [
        native(7, run, "run_resumed", "", "{}"),
        native(8, run, "phase_started", "build", "{}"),
        native(
            9,
            run,
            "phase_finished",
            "build",
            r#"{"stop_reason":"end_turn"}"#,
        ),
        native(
            10,
            run,
            "evaluation_done",
            "",
            r#"{"score":0.9,"passed":true}"#,
        ),
    ];
    let lines: Vec<&str> = again.iter().map(String::as_str).collect();
    apply_lines(&mut m, s, &lines);
    assert!(run_of(&m, run).is_live());
    assert_eq!(count(&m, Metric::Phases, &["r", "build", "end_turn"]), 2.0);
    assert_eq!(count(&m, Metric::Evaluations, &["r", "pass"]), 1.0);
    assert_eq!(count(&m, Metric::Runs, &["r", "running"]), 1.0);
    let text = render(m).unwrap();
    assert!(
        text.contains(&format!(
            "loopctl_run_last_event_timestamp_seconds{{loop=\"r\",run=\"{run}\"}}"
        )),
        "{text}"
    );
}

#[test]
fn a_phase_is_admitted_again_under_a_runs_new_loop_label() {
    let mut m = MetricState::new(Options {
        max_phases: 1,
        ..Options::default()
    });
    let s = m.add_source("folder");
    let finished = r#"{"stop_reason":"end_turn"}"#;
    let lines = [
        // `billing` keeps its one phase, `test`.
        native(1, "billing-20260101-000001", "phase_started", "test", "{}"),
        native(
            2,
            "billing-20260101-000001",
            "phase_finished",
            "test",
            finished,
        ),
        // A bare id: filed under the folder, where `build` is kept...
        native(1, "9f8e7d", "phase_started", "build", "{}"),
        native(2, "9f8e7d", "phase_finished", "build", finished),
        // ...until the run names its alias: `build` is not one of billing's phases.
        native(
            3,
            "9f8e7d",
            "run_started",
            "",
            r#"{"task_alias":"billing"}"#,
        ),
        native(4, "9f8e7d", "phase_started", "build", "{}"),
        native(5, "9f8e7d", "phase_finished", "build", finished),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    apply_lines(&mut m, s, &refs);
    assert_eq!(
        count(&m, Metric::Phases, &["billing", "other", "end_turn"]),
        1.0
    );
    assert_eq!(
        count(&m, Metric::Phases, &["billing", "test", "end_turn"]),
        1.0
    );
}

#[test]
fn loops_and_phases_beyond_the_caps_fold_into_other_and_are_named_once() {
    let options = Options {
        max_loops: 2,
        max_phases: 1,
        ..Options::default()
    };
    let mut m = MetricState::new(options);
    let s = m.add_source("x");
    let mut lines = Vec::new();
    for (i, lp) in ["alpha", "beta", "gamma", "delta"].iter().enumerate() {
        let run = format!("{lp}-20260101-00000{i}");
        for (j, phase) in ["build", "test", "lint"].iter().enumerate() {
            let seq = 1 + 2 * j as u64;
            lines.push(native(seq, &run, "phase_started", phase, "{}"));
            lines.push(native(
                seq + 1,
                &run,
                "phase_finished",
                phase,
                r#"{"stop_reason":"end_turn"}"#,
            ));
        }
        // A second run of the same loop: still the same label.
        lines.push(native(
            1,
            &format!("{lp}-20260102-00000{i}"),
            "run_started",
            "",
            "{}",
        ));
    }
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    apply_lines(&mut m, s, &refs);
    assert_eq!(count(&m, Metric::RunsStarted, &["alpha"]), 2.0);
    assert_eq!(count(&m, Metric::RunsStarted, &["beta"]), 2.0);
    assert_eq!(count(&m, Metric::RunsStarted, &["other"]), 4.0);
    assert_eq!(total(&m, Metric::RunsStarted, &["gamma"]), 0.0);
    assert_eq!(
        count(&m, Metric::Phases, &["alpha", "build", "end_turn"]),
        1.0
    );
    assert_eq!(
        count(&m, Metric::Phases, &["alpha", "other", "end_turn"]),
        2.0
    );
    assert_eq!(
        count(&m, Metric::Phases, &["other", "build", "end_turn"]),
        2.0
    );
    assert_eq!(
        count(&m, Metric::Phases, &["other", "other", "end_turn"]),
        4.0
    );
    let notices = m.take_notices();
    for name in [
        "loop \"gamma\"",
        "loop \"delta\"",
        "phase \"test\" of loop \"alpha\"",
    ] {
        assert_eq!(
            notices.iter().filter(|n| n.starts_with(name)).count(),
            1,
            "{name} in {notices:?}"
        );
    }
    assert!(m.take_notices().is_empty(), "named twice");
    let text = render(m).unwrap();
    assert!(
        !text.contains("loop=\"gamma\"") && !text.contains("phase=\"lint\""),
        "{text}"
    );
}

#[test]
fn stagnation_verdicts_follow_the_given_settings() {
    let paths = [fixture("stagnation")];
    let logs = logs(&paths).unwrap();
    let verdicts = |options: Options| {
        let m = replay(&logs, options, 1 << 20, &mut |_, _| {}).unwrap();
        total(&m, Metric::StagnationVerdicts, &[])
    };
    assert!(verdicts(Options::default()) > 0.0);
    let lenient = Options {
        stagnation: loopctl_core::analysis::stagnation::Config {
            limit: 50,
            ..Default::default()
        },
        ..Options::default()
    };
    assert_eq!(verdicts(lenient), 0.0);
}

#[test]
fn an_aif_loop_step_is_observed_once_when_it_is_over() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("a");
    let line = |ts: &str, step: &str, event: &str| {
        format!(
            r#"{{"ts":"2026-03-01T10:{ts}Z","run_id":"a-20260301-100000","iteration":1,"phase":"A","step":"{step}","event":"{event}","status":"ok","payload":{{}}}}"#
        )
    };
    let plan = [
        line("00:00", "PLAN", "run_started"),
        line("00:10", "PLAN", "plan_created"),
        line("00:30", "PLAN", "plan_created"),
    ];
    let refs: Vec<&str> = plan.iter().map(String::as_str).collect();
    apply_lines(&mut m, s, &refs);
    // PLAN is still growing: not observed yet.
    assert_eq!(total(&m, Metric::Phases, &["a"]), 0.0);
    apply_lines(&mut m, s, &[&line("01:30", "PRODUCE", "artifact_created")]);
    // Over: observed once, with its whole duration; PRODUCE is open.
    assert_eq!(count(&m, Metric::Phases, &["a", "PLAN", "end_turn"]), 1.0);
    assert_eq!(total(&m, Metric::Phases, &["a"]), 1.0);
    let (n, secs) = hist(&m, Metric::PhaseDuration, &["a", "PLAN", "step"]);
    assert_eq!(n, 1);
    assert!(secs >= 30.0, "{secs}");
    // The run's end closes the last step.
    apply_lines(&mut m, s, &[&line("02:00", "DONE", "stopped")]);
    assert_eq!(
        count(&m, Metric::Phases, &["a", "PRODUCE", "end_turn"]),
        1.0
    );
    assert_eq!(count(&m, Metric::Phases, &["a", "DONE", "end_turn"]), 1.0);
}

/// A torn tail its writer ends with bytes that are still not an event is one finding, counted
/// and reported once, as it was first seen (`torn_tail`): one finding per line.
#[test]
fn a_torn_tail_ended_damaged_is_one_finding() {
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("r");
    let mut feed = Feed::new(s, 1 << 20);
    let mut reported = 0;
    let cut = br#"{"v":1,"seq":1,"run_id":"r","ev"#;
    feed.line(&mut m, Pos { line: 1, offset: 0 }, cut, false, &mut |_| {
        reported += 1
    });
    let ended = br#"{"v":1,"seq":1,"run_id":"r","ev garbage"#;
    feed.line(&mut m, Pos { line: 1, offset: 0 }, ended, true, &mut |_| {
        reported += 1
    });
    assert_eq!(count(&m, Metric::LogFindings, &["torn_tail"]), 1.0);
    assert_eq!(count(&m, Metric::LogFindings, &["bad_line"]), 0.0);
    assert_eq!(reported, 1);
    assert_eq!(feed.next_offset, ended.len() as u64 + 1);
}
