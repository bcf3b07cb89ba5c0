//! The decision's parts on constructed observations: no process, no file, no log.

use std::cell::Cell;

use criteria::{Source, StopReason};

use super::*;

fn eval(passed: bool, level: Level) -> Evaluation {
    Evaluation {
        level: Some(level),
        score: if passed { 0.9 } else { 0.4 },
        passed,
        threshold: 0.8,
        failed: if passed { vec![] } else { vec!["tests".into()] },
        warnings: vec![],
        rule_results: vec![],
        active_rule_count: 1,
        passed_rule_count: u64::from(passed),
        source: Source::Marker,
    }
}

fn seen(passed: bool, blocked: bool) -> Observed {
    Observed {
        blocked,
        passed,
        goal_met: passed,
        tries: 1,
    }
}

#[test]
fn an_observation_passes_on_its_evaluation_else_its_exit_and_never_when_blocked() {
    let o = observation(None, true, false, 3);
    assert_eq!(
        (o.passed, o.goal_met, o.blocked, o.tries),
        (true, true, false, 3)
    );
    assert!(!observation(None, false, false, 1).passed);
    // An evaluation overrides the exit status, both ways.
    assert!(!observation(Some(&eval(false, Level::B)), true, false, 1).passed);
    assert!(observation(Some(&eval(true, Level::B)), false, false, 1).passed);
    // A pass at A is a pass, but the goal is B's.
    let a = observation(Some(&eval(true, Level::A)), true, false, 1);
    assert_eq!((a.passed, a.goal_met), (true, false));
    let b = observation(Some(&eval(true, Level::B)), true, false, 1);
    assert_eq!((b.passed, b.goal_met), (true, true));
    // The abort marker blocks whatever was judged.
    let blocked = observation(Some(&eval(true, Level::B)), true, true, 1);
    assert_eq!(
        (blocked.passed, blocked.goal_met, blocked.blocked),
        (false, false, true)
    );
}

#[test]
fn stop_conditions_follow_the_iteration_control_order() {
    let asked = Cell::new(0);
    let stuck = || {
        asked.set(asked.get() + 1);
        Some("score_plateau: 0.4, 0.4, 0.4".to_string())
    };
    let calm = || None;
    // Only an observed phase can stop the loop.
    assert_eq!(
        stop_condition(false, None, &seen(false, false), true, stuck),
        None
    );
    assert_eq!(asked.get(), 0);
    // No evaluation: the iteration limit, then stagnation.
    assert_eq!(
        stop_condition(true, None, &seen(false, false), true, calm),
        Some((StopReason::IterationLimit, None))
    );
    assert_eq!(
        stop_condition(true, None, &seen(false, false), false, stuck),
        Some((
            StopReason::Stagnation,
            Some("score_plateau: 0.4, 0.4, 0.4".into())
        ))
    );
    // A pass is progress: stagnation is not even asked.
    asked.set(0);
    assert_eq!(
        stop_condition(true, None, &seen(true, false), true, stuck),
        None
    );
    assert_eq!(asked.get(), 0);
    // With an evaluation: a pass at B reaches the threshold, a pass at A switches.
    let b = eval(true, Level::B);
    assert_eq!(
        stop_condition(true, Some(&b), &seen(true, false), false, calm),
        Some((StopReason::ThresholdReached, None))
    );
    let a = eval(true, Level::A);
    assert_eq!(
        stop_condition(true, Some(&a), &seen(true, false), false, calm),
        None
    );
    // A failure at the limit is the limit's, and the stagnation evidence is dropped.
    let failed = eval(false, Level::B);
    assert_eq!(
        stop_condition(true, Some(&failed), &seen(false, false), true, stuck),
        Some((StopReason::IterationLimit, None))
    );
    assert_eq!(
        stop_condition(true, Some(&failed), &seen(false, false), false, stuck).map(|s| s.0),
        Some(StopReason::Stagnation)
    );
    assert_eq!(
        stop_condition(true, Some(&failed), &seen(false, false), false, calm),
        None
    );
}

#[test]
fn failing_at_the_limit_escalates_unless_the_run_ends_otherwise() {
    let going = json!({"source": "none"});
    assert!(escalates_at_limit(&going, true, &seen(false, false)));
    assert!(!escalates_at_limit(&going, false, &seen(false, false)));
    assert!(!escalates_at_limit(&going, true, &seen(true, false)));
    assert!(!escalates_at_limit(&going, true, &seen(false, true)));
    let limit = json!({"end": {"reason": "iteration_limit"}});
    assert!(escalates_at_limit(&limit, true, &seen(false, false)));
    let stopped = json!({"end": {"reason": "stagnation"}});
    assert!(!escalates_at_limit(&stopped, true, &seen(false, false)));
}

