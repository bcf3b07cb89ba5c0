use super::*;
use crate::analysis::stagnation::{Config, assess};
use crate::fold::trace::traces_from_bytes;
use crate::render::postmortem_text::{clip, md};

fn report(log: &str) -> Report {
    report_with(log, Report::build)
}

fn report_with(log: &str, build: fn(&RunState, &Trace, &Verdict) -> Report) -> Report {
    let out = crate::replay_bytes("t", log.as_bytes());
    let traces = traces_from_bytes("t", log.as_bytes());
    let (id, state) = out
        .runs
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap_or_default();
    let trace = traces.get(&id).cloned().unwrap_or_default();
    let verdict = assess(
        &trace,
        &Config::default(),
        None,
        crate::analysis::liveness::Liveness::Alive,
    );
    build(&state, &trace, &verdict)
}

const SHORT: &str = concat!(
    r#"{"ts":"2026-01-01T00:00:00Z","run_id":"s-20260101-000000","iteration":0,"phase":"A","step":"INIT","event":"run_started","payload":{"max_iterations":2}}"#,
    "\n",
    r#"{"ts":"2026-01-01T00:01:00Z","run_id":"s-20260101-000000","iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.5,"passed":false,"failed_rules":["R1","R2"],"warn_rules":[],"active_rule_count":5,"passed_rule_count":3}}"#,
    "\n",
    r#"{"ts":"2026-01-01T00:03:00Z","run_id":"s-20260101-000000","iteration":2,"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.7,"passed":false,"failed_rules":["R2"],"warn_rules":[],"active_rule_count":5,"passed_rule_count":4}}"#,
    "\n",
    r#"{"ts":"2026-01-01T00:03:05Z","run_id":"s-20260101-000000","iteration":2,"phase":"A","step":"STOP","event":"stopped","payload":{"reason":"iteration_limit"}}"#,
    "\n",
);

#[test]
fn distance_to_success_follows_aif_loop() {
    let r = report(SHORT);
    let d = r
        .distance_to_success
        .clone()
        .unwrap_or_else(|| panic!("no distance"));
    assert_eq!((d.threshold, d.threshold_source.as_str()), (0.8, "default"));
    assert_eq!((d.score, d.gap), (0.7, 0.1));
    assert_eq!(
        (d.blocking, d.blocking_rules.clone()),
        (1, vec!["R2".to_string()])
    );
    assert_eq!((d.rules_passed, d.rules_total), (Some(4), Some(5)));
    assert!(d.iteration_limit);
    let md = r.to_markdown();
    assert!(md.contains("### Distance to success"), "{md}");
    assert!(md.contains("gap to threshold: 0.1"), "{md}");
    assert!(md.contains("rules passed: 4/5"), "{md}");
    let text = r.to_text();
    assert!(
        text.contains("stopped: iteration_limit at 2026-01-01T00:03:05.000Z"),
        "{text}"
    );
    assert!(text.contains("Scores  ▅▆"), "{text}");
}

#[test]
fn timeline_time_and_json_are_deterministic() {
    let r = report(SHORT);
    let names: Vec<_> = r
        .time_per_phase
        .iter()
        .map(|p| (p.name.as_str(), p.total_ms))
        .collect();
    assert_eq!(names, vec![("EVALUATE", 180_000), ("STOP", 5_000)]);
    assert_eq!(r.time_per_phase[0].share_pct, 97.3);
    assert_eq!(r.timeline.len(), 3);
    assert_eq!(r.to_json(), report(SHORT).to_json());
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap_or_default();
    assert_eq!(v["stop"]["reason"], "iteration_limit");
    assert_eq!(v["scores"]["sparkline"], "▅▆");
    assert_eq!(v["distance_to_success"]["blocking_rules"][0], "R2");
}

/// A run of `n` iterations, one evaluation each.
fn iterations(n: u64) -> Report {
    let mut log = String::new();
    for i in 1..=n {
        log += &format!(
            r#"{{"ts":"2026-01-01T00:00:{:02}Z","run_id":"l","iteration":{i},"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{{"score":0.5}}}}"#,
            i % 60
        );
        log.push('\n');
    }
    report(&log)
}

