//! End-to-end tests of loop decisions: rule evaluation with check commands, the A → B switch,
//! `when` transition rules, branch routing, escalation and stagnation stops.

use serde_json::{Value, json};

mod common;
use common::*;

fn stopped(events: &[Value]) -> Value {
    named(events, "stopped")
        .last()
        .map(|e| e["payload"].clone())
        .unwrap_or(Value::Null)
}

fn transitions(events: &[Value]) -> Vec<Value> {
    named(events, "transition")
        .iter()
        .map(|e| e["payload"].clone())
        .collect()
}

#[test]
fn checks_score_rules_switch_a_to_b_and_stop_at_threshold_reached() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 4,
               "criteria": {"rules": [
                   {"id": "builds", "severity": "fail", "check": "true"},
                   {"id": "documented", "severity": "warn", "check": "true"},
                   {"id": "fast", "severity": "fail", "phase": "B",
                    "check": "test -f fast || { echo 'too slow: 3 s' >&2; exit 1; }"}]},
               "loop": [{"name": "work", "run": "test $LOOPCTL_ITERATION -lt 2 || touch fast"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    let evals: Vec<(String, u64, f64, bool)> = named(&ev, "evaluation_done")
        .iter()
        .map(|e| {
            (
                e["phase"].as_str().unwrap().to_string(),
                e["iteration"].as_u64().unwrap(),
                e["payload"]["score"].as_f64().unwrap(),
                e["payload"]["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    // A passes on 1 (3/3) and switches; B judges the same work: 3/5 with `fast` failing.
    assert_eq!(
        evals,
        [
            ("A".into(), 1, 1.0, true),
            ("B".into(), 1, 0.6, false),
            ("B".into(), 2, 1.0, true)
        ]
    );
    let b1 = &named(&ev, "evaluation_done")[1]["payload"];
    assert_eq!(b1["failed"], json!(["fast"]));
    assert_eq!(b1["threshold"], json!(0.9));
    assert_eq!(b1["decision"]["action"], "retry");
    assert_eq!(
        b1["decision"]["feedback"],
        "[fail] fast: check exited with code 1: too slow: 3 s"
    );
    let sw = named(&ev, "phase_switched");
    assert_eq!(sw.len(), 1);
    assert_eq!(
        sw[0]["payload"],
        json!({"from_phase": "A", "to_phase": "B"})
    );
    assert_eq!(stopped(&ev)["reason"], "threshold_reached");
    let st = s.state();
    assert_eq!(st["status"], "completed");
    assert_eq!(st["stop"]["reason"], "threshold_reached");
    assert_eq!(st["phase"], "B");
    assert_eq!(st["last_score"], json!(1.0));
    assert_eq!(st["score_history"].as_array().unwrap().len(), 3);
    assert_eq!(st["criteria"]["rules"][2]["phase"], "B");
    assert!(s.sentinel().starts_with("DONE\n"), "{}", s.sentinel());
    assert!(s.sentinel().contains("STOP_REASON=threshold_reached"));
}

#[test]
fn no_fail_rule_failing_stops_with_no_major_issues() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"criteria": {"rules": [
                   {"id": "tests", "check": "true"},
                   {"id": "style", "severity": "warn", "weight": 3, "check": "false"}]},
               "loop": [{"name": "work", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(
        named(&ev, "evaluation_done").len(),
        1,
        "score 0.4 < 0.8, no blocker"
    );
    assert_eq!(stopped(&ev)["reason"], "no_major_issues");
    assert_eq!(s.state()["status"], "completed");
}

/// aif-loop's stagnation rule: a score that gains less than 0.02 twice with no blockers stops the run.
#[test]
fn a_score_that_never_improves_stops_with_stagnation_exit_3() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 10,
               "loop": [{"name": "attempt", "run": echo("<|score: 0.5|>"), "evaluate": true}]}),
        &[],
    );
    assert_eq!(code, 3, "{err}");
    let ev = s.events();
    assert_eq!(
        named(&ev, "evaluation_done").len(),
        3,
        "0.5 (progress), 0.5, 0.5"
    );
    let stop = stopped(&ev);
    assert_eq!(stop["reason"], "stagnation");
    let t = transitions(&ev);
    assert_eq!(t.last().unwrap()["source"], "stagnation");
    let st = s.state();
    assert_eq!(
        (st["status"].as_str(), st["stagnation_count"].as_u64()),
        (Some("stopped"), Some(2))
    );
    assert!(s.sentinel().contains("STOP_REASON=stagnation"));
}

#[test]
fn reflect_then_plan_again_hands_the_failure_to_the_next_plan() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"when": ["it passes and the goal is met: stop",
                        "it fails: reflect on what broke, then plan again",
                        "after 4 tries: stop and warn"],
               "loop": [
                   {"name": "plan", "prompt": "Plan. Last failure: {{.LastFailure}}",
                    "agent": ["sh", "-c", "printf '%s\\n' \"$1\" >> trace", "sh", "{prompt}"]},
                   {"name": "act", "run": "test $LOOPCTL_ITERATION -lt 2 || touch fixed"},
                   {"name": "observe", "evaluate": true,
                    "run": "test -f fixed || { echo 'fixed is missing' >&2; exit 1; }"},
                   {"name": "reflect", "run": "echo reflect >> trace"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(
        phases(&ev),
        [
            "plan@1",
            "act@1",
            "observe@1",
            "reflect@1",
            "plan@2",
            "act@2",
            "observe@2"
        ]
    );
    let trace = std::fs::read_to_string(s.dir.join("trace")).unwrap();
    assert!(
        trace.starts_with("Plan. Last failure: \nreflect\n"),
        "{trace}"
    );
    assert!(
        trace.contains("Plan. Last failure: phase \"observe\" (iteration 1, attempt 1) exited with code 1: fixed is missing"),
        "{trace}"
    );
    let t = transitions(&ev);
    assert_eq!(
        t[0]["rule"],
        "it fails: reflect on what broke, then plan again"
    );
    assert_eq!(t[0]["goto"], json!(["reflect", "plan"]));
    assert_eq!(t.last().unwrap()["condition"], "goal_met");
    assert_eq!(stopped(&ev)["reason"], "goal_met");
    assert_eq!(s.state()["status"], "completed");
    assert_eq!(
        named(&ev, "phase_retry").len(),
        0,
        "a failed check is not retried"
    );
}

#[test]
fn after_n_tries_outranks_it_fails_and_stop_and_warn_warns() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"when": ["it fails: act", "after 2 tries: stop and warn"],
               "loop": [{"name": "act", "run": "true"},
                        {"name": "observe", "run": "echo 'still red' >&2; exit 1"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: stopped by \"after 2 tries: stop and warn\" after 2 observation(s)"),
        "{err}"
    );
    let ev = s.events();
    assert_eq!(phases(&ev), ["act@1", "observe@1", "act@2", "observe@2"]);
    let stop = stopped(&ev);
    assert_eq!(stop["reason"], "attempt_limit");
    assert!(stop["warning"].as_str().unwrap().contains("still red"));
    assert_eq!(s.state()["status"], "stopped");
}

#[test]
fn blocked_asks_a_human_ends_blocked_5_with_an_escalation_report() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"when": ["blocked: ask a human", "it fails: act", "after 5 tries: stop"],
               "loop": [{"name": "act", "run": "true"},
                        {"name": "observe", "evaluate": true,
                         "run": format!("test $LOOPCTL_ITERATION -lt 2 && exit 1; {}", echo("<|workflow: abort | Should userId be a string or a number?|>"))}]}),
        &[],
    );
    assert_eq!(code, 5, "{err}");
    let sentinel = s.sentinel();
    assert!(sentinel.starts_with("BLOCKED\n"), "{sentinel}");
    assert!(
        sentinel.contains("REASON=Should userId be a string or a number?"),
        "{sentinel}"
    );
    let ev = s.events();
    let esc = named(&ev, "escalated");
    assert_eq!(esc.len(), 1);
    assert_eq!(esc[0]["payload"]["trigger"], "ask_a_human");
    assert_eq!(esc[0]["payload"]["report"], "escalation.md");
    let md = std::fs::read_to_string(s.run_dir().join("escalation.md")).unwrap();
    assert!(
        md.contains("**Question for a human:** Should userId be a string or a number?"),
        "{md}"
    );
    assert!(md.contains("## Attempts"), "{md}");
    let st = s.state();
    assert_eq!(st["status"], "stopped");
    assert_eq!(st["stop"]["reason"], "escalated");
    assert_eq!(
        st["stop"]["detail"],
        "Should userId be a string or a number?"
    );
}