#[test]
fn a_rule_stop_records_the_reason_of_its_condition() {
    let b = eval(true, Level::B);
    let a = eval(true, Level::A);
    assert_eq!(rule_reason(&Condition::Blocked, Some(&b)), "blocked");
    assert_eq!(
        rule_reason(&Condition::AfterTries(5), None),
        "attempt_limit"
    );
    assert_eq!(
        rule_reason(&Condition::Passes, Some(&b)),
        "threshold_reached"
    );
    assert_eq!(
        rule_reason(&Condition::PassesGoalMet, Some(&b)),
        "threshold_reached"
    );
    assert_eq!(rule_reason(&Condition::PassesGoalMet, Some(&a)), "goal_met");
    assert_eq!(rule_reason(&Condition::PassesGoalMet, None), "goal_met");
    assert_eq!(rule_reason(&Condition::Passes, Some(&a)), "passed");
    assert_eq!(rule_reason(&Condition::Fails, None), "check_failed");
}

#[test]
fn stop_and_warn_names_the_rule_the_tries_and_the_first_line_of_the_failure() {
    assert_eq!(
        stop_warning(
            "after 3 tries: stop and warn",
            3,
            Some("tests fail\nat line 4")
        ),
        "stopped by \"after 3 tries: stop and warn\" after 3 observation(s); last failure: tests fail"
    );
    assert_eq!(
        stop_warning("it fails: stop and warn", 1, None),
        "stopped by \"it fails: stop and warn\" after 1 observation(s)"
    );
}

fn chain() -> LoopFile {
    let text = r#"{"loop": [
        {"name": "classify", "run": "true",
         "transition": {"branches": [
             {"operator": "<", "when": "100", "goto": "low"},
             {"operator": "in_range", "when": "200,299", "goto": "ok"}]}},
        {"name": "low", "run": "true"},
        {"name": "ok", "run": "true",
         "transition": {"on_failure": "low",
                        "branches": [{"operator": "ends_with", "when": "_ok", "goto": "end"}]}},
        {"name": "plain", "run": "true"}]}"#;
    loopctl_core::rules::loop_file::parse(text, None)
        .expect("loop file")
        .file
}

fn route(cfg: &LoopFile, phase: usize, clean: bool, observed: bool, fin: Value) -> (bool, Value) {
    let mut t = json!({});
    let routed = route_branches(cfg, &mut t, &cfg.loop_[phase], clean, observed, &fin);
    (routed, t)
}

#[test]
fn branches_route_on_the_result_marker_before_the_last_line() {
    let cfg = chain();
    let (routed, t) = route(
        &cfg,
        0,
        true,
        false,
        json!({"result_marker": "250", "result": "noise"}),
    );
    assert!(routed);
    assert_eq!(
        t,
        json!({"result": "250", "branch": 1, "source": "branch", "goto": ["ok"], "route": [2]})
    );
    let (_, t) = route(&cfg, 0, true, false, json!({"result": "42"}));
    assert_eq!((&t["goto"], &t["route"]), (&json!(["low"]), &json!([1])));
    let (_, t) = route(&cfg, 2, true, false, json!({"result": "write_ok"}));
    assert_eq!(t["end"], json!({"reason": "goto_end"}));
    assert!(t.get("goto").is_none());
}

#[test]
fn a_failed_phase_takes_on_failure_and_an_observed_one_is_left_to_the_rules() {
    let cfg = chain();
    let (routed, t) = route(&cfg, 2, false, false, json!({"result": "boom"}));
    assert!(routed);
    assert_eq!(
        (&t["source"], &t["goto"]),
        (&json!("on_failure"), &json!(["low"]))
    );
    // No on_failure: a plain failure is recorded as such, an observed one goes to `when`.
    let (routed, t) = route(&cfg, 0, false, false, json!({"result": "150"}));
    assert!(routed);
    assert_eq!(t["source"], "on_failure");
    assert!(t.get("goto").is_none());
    let (routed, _) = route(&cfg, 0, false, true, json!({"result": "150"}));
    assert!(!routed);
    // Nothing matched, or no branches at all: the loop goes on.
    assert!(!route(&cfg, 0, true, false, json!({"result": "150"})).0);
    let (routed, t) = route(&cfg, 3, true, false, json!({"result": "x"}));
    assert!(!routed);
    assert_eq!(t, json!({}));
}
