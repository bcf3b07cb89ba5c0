use super::*;

fn crit(rules: Value) -> Criteria {
    Criteria::parse(&json!({ "rules": rules })).unwrap_or_else(|e| panic!("{e:?}"))
}

fn verdicts(v: &[(&str, bool)]) -> BTreeMap<String, Verdict> {
    v.iter()
        .map(|(id, p)| {
            (
                id.to_string(),
                Verdict {
                    passed: *p,
                    message: (!p).then(|| format!("{id} broke")),
                },
            )
        })
        .collect()
}

#[test]
fn missing_weights_come_from_severity() {
    let c = crit(json!([
        {"id": "f", "severity": "fail"},
        {"id": "w", "severity": "warn"},
        {"id": "i", "severity": "info"},
        {"id": "x", "severity": "warn", "weight": 5},
        {"id": "d"}
    ]));
    let w: Vec<f64> = c.rules.iter().map(|r| r.weight).collect();
    assert_eq!(w, [2.0, 1.0, 0.0, 5.0, 2.0]);
    assert_eq!(c.rules[4].severity, Severity::Fail);
    assert_eq!(c.rules[4].phase, Level::A);
}

#[test]
fn bad_rules_are_reported_with_their_place() {
    let e = Criteria::parse(&json!({"rules": [
        {"id": "a", "severity": "fatal"},
        {"id": "b", "weight": -1},
        {"id": "c", "phase": "C"},
        {"severity": "warn"},
        {"id": "e"}, {"id": "e"}
    ], "thresholds": {"A": 2}}))
    .err()
    .unwrap_or_default();
    let at: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(
        at,
        [
            "criteria.thresholds.A",
            "criteria.rules[0]",
            "criteria.rules[1]",
            "criteria.rules[2]",
            "criteria.rules[3]",
            "criteria.rules[5] (\"e\")"
        ]
    );
}

#[test]
fn score_is_passed_weight_over_active_weight() {
    let c = crit(json!([
        {"id": "f1", "severity": "fail"},           // 2
        {"id": "w1", "severity": "warn"},           // 1
        {"id": "i1", "severity": "info"},           // 0
        {"id": "b1", "severity": "fail", "phase": "B"} // 2, only in B
    ]));
    let e = evaluate(
        &c,
        Level::A,
        &verdicts(&[("f1", true), ("w1", false), ("i1", false), ("b1", false)]),
        None,
    )
    .unwrap();
    assert!((e.score - 2.0 / 3.0).abs() < 1e-6);
    assert_eq!(e.active_rule_count, 3);
    assert_eq!(e.passed_rule_count, 1);
    assert_eq!(e.warnings, ["w1"]);
    assert!(e.failed.is_empty());
    assert!(!e.passed, "0.67 < 0.8");
    let b = evaluate(
        &c,
        Level::B,
        &verdicts(&[("f1", true), ("w1", true), ("i1", false), ("b1", false)]),
        None,
    )
    .unwrap();
    assert!((b.score - 3.0 / 5.0).abs() < 1e-6);
    assert_eq!(b.failed, ["b1"]);
    assert_eq!(b.threshold, 0.9);
}

#[test]
fn zero_active_weight_scores_one_and_a_fail_rule_blocks_a_high_score() {
    let c = crit(json!([{"id": "i", "severity": "info"}]));
    let e = evaluate(&c, Level::A, &verdicts(&[("i", false)]), None).unwrap();
    assert_eq!(e.score, 1.0);
    assert!(e.passed);
    let c = crit(json!([
        {"id": "big", "severity": "warn", "weight": 100},
        {"id": "small", "severity": "fail", "weight": 1}
    ]));
    let e = evaluate(
        &c,
        Level::A,
        &verdicts(&[("big", true), ("small", false)]),
        None,
    )
    .unwrap();
    assert!(e.score > 0.99 && !e.passed && e.failed == ["small"]);
}

#[test]
fn thresholds_are_inclusive_and_configurable() {
    let c = Criteria::parse(&json!({"thresholds": {"A": 0.5},
        "rules": [{"id": "a"}, {"id": "b"}]}))
    .unwrap();
    let half = verdicts(&[("a", true), ("b", false)]);
    // b is fail-severity: it blocks even at the threshold.
    assert!(!evaluate(&c, Level::A, &half, None).unwrap().passed);
    let c = Criteria::parse(&json!({"thresholds": {"A": 0.5},
        "rules": [{"id": "a"}, {"id": "b", "severity": "warn", "weight": 2}]}))
    .unwrap();
    assert!(
        evaluate(&c, Level::A, &half, None).unwrap().passed,
        "0.5 >= 0.5"
    );
}