#[test]
fn failing_at_the_iteration_limit_escalates_with_the_repeated_pattern() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 2,
               "criteria": {"rules": [{"id": "tests", "check": "echo '1 test failing' >&2; exit 1"},
                                      {"id": "lint", "check": "true"}]},
               "loop": [{"name": "work", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(stopped(&ev)["reason"], "iteration_limit");
    let esc = &named(&ev, "escalated")[0]["payload"];
    assert_eq!(esc["trigger"], "iteration_limit");
    assert_eq!(
        esc["pattern"],
        "tests failed in every one of 2 failed evaluations"
    );
    assert_eq!(esc["attempts_summary"].as_array().unwrap().len(), 2);
    let last = &named(&ev, "evaluation_done")[1]["payload"];
    assert_eq!(last["decision"]["action"], "escalate");
    assert!(s.run_dir().join("escalation.md").exists());
    assert_eq!(s.state()["status"], "stopped");
}

#[test]
fn branches_route_on_the_result_string_and_goto_end_ends_cleanly() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"loop": [
                   {"name": "classify", "run": format!("echo noise; {}; echo trailing", echo("<|result: 250|>")),
                    "transition": {"branches": [
                        {"operator": "<", "when": "100", "goto": "low"},
                        {"operator": "in_range", "when": "200,299", "goto": "ok"},
                        {"operator": "default", "when": "", "goto": "low"}]}},
                   {"name": "low", "run": "true"},
                   {"name": "ok", "run": "echo write_ok",
                    "transition": {"branches": [{"operator": "ends_with", "when": "_ok", "goto": "end"}]}}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(phases(&ev), ["classify@1", "ok@1"]);
    let t = transitions(&ev);
    assert_eq!(
        (t[0]["result"].as_str(), t[0]["branch"].as_u64()),
        (Some("250"), Some(1))
    );
    assert_eq!(stopped(&ev)["reason"], "goto_end");
    assert_eq!(s.state()["status"], "completed");
}

#[test]
fn on_failure_is_taken_before_branches_once_retries_are_spent() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"loop": [
                   {"name": "deploy", "run": "test -f healed || exit 1",
                    "transition": {"on_failure": "heal",
                                   "branches": [{"operator": "default", "when": "", "goto": "end"}]}},
                   {"name": "heal", "run": "touch healed"}]}),
        &["--max-retries", "1", "--retry-base", "1ms"],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(phases(&ev), ["deploy@1", "deploy@1", "heal@1", "deploy@2"]);
    let t = transitions(&ev);
    assert_eq!(t[0]["source"], "on_failure");
    assert_eq!(t[1]["source"], "branch");
    assert_eq!(stopped(&ev)["reason"], "goto_end");
}

