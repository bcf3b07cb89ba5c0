use super::*;

fn one(log: &str) -> Trace {
    let runs = traces_from_bytes("t", log.as_bytes());
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_values().next().unwrap_or_default()
}

#[test]
fn aif_loop_steps_take_the_gap_to_the_previous_event() {
    let t = one(concat!(
        r#"{"ts":"2026-01-01T00:00:00Z","run_id":"r","iteration":0,"phase":"A","step":"INIT","event":"run_started","payload":{"max_iterations":4}}"#,
        "\n",
        r#"{"ts":"2026-01-01T00:00:30Z","run_id":"r","iteration":1,"phase":"A","step":"PLAN","event":"plan_created"}"#,
        "\n",
        r#"{"ts":"2026-01-01T00:01:30Z","run_id":"r","iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.444,"threshold":0.8,"passed":false,"fail_count":2,"warn_count":2,"pass_count":3}}"#,
        "\n",
        r#"{"ts":"2026-01-01T00:02:00Z","run_id":"r","iteration":1,"phase":"A","step":"REFINE","event":"refinement_done"}"#,
        "\n",
        r#"{"ts":"2026-01-01T00:02:05Z","run_id":"r","iteration":1,"phase":"A","step":"REFINE","event":"iteration_advanced","payload":{"new_iteration":2}}"#,
        "\n",
        r#"{"ts":"2026-01-01T00:02:10Z","run_id":"r","iteration":2,"phase":"A","step":"EVALUATE","event":"phase_error","payload":{"error":"no score"}}"#,
        "\n",
        r#"{"ts":"2026-01-01T00:02:20Z","run_id":"r","iteration":2,"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.9,"passed":true,"failed_rules":[],"warn_rules":["W"],"active_rule_count":7,"passed_rule_count":6}}"#,
        "\n",
    ));
    let steps: Vec<_> = t
        .phases()
        .iter()
        .map(|a| (&*a.name, a.iteration, a.attempt, a.duration_ms, a.outcome()))
        .collect();
    assert_eq!(
        steps,
        vec![
            ("INIT", Some(0), 1, None, "ok"),
            ("PLAN", Some(1), 1, Some(30_000), "ok"),
            ("EVALUATE", Some(1), 1, Some(60_000), "ok"),
            ("REFINE", Some(1), 1, Some(35_000), "ok"),
            ("EVALUATE", Some(2), 1, Some(5_000), "failed"),
            ("EVALUATE", Some(2), 2, Some(10_000), "ok"),
        ]
    );
    assert_eq!(t.errors.len(), 1);
    assert_eq!(t.errors[0].text, "no score");
    let e = &t.evaluations[0];
    assert_eq!(
        (e.active_rules, e.passed_rules, e.blocking()),
        (Some(7), Some(3), 2)
    );
    let e = &t.evaluations[1];
    assert_eq!(
        (e.active_rules, e.passed_rules, e.blocking()),
        (Some(7), Some(6), 0)
    );
    assert_eq!(e.previous_score, 0.444);
    assert!(t.is_running());
}