/// The iterations a text or Markdown timeline shows, in order.
fn shown(report: &str) -> Vec<u64> {
    report
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["iteration", i, ..] => i.parse().ok(),
                ["|", i, "|", "EVALUATE", ..] => i.parse().ok(),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn a_long_timeline_shows_its_ends_and_says_how_many_were_elided() {
    let r = iterations(45);
    let ends: Vec<u64> = (1..=20).chain(26..=45).collect();
    for (text, elided) in [
        (
            r.to_text(),
            "\n  ... 5 iteration(s) elided (--full-timeline shows all) ...\n  iteration 26 ",
        ),
        (
            r.to_markdown(),
            "| 20 | *evaluation (A)* | | | - | score 0.5 |\n| | *... 5 iteration(s) elided (--full-timeline shows all) ...* | | | | |\n| 26 |",
        ),
    ] {
        assert_eq!(shown(&text), ends, "{text}");
        assert!(text.contains(elided), "{text}");
    }
    let all: Vec<u64> = (1..=45).collect();
    for f in [Format::Text, Format::Markdown] {
        let full = r.render_full(f, true);
        assert_eq!(shown(&full), all, "{full}");
        assert!(!full.contains("elided"), "{full}");
    }
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap_or_default();
    assert_eq!(v["timeline"].as_array().map(Vec::len), Some(45));
    // 40 iterations are shown whole, as they always were.
    let r = iterations(40);
    assert_eq!(r.to_text(), r.render_full(Format::Text, true));
    assert_eq!(r.to_markdown(), r.render_full(Format::Markdown, true));
    assert_eq!(shown(&r.to_text()).len(), 40);
}

#[test]
fn a_report_built_without_the_middle_renders_the_same_ends() {
    let mut log = String::new();
    for i in 1..=45 {
        // The longest step name is in the elided middle: it still sets the column width.
        let step = if i == 23 { "IMPLEMENT_LONGER" } else { "PLAN" };
        for (s, p) in [(step, "B"), ("EVALUATE", "A")] {
            log += &format!(
                r#"{{"ts":"2026-01-01T00:{:02}:{:02}Z","run_id":"l","iteration":{i},"phase":"{p}","step":"{s}","event":"evaluation_done","payload":{{"score":0.5}}}}"#,
                i / 2,
                (i % 2) * 30 + usize::from(p == "A"),
            );
            log.push('\n');
        }
    }
    let whole = report_with(&log, Report::build);
    let ends = report_with(&log, Report::build_ends);
    assert_eq!((whole.timeline.len(), whole.elided), (45, 0));
    assert_eq!((ends.timeline.len(), ends.elided), (40, 5));
    assert!(
        whole
            .render_full(Format::Text, true)
            .contains("IMPLEMENT_LONGER (B)")
    );
    assert!(whole.to_text().contains("PLAN (B)            "));
    assert_eq!(ends.to_text(), whole.to_text());
    assert_eq!(ends.to_markdown(), whole.to_markdown());
}

/// A long aif-loop run whose iterations come out of order at the end, with failing steps,
/// a quality phase B and a step that repeats within an iteration.
fn tangled_run(n: u64) -> String {
    let mut log = String::new();
    let mut t = 0;
    let mut line = |it: u64, phase: &str, step: &str, event: &str, payload: &str| {
        t += 7;
        log += &format!(
            r#"{{"ts":"2026-01-01T{:02}:{:02}:{:02}Z","run_id":"x","iteration":{it},"phase":"{phase}","step":"{step}","event":"{event}","payload":{payload}}}"#,
            t / 3600 % 24,
            t / 60 % 60,
            t % 60
        );
        log.push('\n');
    };
    // Back to the lowest and highest iterations kept at each end of a long timeline, too.
    for i in (1..=n).chain([3, 0, n + 5, 2, n.saturating_sub(18), 19]) {
        let phase = if i % 4 == 0 { "B" } else { "A" };
        line(i, phase, "PLAN", "plan_created", "{}");
        line(i, phase, "PLAN", "artifact_created", "{}");
        if i % 5 == 0 {
            line(
                i,
                phase,
                "PRODUCE_LONG_NAME",
                "phase_error",
                r#"{"error":"disk full at /tmp/x1"}"#,
            );
        }
        line(i, phase, "PRODUCE_LONG_NAME", "artifact_created", "{}");
        line(
            i,
            phase,
            "EVALUATE",
            "evaluation_done",
            &format!(r#"{{"score":0.{},"failed_rules":["r2","r1"]}}"#, i % 9),
        );
    }
    log
}

#[test]
fn a_trace_that_keeps_only_the_timeline_ends_gives_the_same_report() {
    use crate::fold::trace::Traces;
    for n in [3, 40, 41, 45, 120, 300] {
        let log = tangled_run(n);
        let full = report_with(&log, Report::build);
        let mut ends = Traces::ends("t", TIMELINE_EDGE);
        crate::fold::projection::fold_bytes(&mut ends, log.as_bytes(), 1 << 20);
        let trace = ends.into_runs().remove("x").unwrap_or_default();
        // A long run keeps, of its derived steps, only what the detectors read (a failed
        // step, and the first of each name after one); a short one keeps them all.
        let all_steps = traces_from_bytes("t", log.as_bytes())["x"].steps.len();
        let kept = trace.steps.len();
        match trace.step_ends() {
            Some(_) => assert!(n >= 120 && kept * 4 < all_steps, "{n}: {kept}"),
            None => assert!(n < 120 && kept == all_steps, "{n}: {kept}"),
        }
        let state = crate::replay_bytes("t", log.as_bytes()).runs["x"].clone();
        let verdict = assess(
            &trace,
            &Config::default(),
            None,
            crate::analysis::liveness::Liveness::Alive,
        );
        assert_eq!(verdict, full.stagnation, "{n}");
        let from_ends = Report::build_ends(&state, &trace, &verdict);
        assert_eq!(from_ends.to_text(), full.to_text(), "{n}");
        assert_eq!(from_ends.to_markdown(), full.to_markdown(), "{n}");
        assert_eq!(from_ends.time_per_phase, full.time_per_phase, "{n}");
    }
}

#[test]
fn a_running_run_says_so_and_has_no_distance() {
    let r = report(
        r#"{"ts":"2026-01-01T00:00:00Z","run_id":"x","event":"evaluation_done","payload":{"score":0.1}}"#,
    );
    assert!(r.stop.running);
    assert!(r.distance_to_success.is_none());
    assert!(r.to_text().contains("still running"));
    assert!(r.to_markdown().contains("still running"));
}

#[test]
fn formatting_helpers() {
    assert_eq!(sparkline(&[0.0, 0.5, 1.0]), "▁▅█");
    assert_eq!(sparkline(&[3.0, 5.0]), "▁█");
    assert_eq!(md("a|b\nc"), "a\\|b c");
    assert_eq!(clip("abcdef", 4), "abc…");
}

#[test]
fn a_long_score_trajectory_shows_its_ends_and_a_bounded_sparkline() {
    let r = iterations(500);
    let points_line = |text: &str| -> String {
        let mut lines = text.lines().skip_while(|l| !l.starts_with("Scores  "));
        lines.nth(1).unwrap_or_default().to_string()
    };
    let text = r.to_text();
    let spark = text
        .lines()
        .find_map(|l| l.strip_prefix("Scores  "))
        .unwrap_or_default();
    assert!(
        spark.ends_with("(each bar the mean of about 6 scores)"),
        "{spark}"
    );
    assert_eq!(spark.split(' ').next().map(|b| b.chars().count()), Some(80));
    let shown = points_line(&text);
    assert_eq!(
        shown.matches("/A 0.5").count(),
        2 * TIMELINE_EDGE,
        "{shown}"
    );
    assert!(
        shown.contains("  →  ... 460 score(s) elided (--full-timeline shows all) ...  →  481/A")
    );
    let md = r.to_markdown();
    assert!(
        md.contains("| 20 | A | 0.5 | - |  |\n| | *... 460 score(s) elided"),
        "{md}"
    );
    assert_eq!(md.matches("| A | 0.5 |").count(), 2 * TIMELINE_EDGE);
    // --full-timeline and JSON keep every score.
    let full = r.render_full(Format::Text, true);
    assert_eq!(points_line(&full).matches("/A 0.5").count(), 500);
    assert_eq!(
        full.lines()
            .find_map(|l| l.strip_prefix("Scores  "))
            .map(|s| s.chars().count()),
        Some(500)
    );
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap_or_default();
    assert_eq!(v["scores"]["points"].as_array().map(Vec::len), Some(500));
}

#[test]
fn created_and_updated_at_are_the_first_and_last_event_in_file_order_as_in_run_json() {
    // The clock went backwards: the last event is stamped before the first.
    let log = concat!(
        r#"{"ts":"2026-03-01T10:00:00Z","run_id":"b-20260301-100000","iteration":1,"phase":"A","step":"INIT","event":"run_started","payload":{}}"#,
        "\n",
        r#"{"ts":"2026-03-01T09:00:00Z","run_id":"b-20260301-100000","iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.5}}"#,
        "\n",
        r#"{"ts":"2026-03-01T09:30:00Z","run_id":"b-20260301-100000","iteration":1,"phase":"A","step":"STOP","event":"stopped","payload":{"reason":"user_stop"}}"#,
        "\n",
    );
    let state = &crate::replay_bytes("t", log.as_bytes()).runs["b-20260301-100000"];
    let r = report(log);
    assert_eq!(r.stop.started_at, state.created_at);
    assert_eq!(r.stop.last_event_at, state.updated_at);
    assert_eq!(
        r.stop.last_event_at.map(|t| t.to_string()).as_deref(),
        Some("2026-03-01T09:30:00.000Z")
    );
    // No wall time from a clock that went backwards (not 0).
    assert_eq!(r.stop.wall_ms, None);
}