#[test]
fn a_back_edge_without_a_ceiling_is_rejected_before_anything_runs() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"when": ["it fails: reflect, then plan again"],
               "loop": [{"name": "plan", "run": "touch ran"}, {"name": "observe", "run": "false"},
                        {"name": "reflect", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("back-edge with no ceiling"), "{err}");
    assert!(!s.dir.join("ran").exists());
    assert!(s.sentinel().starts_with("FAILED\n"));
}

#[test]
fn a_phase_can_report_rule_verdicts_as_a_json_evaluation() {
    let s = Sandbox::new();
    let report = r#"{"score": 0.1, "rule_results": [{"id": "doc", "passed": PASS, "message": "no examples section"}]}"#;
    let (code, err) = s.run(
        json!({"criteria": {"rules": [{"id": "doc", "description": "has examples"}]},
               "loop": [{"name": "review", "evaluate": true,
                         "run": format!("if [ $LOOPCTL_ITERATION -lt 2 ]; then {}; else {}; fi",
                                        echo(&report.replace("PASS", "false")), echo(&report.replace("PASS", "true")))}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    let evals = named(&ev, "evaluation_done");
    assert_eq!(evals.len(), 3);
    let first = &evals[0]["payload"];
    assert_eq!(first["source"], "report");
    assert_eq!(
        first["score"],
        json!(0.0),
        "the verdicts score, not the reported number"
    );
    assert_eq!(first["failed"], json!(["doc"]));
    assert_eq!(
        first["decision"]["feedback"],
        "[fail] doc: no examples section"
    );
    assert_eq!(stopped(&ev)["reason"], "threshold_reached");
}

/// A runner killed after a phase ended but before its decision decides again on resume,
/// and the log ends the same as an uninterrupted run's.
#[test]
fn an_undecided_phase_is_decided_on_resume() {
    let config = json!({"criteria": {"rules": [{"id": "t", "check": "true"}]},
                        "loop": [{"name": "work", "run": "true"}]});
    let whole = Sandbox::new();
    assert_eq!(whole.run(config.clone(), &[]).0, 0);
    let names = |ev: &[Value]| -> Vec<String> {
        ev.iter()
            .filter(|e| e["event"] != "run_started" && e["event"] != "run_resumed")
            .map(|e| e["event"].as_str().unwrap().to_string())
            .collect()
    };
    let s = Sandbox::new();
    assert_eq!(s.run(config, &[]).0, 0);
    let log = s.run_dir().join("history.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let cut: String = text
        .lines()
        .take_while(|l| !l.contains("\"evaluation_done\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(cut.lines().last().unwrap().contains("\"decide\":true"));
    std::fs::write(&log, cut).unwrap();
    let out = s.cmd().args(["resume", "r1"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = s.events();
    assert_eq!(names(&ev), names(&whole.events()));
    assert_eq!(s.state()["stop"]["reason"], "threshold_reached");
    let seqs: Vec<u64> = ev.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

/// The bundled never-green example: its check never passes, the same rule fails three
/// evaluations in a row, the run stops with `stagnation` (exit 3), and `postmortem` and
/// `stagnation` show the evidence.
#[test]
fn a_check_that_never_passes_stops_with_stagnation_and_postmortem_shows_why() {
    let s = Sandbox::new();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/never-green");
    for f in ["loop.json", "agent.sh", "check.sh"] {
        std::fs::copy(example.join(f), s.dir.join(f)).unwrap();
    }
    let out = s.cmd().args(RUN).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let ev = s.events();
    assert_eq!(named(&ev, "evaluation_done").len(), 3);
    let stop = stopped(&ev);
    assert_eq!(stop["reason"], "stagnation");
    let detail = stop["detail"].as_str().unwrap();
    assert!(detail.starts_with("repeated_failure: "), "{detail}");
    assert!(detail.contains("iterations 1, 2, 3"), "{detail}");
    assert!(detail.contains("parses-months"), "{detail}");
    // The when rule routed reflect → plan, and the plan phase got the failure.
    let notes = std::fs::read_to_string(s.dir.join("notes.txt")).unwrap();
    assert!(
        notes.contains(
            "plan: [fail] parses-months: check exited with code 1: FAIL parse_date('2026-13-01')"
        ),
        "{notes}"
    );

    let pm = s
        .cmd()
        .args(["postmortem", "r1", "--format", "md"])
        .output()
        .unwrap();
    assert_eq!(
        pm.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pm.stderr)
    );
    let md = String::from_utf8_lossy(&pm.stdout);
    for want in ["stagnation", "repeated_failure", "parses-months"] {
        assert!(md.contains(want), "{want} missing from\n{md}");
    }
    let pj = s
        .cmd()
        .args(["postmortem", "r1", "--format", "json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&pj.stdout).unwrap();
    let text = report.to_string();
    assert_eq!(report["stop"]["reason"], "stagnation", "{text}");
    assert_eq!(
        report["distance_to_success"]["blocking_rules"],
        json!(["parses-months"])
    );
    assert_eq!(report["transitions"][0]["goto"], json!(["reflect", "plan"]));
    assert_eq!(report["transitions"][2]["source"], "stagnation");
    let st = s
        .cmd()
        .args(["stagnation", "r1", "--json"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&st.stdout).unwrap();
    let text = v.to_string();
    assert!(text.contains("\"repeated_failure\""), "{text}");
}

/// `stop_on: ["stalled"]`: a phase that writes nothing for `stalled_after_ms` is stopped and
/// the run ends with `stagnation`; one that keeps writing is left alone.
#[test]
fn a_silent_phase_is_stopped_as_stalled_and_a_chatty_one_is_not() {
    let s = Sandbox::new();
    let started = std::time::Instant::now();
    let (code, err) = s.run(
        json!({"stagnation": {"stalled_after_ms": 300, "stop_on": ["stalled"]},
               "loop": [{"name": "chatty", "run": "for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"},
                        {"name": "silent", "run": "sleep 30"}]}),
        &[],
    );
    assert_eq!(code, 3, "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let ev = s.events();
    assert_eq!(phases(&ev), ["chatty@1", "silent@1"]);
    let fin = &named(&ev, "phase_finished")[1]["payload"];
    assert_eq!(fin["stop_reason"], "stalled");
    let stop = stopped(&ev);
    assert_eq!(stop["reason"], "stagnation");
    assert!(
        stop["detail"]
            .as_str()
            .unwrap()
            .starts_with("stalled: phase \"silent\""),
        "{stop}"
    );
    assert!(
        stop["detail"]
            .as_str()
            .unwrap()
            .contains("wrote no output for 300ms"),
        "{stop}"
    );
}

/// Cutting the log after a decision's `evaluation_done` (a crash mid-decision) and resuming
/// reuses that evaluation: the resumed run ends exactly as the uninterrupted one.
#[test]
fn a_decision_cut_after_its_evaluation_resumes_to_the_same_outcome() {
    let config =
        json!({"loop": [{"name": "attempt", "run": echo("<|score: 0.5|>"), "evaluate": true}]});
    let kinds = |ev: &[Value]| -> Vec<(String, Value)> {
        ev.iter()
            .filter(|e| e["event"] != "run_started" && e["event"] != "run_resumed")
            .map(|e| {
                (
                    e["event"].as_str().unwrap().to_string(),
                    e["iteration"].clone(),
                )
            })
            .collect()
    };
    let whole = Sandbox::new();
    assert_eq!(whole.run(config.clone(), &[]).0, 3);
    for nth in [1, 2] {
        let s = Sandbox::new();
        assert_eq!(s.run(config.clone(), &[]).0, 3);
        let log = s.run_dir().join("history.jsonl");
        let text = std::fs::read_to_string(&log).unwrap();
        let mut seen = 0;
        let mut cut = String::new();
        for l in text.lines() {
            cut.push_str(l);
            cut.push('\n');
            if l.contains("\"evaluation_done\"") {
                seen += 1;
                if seen == nth {
                    break;
                }
            }
        }
        std::fs::write(&log, cut).unwrap();
        let out = s.cmd().args(["resume", "r1"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            kinds(&s.events()),
            kinds(&whole.events()),
            "cut after evaluation {nth}"
        );
        assert_eq!(
            s.state()["stagnation_count"],
            whole.state()["stagnation_count"]
        );
    }
}

#[test]
fn an_abort_marker_blocks_even_when_the_rules_pass() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"criteria": {"rules": [{"id": "ok", "check": "true"}]},
               "loop": [{"name": "work", "run": echo("<|workflow: abort | need credentials|>")}]}),
        &[],
    );
    assert_eq!(code, 5, "{err}");
    assert!(
        s.sentinel().contains("REASON=need credentials"),
        "{}",
        s.sentinel()
    );
    assert_eq!(transitions(&s.events())[0]["source"], "marker");
}

/// An observed phase's failing exit status fails its evaluation, whatever the rules said.
#[test]
fn a_failing_observed_phase_cannot_pass_on_its_rules() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 2,
               "criteria": {"rules": [{"id": "lint", "check": "true"}]},
               "loop": [{"name": "test", "run": "echo '2 tests failed' >&2; exit 1", "evaluate": true}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    let first = &named(&ev, "evaluation_done")[0]["payload"];
    assert_eq!(first["passed"], false);
    assert_eq!(first["failed"], json!(["exit-status"]));
    assert!(
        first["decision"]["feedback"]
            .as_str()
            .unwrap()
            .contains("2 tests failed")
    );
    assert_eq!(stopped(&ev)["reason"], "iteration_limit");
    assert_eq!(s.state()["status"], "stopped");
}

/// aif-loop's stop conditions come before a `when` rule that only routes: a warn-only failure
/// is `no_major_issues` even with `it fails: reflect, then plan again`.
#[test]
fn stop_conditions_outrank_routing_rules_and_attempt_rules_outrank_branches() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 4,
               "criteria": {"rules": [{"id": "style", "severity": "warn", "check": "false"}, {"id": "t", "check": "true"}]},
               "when": ["it fails: reflect, then plan again"],
               "loop": [{"name": "plan", "run": "true"}, {"name": "observe", "run": "true", "evaluate": true},
                        {"name": "reflect", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(stopped(&s.events())["reason"], "no_major_issues");

    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 5,
               "when": ["after 2 tries: stop and warn", "it fails: act"],
               "loop": [{"name": "act", "run": "true"},
                        {"name": "observe", "run": "exit 1", "evaluate": true,
                         "transition": {"on_failure": "act"}}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    assert_eq!(phases(&ev), ["act@1", "observe@1", "act@2", "observe@2"]);
    let t = transitions(&ev);
    assert_eq!(
        t[0]["source"], "on_failure",
        "the branch before the plain fail rule"
    );
    assert_eq!(t[1]["source"], "when");
    assert_eq!(stopped(&ev)["reason"], "attempt_limit");
}

/// A routed phase whose own branches match nothing keeps the rest of the route.
#[test]
fn a_queued_route_survives_a_phase_that_routes_nowhere() {
    let s = Sandbox::new();
    let (code, err) = s.run(
        json!({"max_iterations": 2,
               "when": ["it fails: reflect, then plan again", "it passes: stop"],
               "loop": [{"name": "plan", "run": "true"},
                        {"name": "observe", "run": "test $LOOPCTL_ITERATION -ge 2", "evaluate": true},
                        {"name": "reflect", "run": "echo nothing-to-route",
                         "transition": {"branches": [{"operator": "equals", "when": "x", "goto": "extra"}]}},
                        {"name": "extra", "run": "true"}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        phases(&s.events()),
        ["plan@1", "observe@1", "reflect@1", "plan@2", "observe@2"]
    );
    assert_eq!(
        stopped(&s.events())["reason"],
        "passed",
        "a bare `it passes` rule"
    );
}

/// Cut after the escalation report of the last iteration: resume writes it once, not twice.
#[test]
fn a_decision_cut_after_its_escalation_does_not_escalate_twice() {
    let s = Sandbox::new();
    let config = json!({"max_iterations": 1,
                        "criteria": {"rules": [{"id": "tests", "check": "exit 1"}]},
                        "loop": [{"name": "work", "run": "true"}]});
    assert_eq!(s.run(config, &[]).0, 0);
    let log = s.run_dir().join("history.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let end = text.find("\"escalated\"").unwrap();
    let end = end + text[end..].find('\n').unwrap() + 1;
    std::fs::write(&log, &text[..end]).unwrap();
    let out = s.cmd().args(["resume", "r1"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = s.events();
    assert_eq!(named(&ev, "escalated").len(), 1);
    assert_eq!(named(&ev, "evaluation_done").len(), 1);
    assert_eq!(stopped(&ev)["reason"], "iteration_limit");
}

/// `stop_on: ["no_change"]` in a git work tree: an iteration that leaves HEAD and the work tree
/// as it found them stops the run; one that commits each time runs on.
#[test]
fn an_iteration_that_changes_nothing_in_git_stops_and_one_that_commits_does_not() {
    let config = |work: &str| {
        json!({"max_iterations": 3, "stagnation": {"stop_on": ["no_change"]},
               "loop": [{"name": "work", "run": work},
                        {"name": "observe", "run": "exit 1", "evaluate": true}]})
    };
    let repo = || {
        let s = Sandbox::new();
        git(&s.dir, &["init", "-q"]);
        std::fs::write(s.dir.join(".gitignore"), ".loopctl\nsentinel\nloop.json\n").unwrap();
        git(&s.dir, &["add", "."]);
        git(&s.dir, &["commit", "-qm", "start"]);
        s
    };
    let idle = repo();
    let (code, err) = idle.run(config("true"), &[]);
    assert_eq!(code, 3, "{err}");
    let ev = idle.events();
    assert!(named(&ev, "phase_started")[0]["payload"]["worktree"].is_string());
    let stop = stopped(&ev);
    assert_eq!(stop["reason"], "stagnation");
    assert!(
        stop["detail"]
            .as_str()
            .unwrap()
            .starts_with("no_change: iterations 1"),
        "{stop}"
    );

    let busy = repo();
    let commit = "echo $LOOPCTL_ITERATION > f.txt && git add f.txt && git -c user.name=t -c user.email=t@t -c commit.gpgsign=false commit -qm it";
    let (code, err) = busy.run(config(commit), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stopped(&busy.events())["reason"], "iteration_limit");
}

/// `stop_on: ["oscillation"]`: a score going up and down with no net progress stops the run,
/// where aif-loop's score rule alone (reset by every rise) would not.
#[test]
fn a_score_that_oscillates_stops_with_stagnation() {
    let s = Sandbox::new();
    let flip = format!(
        "if [ $((LOOPCTL_ITERATION % 2)) = 1 ]; then {}; else {}; fi",
        echo("<|score: 0.5|>"),
        echo("<|score: 0.6|>")
    );
    let (code, err) = s.run(
        json!({"max_iterations": 8, "stagnation": {"stop_on": ["score", "oscillation"]},
               "loop": [{"name": "attempt", "run": flip, "evaluate": true}]}),
        &[],
    );
    assert_eq!(code, 3, "{err}");
    let ev = s.events();
    assert_eq!(named(&ev, "evaluation_done").len(), 5);
    let stop = stopped(&ev);
    assert!(
        stop["detail"]
            .as_str()
            .unwrap()
            .starts_with("oscillation: "),
        "{stop}"
    );
}