/// aif-loop's `failed` right after a step's error ends that attempt ("EVALUATE failed after
/// one retry": two attempts, not three); a step that did not fail gets a new attempt.
#[test]
fn a_failed_run_after_a_step_error_ends_that_attempt() {
    let t = one(include_str!(
        "../../../../../fixtures/failed-run/history.jsonl"
    ));
    let evaluate: Vec<_> = t.steps.iter().filter(|s| &*s.name == "EVALUATE").collect();
    assert_eq!(evaluate.len(), 2, "{evaluate:?}");
    assert_eq!(
        evaluate.iter().map(|s| s.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    let last = evaluate[1];
    assert_eq!(
        last.error.as_deref(),
        Some("evaluator output missing score again")
    );
    assert_eq!(last.duration_ms, Some(31_000));
    // Not after an error: the failed event is a step of its own.
    let t = one(concat!(
        r#"{"ts":"2026-03-12T13:00:00Z","run_id":"r","iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.5}}"#,
        "\n",
        r#"{"ts":"2026-03-12T13:00:05Z","run_id":"r","iteration":1,"phase":"A","step":"EVALUATE","event":"failed","payload":{"reason":"x"}}"#,
        "\n"
    ));
    assert_eq!(t.steps.len(), 1, "{:?}", t.steps);
    assert_eq!(t.steps[0].error.as_deref(), Some("x"));
}

#[test]
fn native_attempts_carry_git_state_verdicts_and_errors() {
    let t = one(concat!(
        r#"{"v":1,"seq":1,"ts":"2026-01-01T00:00:00.000Z","run_id":"n","event":"run_started","payload":{}}"#,
        "\n",
        r#"{"v":1,"seq":2,"ts":"2026-01-01T00:00:01.000Z","run_id":"n","event":"phase_started","iteration":1,"step":"fix","payload":{"kind":"loop","index":0,"attempt":1,"session_id":"s","commit":"c1","worktree":"w1"}}"#,
        "\n",
        r#"{"v":1,"seq":3,"ts":"2026-01-01T00:00:05.000Z","run_id":"n","event":"phase_finished","iteration":1,"step":"fix","payload":{"kind":"loop","index":0,"attempt":1,"exit_code":1,"stop_reason":"error","duration_ms":3900,"error":"phase \"fix\" exited with code 1: boom","commit":"c1","worktree":"w1"}}"#,
        "\n",
        r#"{"v":1,"seq":4,"ts":"2026-01-01T00:00:06.000Z","run_id":"n","event":"phase_retry","iteration":1,"step":"fix","payload":{"attempt":1,"next_attempt":2,"retry":1,"delay_ms":1000,"exit_code":1}}"#,
        "\n",
        r#"{"v":1,"seq":5,"ts":"2026-01-01T00:00:07.000Z","run_id":"n","event":"phase_started","iteration":1,"step":"fix","payload":{"kind":"loop","index":0,"attempt":2,"session_id":"s2","commit":"c1","worktree":"w1"}}"#,
        "\n",
        r#"{"v":1,"seq":5,"ts":"2026-01-01T00:00:07.000Z","run_id":"n","event":"phase_started","iteration":1,"step":"fix","payload":{"kind":"loop","index":0,"attempt":2}}"#,
        "\n",
        r#"{"v":1,"seq":6,"ts":"2026-01-01T00:00:09.000Z","run_id":"n","event":"phase_finished","iteration":1,"step":"fix","payload":{"exit_code":0,"stop_reason":"end_turn","duration_ms":2000,"verdict":"pass","commit":"c2","worktree":"w2","marker":{"directive":"exit","label":"green"}}}"#,
        "\n",
        r#"{"v":1,"seq":7,"ts":"2026-01-01T00:00:09.500Z","run_id":"n","event":"evaluation_done","iteration":1,"phase":"A","step":"fix","payload":{"score":0.9,"passed":true,"threshold":0.8,"failed":[],"warnings":["w"],"rule_results":[{"id":"a","passed":true},{"id":"w","passed":false}],"source":"checks","decision":{"action":"proceed","feedback":""}}}"#,
        "\n",
        r#"{"v":1,"seq":8,"ts":"2026-01-01T00:00:09.600Z","run_id":"n","event":"transition","iteration":1,"step":"fix","payload":{"from":"fix","source":"when","rule":"passes","goto":["review"]}}"#,
        "\n",
        r#"{"v":1,"seq":9,"ts":"2026-01-01T00:00:10.000Z","run_id":"n","event":"stopped","payload":{"exit_reason":"marker","exit_label":"green","iterations_completed":1}}"#,
        "\n",
    ));
    assert_eq!(t.duplicates, 1);
    assert_eq!(t.attempts.len(), 2);
    let (a, b) = (&t.attempts[0], &t.attempts[1]);
    assert_eq!(
        (a.attempt, a.outcome(), a.duration_ms),
        (1, "failed", Some(3900))
    );
    assert_eq!(
        (b.attempt, b.outcome(), b.explicit().verdict.as_deref()),
        (2, "ok", Some("pass"))
    );
    let x = b.explicit();
    assert_eq!(x.marker.as_deref(), Some("exit: green"));
    assert_eq!(
        (x.commit_start.as_deref(), x.commit_end.as_deref()),
        (Some("c1"), Some("c2"))
    );
    assert_eq!(t.retries.len(), 1);
    assert_eq!(t.retries[0].delay_ms, Some(1000));
    assert_eq!(t.errors.len(), 1);
    assert!(t.errors[0].text.contains("boom"));
    let e = &t.evaluations[0];
    assert_eq!((e.active_rules, e.passed_rules), (Some(2), Some(1)));
    assert_eq!(e.decision.as_deref(), Some("proceed"));
    assert_eq!(t.transitions[0].goto, vec!["review".to_string()]);
    let stop = t.stop.as_ref().unwrap();
    assert_eq!(stop.reason.as_deref(), Some("marker"));
    assert_eq!(t.phases().len(), 2, "explicit attempts win over steps");
}

#[test]
fn avenor_phase_durations_come_from_the_timestamps() {
    let t = one(concat!(
        r#"{"event":"avenor.loop.start","run_id":"a","ts":1715000000000,"max_iterations":5}"#,
        "\n",
        r#"{"ts":1715000001000,"phase":"build","event":"avenor.phase.start","iteration":0,"kind":"pre","run_id":"a"}"#,
        "\n",
        r#"{"run_id":"a","iteration":0,"stop_reason":"end_turn","event":"avenor.phase.end","phase":"build","ts":1715000060000,"usage":{"input_tokens":2000,"output_tokens":500}}"#,
        "\n",
        r#"{"event":"avenor.phase.start","kind":"loop","iteration":1,"phase":"test","ts":1715000061000,"run_id":"a"}"#,
        "\n",
        r#"{"phase":"test","run_id":"a","event":"avenor.phase.end","ts":1715000090000,"iteration":1,"stop_reason":"max_tokens"}"#,
        "\n",
        r#"{"event":"avenor.loop.end","exit_reason":"phase_failure","ts":1715000091000,"run_id":"a"}"#,
        "\n",
    ));
    let a: Vec<_> = t
        .phases()
        .iter()
        .map(|a| (&*a.name, a.kind(), a.duration_ms, a.outcome()))
        .collect();
    assert_eq!(
        a,
        vec![
            ("build", Some("pre"), Some(59_000), "ok"),
            ("test", Some("loop"), Some(29_000), "failed")
        ]
    );
    assert_eq!(t.tokens.input, 2000);
    assert_eq!(t.errors[0].text, "stop reason max_tokens");
    assert!(!t.is_running());
}

#[test]
fn garbage_payloads_do_not_panic() {
    let t = one(concat!(
        r#"{"event":"phase_finished","v":1,"payload":{"duration_ms":-5,"exit_code":"x","marker":7}}"#,
        "\n",
        r#"{"event":"transition","v":1,"payload":{"goto":"end","end":"done"}}"#,
        "\n",
        r#"{"event":"evaluation_done","v":1,"payload":[1,2]}"#,
        "\n",
        r#"{"event":"escalated","v":1,"payload":"?"}"#,
        "\n",
        r#"{"event":"phase_finished","v":1,"ts":5,"payload":{"duration_ms":18446744073709551615}}"#,
        "\n",
    ));
    assert_eq!(t.events, 5);
    assert_eq!(t.transitions[0].goto, vec!["end".to_string()]);
    assert_eq!(t.transitions[0].end_reason.as_deref(), Some("done"));
}

proptest::proptest! {
    /// The one-pass test gives what searching the text for each pattern gives, on texts made
    /// of the patterns' pieces, near misses included.
    #[test]
    fn evaluation_payload_test_matches_a_search_per_pattern(
        parts in proptest::collection::vec(
            proptest::sample::select(vec![
                "\"", "_count", "_coun", "rule_results", "rule_result", "decision", "decisions",
                "source", "sourc", "\\", ":", "1", "{", "}", "x", "é",
            ]),
            0..12,
        )
    ) {
        let text = parts.concat();
        let searched = ["_count\"", "\"rule_results\"", "\"decision\"", "\"source\"", "\\"]
            .iter()
            .any(|k| text.contains(k));
        proptest::prop_assert_eq!(evaluation_reads_payload(Some(&text)), searched, "{}", text);
    }
}

#[test]
fn evaluation_payload_test_finds_each_key() {
    for (p, reads) in [
        (r#"{"score":0.5,"passed":true,"failed":["r1"]}"#, false),
        (r#"{"score":0.5,"pass_count":3}"#, true),
        (r#"{"rule_results":[]}"#, true),
        (r#"{"decision":{"action":"retry"}}"#, true),
        (r#"{"x":"source"}"#, true),
        (
            r#"{"sources":1,"decisions":2,"rule_result":3,"_counts":4}"#,
            false,
        ),
        (r#"{"s\u006furce":"checks"}"#, true),
    ] {
        assert_eq!(evaluation_reads_payload(Some(p)), reads, "{p}");
    }
    assert!(!evaluation_reads_payload(None));
}

#[test]
fn evaluations_take_the_events_quality_phase_else_the_runs() {
    let t = one(concat!(
        r#"{"run_id":"r","iteration":1,"event":"run_started","payload":{}}"#,
        "\n",
        r#"{"run_id":"r","iteration":1,"event":"evaluation_done","payload":{"score":0.5}}"#,
        "\n",
        r#"{"run_id":"r","iteration":1,"phase":"B","event":"evaluation_done","payload":{"score":0.6}}"#,
        "\n",
        r#"{"run_id":"r","iteration":2,"event":"evaluation_done","payload":{"score":0.7}}"#,
        "\n",
        r#"{"run_id":"r","iteration":2,"phase":"B","event":"phase_switched","payload":{"from_phase":"B","to_phase":"C"}}"#,
        "\n",
        r#"{"run_id":"r","iteration":2,"event":"evaluation_done","payload":{"score":0.8}}"#,
        "\n",
        r#"{"run_id":"r","iteration":3,"phase":"","event":"evaluation_done","payload":{"score":0.9}}"#,
        "\n",
        r#"{"run_id":"r","iteration":3,"event":"evaluation_done","payload":{"score":0.9}}"#,
        "\n",
    ));
    let phases: Vec<&str> = t.evaluations.iter().map(|e| &*e.quality_phase).collect();
    assert_eq!(phases, ["A", "B", "B", "C", "", "A"]);
    assert!(Arc::ptr_eq(
        &t.evaluations[1].quality_phase,
        &t.evaluations[2].quality_phase
    ));
}

proptest::proptest! {
    /// A derived step's number is one more than the earlier steps of its iteration, name and
    /// quality phase, whatever the order of iterations (in order, going back, one long
    /// iteration) and whether errors split steps.
    #[test]
    fn derived_steps_are_numbered_per_iteration_name_and_phase(
        moves in proptest::collection::vec(
            (0u8..8, 0usize..3, proptest::bool::weighted(0.1), proptest::bool::weighted(0.15)),
            0..150,
        )
    ) {
        let mut log = String::new();
        let mut iteration: i64 = 1;
        for (k, (step_move, name, switch, error)) in moves.iter().enumerate() {
            // Mostly stay (long iterations), sometimes move on, sometimes go back.
            iteration = match step_move {
                0 => iteration + 1,
                1 => (iteration - 1).max(0),
                _ => iteration,
            };
            let step = ["PLAN", "EVALUATE", "REFINE"][*name];
            let phase = if *switch { "B" } else { "A" };
            let event = if *error { "phase_error" } else { "critique_done" };
            log.push_str(&format!(
                r#"{{"ts":"2026-01-01T00:{:02}:{:02}Z","run_id":"r","seq":{k},"iteration":{iteration},"phase":"{phase}","step":"{step}","event":"{event}","payload":{{}}}}"#,
                k / 60 % 60,
                k % 60
            ));
            log.push('\n');
        }
        let t = one_or_none(&log);
        let steps = t.as_ref().map_or(&[][..], |t| &t.steps[..]);
        for (k, st) in steps.iter().enumerate() {
            let earlier = steps[..k]
                .iter()
                .filter(|e| e.iteration == st.iteration && e.name == st.name && e.phase == st.phase)
                .count() as u64;
            proptest::prop_assert_eq!(st.attempt, earlier + 1, "step {} of {:?}", k, steps);
        }
    }
}

fn one_or_none(log: &str) -> Option<Trace> {
    traces_from_bytes("t", log.as_bytes()).into_values().next()
}

#[test]
fn a_long_iteration_and_a_return_to_an_earlier_one_keep_counting() {
    let mut log = String::new();
    // 100 steps alternating in iteration 1, then iteration 2, then iteration 1 again.
    let mut line = |k: usize, iteration: u64, step: &str| {
        log.push_str(&format!(
            r#"{{"run_id":"r","seq":{k},"iteration":{iteration},"phase":"A","step":"{step}","event":"critique_done"}}"#
        ));
        log.push('\n');
    };
    for k in 0..100 {
        line(k, 1, ["PLAN", "EVALUATE"][k % 2]);
    }
    line(100, 2, "PLAN");
    line(101, 1, "PLAN");
    line(102, 1, "EVALUATE");
    let t = one(&log);
    let numbers: Vec<u64> = t.steps.iter().map(|s| s.attempt).collect();
    let mut expected: Vec<u64> = (0..100).map(|k| k / 2 + 1).collect();
    expected.extend([1, 51, 51]);
    assert_eq!(numbers, expected);
}

#[test]
fn a_stop_restating_the_error_it_stops_on_is_not_a_second_error() {
    let failed = r#""error":"phase \"work\" exited with code 7: boom""#;
    let log = |stop_error: &str| {
        [
            r#"{"v":1,"seq":1,"run_id":"r","event":"run_started"}"#.to_string(),
            r#"{"v":1,"seq":2,"run_id":"r","event":"phase_started","iteration":1,"step":"work","payload":{"attempt":1}}"#.into(),
            format!(r#"{{"v":1,"seq":3,"run_id":"r","event":"phase_finished","iteration":1,"step":"work","payload":{{"attempt":1,"exit_code":7,{failed}}}}}"#),
            format!(r#"{{"v":1,"seq":4,"run_id":"r","event":"stopped","payload":{{"exit_reason":"phase_failure",{stop_error}}}}}"#),
        ]
        .join("\n")
    };
    let sources =
        |t: &Trace| -> Vec<String> { t.errors.iter().map(|e| e.source.clone()).collect() };
    assert_eq!(sources(&one(&log(failed))), ["phase_finished"]);
    // A stop with an error of its own is one.
    let other = one(&log(r#""error":"the agent's quota ran out""#));
    assert_eq!(sources(&other), ["phase_finished", "stopped"]);
}