#[test]
fn unjudged_rules_fail_and_reports_fill_in_for_missing_checks() {
    let c = crit(json!([{"id": "t", "check": "true"}, {"id": "doc"}]));
    let e = evaluate(&c, Level::A, &verdicts(&[("t", true)]), None).unwrap();
    assert_eq!(e.failed, ["doc"]);
    let report = SelfReport::from_json(
        &json!({"score": 0.1, "rule_results": [{"id": "doc", "status": "pass"}]}),
    )
    .unwrap();
    let e = evaluate(&c, Level::A, &verdicts(&[("t", true)]), Some(&report)).unwrap();
    assert!(e.passed && e.score == 1.0 && e.source == Source::Checks);
}

#[test]
fn a_bare_score_is_the_evaluation_when_no_rule_was_judged() {
    let none = Criteria::default();
    let m = SelfReport::from_score(0.82);
    let e = evaluate(&none, Level::A, &BTreeMap::new(), Some(&m)).unwrap();
    assert!(e.passed && e.source == Source::Marker && !e.has_rules());
    let e = evaluate(&none, Level::B, &BTreeMap::new(), Some(&m)).unwrap();
    assert!(!e.passed, "0.82 < 0.9 in B");
    assert_eq!(evaluate(&none, Level::A, &BTreeMap::new(), None), None);
    let j =
        SelfReport::from_json(&json!({"score": 0.95, "passed": true, "failed": ["x"]})).unwrap();
    let e = evaluate(&none, Level::A, &BTreeMap::new(), Some(&j)).unwrap();
    assert!(!e.passed && e.failed == ["x"] && e.source == Source::Report);
    assert_eq!(SelfReport::from_json(&json!({"note": 1})), None);
}

#[test]
fn rule_results_read_as_list_or_map() {
    let a = SelfReport::from_json(&json!({"rule_results": [
        {"id": "x", "passed": false, "message": "m"}, {"id": "y", "status": "ok"}]}))
    .unwrap();
    let b = SelfReport::from_json(&json!({"rule_results": {
        "x": {"passed": false, "message": "m"}, "y": true}}))
    .unwrap();
    assert_eq!(a.verdicts, b.verdicts);
    assert_eq!(a.verdicts["x"].message.as_deref(), Some("m"));
}

fn eval(level: Level, passed: bool, failed: &[&str], rules: bool) -> Evaluation {
    Evaluation {
        level: Some(level),
        score: 0.5,
        passed,
        threshold: 0.8,
        failed: failed.iter().map(|s| s.to_string()).collect(),
        warnings: vec![],
        rule_results: if rules {
            vec![RuleResult {
                id: "r".into(),
                severity: Severity::Warn,
                weight: 1.0,
                phase: Level::A,
                passed,
                message: None,
            }]
        } else {
            vec![]
        },
        active_rule_count: 1,
        passed_rule_count: 0,
        source: Source::Checks,
    }
}

#[test]
fn stop_conditions_in_aif_loops_order() {
    use AfterEvaluation::*;
    let all = Circumstances {
        at_limit: true,
        user_stop: true,
        stagnating: true,
        over_budget: true,
    };
    assert_eq!(
        after_evaluation(&eval(Level::A, true, &[], true), all),
        SwitchToB
    );
    assert_eq!(
        after_evaluation(&eval(Level::B, true, &[], true), all),
        Stop(StopReason::ThresholdReached)
    );
    assert_eq!(
        after_evaluation(&eval(Level::B, false, &[], true), all),
        Stop(StopReason::NoMajorIssues)
    );
    // A bare score has no rule verdicts: no_major_issues cannot be claimed.
    assert_eq!(
        after_evaluation(&eval(Level::B, false, &[], false), all),
        Stop(StopReason::IterationLimit)
    );
    let blocked = eval(Level::A, false, &["f"], true);
    assert_eq!(
        after_evaluation(&blocked, all),
        Stop(StopReason::IterationLimit)
    );
    let c = Circumstances {
        at_limit: false,
        ..all
    };
    assert_eq!(after_evaluation(&blocked, c), Stop(StopReason::UserStop));
    let c = Circumstances {
        user_stop: false,
        ..c
    };
    assert_eq!(after_evaluation(&blocked, c), Stop(StopReason::Stagnation));
    let c = Circumstances {
        stagnating: false,
        ..c
    };
    assert_eq!(
        after_evaluation(&blocked, c),
        Stop(StopReason::BudgetExceeded)
    );
    assert_eq!(
        after_evaluation(&blocked, Circumstances::default()),
        Continue
    );
    assert_eq!(
        StopReason::NoMajorIssues.status(),
        crate::fold::run_state::Status::Completed
    );
    assert_eq!(
        StopReason::PhaseError.status(),
        crate::fold::run_state::Status::Failed
    );
    assert_eq!(
        StopReason::Stagnation.status(),
        crate::fold::run_state::Status::Stopped
    );
}

#[test]
fn decisions_and_feedback_most_severe_first_and_capped() {
    let c = crit(json!([
        {"id": "style", "severity": "warn"},
        {"id": "tests", "severity": "fail", "weight": 3},
        {"id": "types", "severity": "fail"},
        {"id": "ok"}
    ]));
    let e = evaluate(
        &c,
        Level::A,
        &verdicts(&[
            ("style", false),
            ("tests", false),
            ("types", false),
            ("ok", true),
        ]),
        None,
    )
    .unwrap();
    let f = feedback(&e, 500);
    assert_eq!(
        f,
        "[fail] tests: tests broke\n[fail] types: types broke\n[warn] style: style broke"
    );
    let short = feedback(&e, 10);
    assert_eq!(short.chars().count(), 10);
    assert!(short.ends_with('…'));
    assert_eq!(
        decide(&e, 1, 3, 500),
        Decision::Retry {
            feedback: f.clone()
        }
    );
    assert_eq!(decide(&e, 3, 3, 500), Decision::Escalate { feedback: f });
    let ok = evaluate(
        &c,
        Level::A,
        &verdicts(&[
            ("style", true),
            ("tests", true),
            ("types", true),
            ("ok", true),
        ]),
        None,
    )
    .unwrap();
    assert_eq!(decide(&ok, 3, 3, 500), Decision::Proceed);
}

#[test]
fn declared_rules_are_always_judged_and_unknown_failures_block() {
    let c = crit(json!([{"id": "docs"}]));
    let e = evaluate(&c, Level::A, &BTreeMap::new(), None).unwrap();
    assert!(
        !e.passed && e.failed == ["docs"],
        "no check, no report: no verdict fails"
    );
    let r = SelfReport::from_json(&json!({"score": 0.95, "failed": ["typo"],
        "rule_results": [{"id": "docs", "passed": true}, {"id": "typo", "passed": false, "message": "m"}]}))
    .unwrap();
    let e = evaluate(&c, Level::A, &BTreeMap::new(), Some(&r)).unwrap();
    assert_eq!(e.failed, ["typo"]);
    assert_eq!(e.rule_results.len(), 2, "typo listed once");
    assert_eq!(e.rule_results[1].message.as_deref(), Some("m"));
    assert_eq!(e.score, 1.0, "an unknown id weighs nothing");
    assert!(!e.passed);
    // Rules only at B: A has no active weight, scores 1.0 and passes to the switch.
    let b_only = crit(json!([{"id": "perf", "phase": "B"}]));
    let a = evaluate(&b_only, Level::A, &BTreeMap::new(), None).unwrap();
    assert!(a.passed && a.score == 1.0 && a.active_rule_count == 0);
}

#[test]
fn weights_and_scores_stay_in_range() {
    assert!(Criteria::parse(&json!([{"id": "a", "weight": 1e308}])).is_err());
    assert!(Criteria::parse(&json!([{"id": "a", "weight": 1e9}])).is_ok());
    assert_eq!(
        SelfReport::from_json(&json!({"score": 5})).unwrap().score,
        None
    );
    assert_eq!(
        SelfReport::from_json(&json!({"score": -0.1}))
            .unwrap()
            .score,
        None
    );
    let c = crit(json!([{"id": "a"}]));
    let e = evaluate(&c, Level::A, &verdicts(&[("a", false)]), None).unwrap();
    assert!(e.score.to_bits() == 0.0f64.to_bits(), "0, not -0");
    let mut e = evaluate(&c, Level::A, &verdicts(&[("a", true)]), None).unwrap();
    assert!(e.passed);
    fail_exit_status(&mut e, Some("exit 1".into()));
    assert!(!e.passed && e.failed == [EXIT_STATUS] && e.score == 1.0);
}
