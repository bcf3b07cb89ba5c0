//! The runner's records on constructed facts: no process, no file, no clock.

use loopctl_core::rules::markers::{Directive, Marker};
use loopctl_core::rules::next_step::{Decided, PhaseEnd};

use super::*;

fn at(kind: PhaseKind, index: usize, iteration: u64) -> Pos {
    Pos {
        kind,
        index,
        iteration,
    }
}

fn facts(pos: Pos) -> PhaseFacts<'static> {
    PhaseFacts {
        name: "build",
        pos,
        attempt: 2,
        observed: false,
        loop_decides: false,
        branches: false,
        stall_after: None,
        commit: None,
        worktree: None,
    }
}

fn exited(code: i32) -> phase::Finished {
    phase::Finished {
        exit_code: Some(code),
        duration_ms: 40,
        stdout_sha256: "aa".into(),
        stderr_sha256: "bb".into(),
        ..phase::Finished::default()
    }
}

fn base() -> Value {
    json!({"kind": "loop", "index": 0, "attempt": 2, "session_id": "ses_1"})
}

fn finished(f: &phase::Finished, i: Option<Interrupt>, at: &PhaseFacts) -> (Value, Option<String>) {
    phase_finished(base(), f, i, at, ("logs/a.stdout", "logs/a.stderr"))
}

#[test]
fn stop_reason_puts_an_interrupt_before_how_the_process_ended() {
    let killed = phase::Finished {
        signal: Some(9),
        ..phase::Finished::default()
    };
    let stalled = phase::Finished {
        stalled: true,
        signal: Some(15),
        ..phase::Finished::default()
    };
    assert_eq!(stop_reason(&exited(0), None), "end_turn");
    assert_eq!(stop_reason(&exited(1), None), "error");
    assert_eq!(stop_reason(&killed, None), "signal");
    assert_eq!(stop_reason(&stalled, None), STALLED);
    assert_eq!(
        stop_reason(&exited(0), Some(Interrupt::Cancelled(2))),
        "cancelled"
    );
    assert_eq!(stop_reason(&stalled, Some(Interrupt::Timeout)), "timeout");
}

#[test]
fn a_clean_attempt_records_its_output_and_no_failure() {
    let mut f = exited(0);
    f.last_line = Some("all green".into());
    f.markers = vec![Marker {
        directive: Directive::Exit,
        label: Some("done".into()),
        line: Some(3),
    }];
    let (fin, failure) = finished(&f, None, &facts(at(PhaseKind::Loop, 0, 1)));
    assert_eq!(failure, None);
    assert_eq!(fin["stop_reason"], "end_turn");
    assert_eq!(fin["exit_code"], 0);
    assert_eq!(fin["attempt"], 2);
    assert_eq!(fin["marker"], json!({"directive": "exit", "label": "done"}));
    assert_eq!(fin["result"], "all green");
    assert_eq!(fin["output_log"], "logs/a.stdout");
    assert_eq!(fin["stderr_sha256"], "bb");
    for absent in ["error", "verdict", "decide", "signal", "commit", "usage"] {
        assert!(fin.get(absent).is_none(), "{absent} in {fin}");
    }
}

#[test]
fn the_agent_usage_seen_on_stdout_is_recorded_as_the_contract_names_it() {
    use loopctl_core::decode::agent_usage::AgentUsage;
    let mut f = exited(1);
    f.usage = Some(AgentUsage {
        input_tokens: Some(18),
        output_tokens: Some(208),
        cache_read_tokens: Some(49366),
        cost_usd: Some(0.05),
        turns: Some(5),
        model: Some("claude-sonnet-4-5".into()),
        ..AgentUsage::default()
    });
    // A failed attempt spent its tokens too.
    let (fin, failure) = finished(&f, None, &facts(at(PhaseKind::Loop, 0, 1)));
    assert!(failure.is_some());
    assert_eq!(
        fin["usage"],
        json!({"input_tokens": 18, "output_tokens": 208, "cache_read_tokens": 49366,
               "cost_usd": 0.05, "turns": 5, "model": "claude-sonnet-4-5"})
    );
}

#[test]
fn a_killed_attempt_records_128_plus_the_signal_and_says_so() {
    let f = phase::Finished {
        signal: Some(9),
        last_error_line: Some("out of memory".into()),
        ..phase::Finished::default()
    };
    let (fin, failure) = finished(&f, None, &facts(at(PhaseKind::Loop, 0, 3)));
    assert_eq!(fin["exit_code"], 137);
    assert_eq!(fin["signal"], 9);
    let want = "phase \"build\" (iteration 3, attempt 2) was killed by signal 9: out of memory";
    assert_eq!(failure.as_deref(), Some(want));
    assert_eq!(fin["error"], want);
}

#[test]
fn an_observed_phase_exit_status_is_its_verdict_unless_interrupted() {
    let mut f = facts(at(PhaseKind::Loop, 1, 1));
    f.observed = true;
    f.loop_decides = true;
    let (fin, failure) = finished(&exited(1), None, &f);
    assert_eq!(
        (&fin["verdict"], &fin["decide"]),
        (&json!("fail"), &json!(true))
    );
    assert_eq!(
        failure.as_deref(),
        Some("phase \"build\" (iteration 1, attempt 2) exited with code 1")
    );
    assert_eq!(finished(&exited(0), None, &f).0["verdict"], "pass");
    // Cancelled: neither a verdict nor a decision; resume runs it again.
    let (fin, _) = finished(&exited(0), Some(Interrupt::Cancelled(15)), &f);
    assert_eq!(fin["stop_reason"], "cancelled");
    assert!(fin.get("verdict").is_none() && fin.get("decide").is_none());
    // A pre phase is never observed, whatever the loop file says of its index.
    let mut pre = facts(at(PhaseKind::Pre, 1, 0));
    pre.observed = true;
    pre.loop_decides = true;
    let (fin, _) = finished(&exited(1), None, &pre);
    assert!(fin.get("verdict").is_none() && fin.get("decide").is_none());
}

#[test]
fn a_decision_follows_a_loop_phase_that_reports_branches_or_stalls() {
    let mut f = facts(at(PhaseKind::Loop, 0, 1));
    f.loop_decides = true;
    // Not observed, no report, no branches: nothing to decide.
    assert!(finished(&exited(0), None, &f).0.get("decide").is_none());
    let scored = phase::Finished {
        score: Some(0.7),
        evaluation: Some(r#"{"score": 0.7}"#.into()),
        ..exited(0)
    };
    let (fin, _) = finished(&scored, None, &f);
    assert_eq!(fin["decide"], true);
    assert_eq!(
        (&fin["score"], &fin["evaluation"]["score"]),
        (&json!(0.7), &json!(0.7))
    );
    f.branches = true;
    assert_eq!(finished(&exited(0), None, &f).0["decide"], true);
    // The stall watchdog's stop is always decided (a stagnation stop), even outside a loop.
    let mut pre = facts(at(PhaseKind::Pre, 0, 0));
    pre.stall_after = Some(Duration::from_millis(1500));
    let stalled = phase::Finished {
        stalled: true,
        signal: Some(15),
        ..phase::Finished::default()
    };
    let (fin, failure) = finished(&stalled, None, &pre);
    assert_eq!(
        (&fin["stop_reason"], &fin["decide"]),
        (&json!(STALLED), &json!(true))
    );
    assert_eq!(
        failure.as_deref(),
        Some(
            "phase \"build\" (iteration 0, attempt 2) wrote no output for 1s 500ms \
             (stagnation.stalled_after_ms) and was stopped"
        )
    );
}

#[test]
fn git_facts_are_recorded_when_tracked() {
    let mut f = facts(at(PhaseKind::Loop, 0, 1));
    f.commit = Some("abc123".into());
    f.worktree = Some("w1".into());
    let (fin, _) = finished(&exited(0), None, &f);
    assert_eq!(
        (&fin["commit"], &fin["worktree"]),
        (&json!("abc123"), &json!("w1"))
    );
}

#[test]
fn a_phase_that_never_ran_is_a_failed_attempt_of_zero_length() {
    let not_found = std::io::Error::from(std::io::ErrorKind::NotFound);
    let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    assert_eq!(start_failure_code(&not_found), Some(127));
    assert_eq!(start_failure_code(&denied), None);
    let (fin, err) = never_ran(base(), "plan", 4, "prompt template: bad", Some(127));
    assert_eq!(err, "phase \"plan\" (iteration 4): prompt template: bad");
    assert_eq!(fin["error"], json!(err));
    assert_eq!(
        (&fin["stop_reason"], &fin["exit_code"], &fin["duration_ms"]),
        (&json!("error"), &json!(127), &json!(0))
    );
    assert_eq!(fin["session_id"], "ses_1");
}

#[test]
fn a_retry_names_the_failed_attempt_and_the_next() {
    let p = retry(&at(PhaseKind::Loop, 2, 5), 3, 2, 4000, Some(1));
    assert_eq!(
        p,
        json!({"kind": "loop", "index": 2, "attempt": 2, "next_attempt": 3, "retry": 2,
               "delay_ms": 4000, "exit_code": 1})
    );
}

fn end(stop_reason: &str, exit_code: Option<i64>) -> PhaseEnd {
    PhaseEnd {
        stop_reason: stop_reason.into(),
        exit_code,
        marker: None,
        verdict: None,
    }
}

fn shape() -> Shape {
    Shape {
        pre: 0,
        loop_: 1,
        post: 0,
        max_iterations: 5,
        max_retries: 0,
    }
}

#[test]
fn an_interrupted_run_ends_with_its_last_phase_end() {
    let idle = interrupted_ending(Interrupt::Timeout, &Cursor::default(), &shape());
    assert_eq!(idle.reason, ExitReason::Timeout);
    assert_eq!(
        (idle.stop_reason.as_str(), idle.exit_code),
        ("cancelled", None)
    );
    let mut cursor = Cursor::default();
    cursor.last = Some((at(PhaseKind::Loop, 0, 2), end("error", Some(2))));
    let e = interrupted_ending(Interrupt::Cancelled(2), &cursor, &shape());
    assert_eq!(e.reason, ExitReason::Cancelled);
    assert_eq!((e.stop_reason.as_str(), e.exit_code), ("error", Some(2)));
    assert_eq!(e.decided, None);
}

fn ending(reason: ExitReason) -> Ending {
    Ending {
        reason,
        label: None,
        exit_code: None,
        stop_reason: "end_turn".into(),
        iterations_completed: 3,
        decided: None,
    }
}

#[test]
fn stopped_reports_a_decision_and_hands_its_warning_back() {
    let mut e = ending(ExitReason::Marker);
    e.label = Some("shipped".into());
    e.decided = Some(Decided {
        reason: "attempt_limit".into(),
        warning: Some("stopped by \"after 3 tries\"".into()),
        detail: Some("3 tries".into()),
        blocked: false,
    });
    let (p, warning) = stopped(&e, Some("ignored"), &Cursor::default(), None, None);
    assert_eq!(warning.as_deref(), Some("stopped by \"after 3 tries\""));
    assert_eq!(
        p,
        json!({"exit_reason": "marker", "iterations_completed": 3, "stop_reason": "end_turn",
               "exit_label": "shipped", "reason": "attempt_limit",
               "warning": "stopped by \"after 3 tries\"", "detail": "3 tries"})
    );
}

#[test]
fn stopped_names_the_error_of_a_failure_or_timeout() {
    let mut failed = ending(ExitReason::PhaseFailure);
    failed.exit_code = Some(2);
    let (p, w) = stopped(
        &failed,
        Some("phase \"x\" exited"),
        &Cursor::default(),
        None,
        None,
    );
    assert_eq!(
        (&p["error"], &p["exit_code"], w),
        (&json!("phase \"x\" exited"), &json!(2), None)
    );
    // No failure message of this invocation (a resumed run): the log's last phase end.
    let mut cursor = Cursor::default();
    cursor.last = Some((at(PhaseKind::Loop, 0, 1), end("signal", None)));
    let (p, _) = stopped(&failed, None, &cursor, None, None);
    assert_eq!(p["error"], "phase ended with signal");
    let (p, _) = stopped(&failed, None, &Cursor::default(), None, None);
    assert!(p.get("error").is_none());
    let (p, _) = stopped(
        &ending(ExitReason::Timeout),
        None,
        &cursor,
        Some(1500),
        None,
    );
    assert_eq!(p["error"], "timed out after 1500 ms (--timeout)");
}

#[test]
fn a_cancelled_run_records_the_reason_loopctl_stop_left() {
    let cancelled = ending(ExitReason::Cancelled);
    let c = Cursor::default();
    let (p, _) = stopped(&cancelled, None, &c, None, Some("  deploy window closed\n"));
    assert_eq!(p["detail"], "deploy window closed");
    for blank in [None, Some(" \n")] {
        assert!(
            stopped(&cancelled, None, &c, None, blank)
                .0
                .get("detail")
                .is_none()
        );
    }
    // Only a cancelled run reads it.
    let (p, _) = stopped(&ending(ExitReason::Marker), None, &c, None, Some("why"));
    assert!(p.get("detail").is_none());
}

#[test]
fn only_a_run_the_log_says_is_over_is_refused() {
    let mut s = RunState::new("fix-20260101-000000");
    assert_eq!(over(&s), None);
    s.status = Status::Failed;
    s.stop.reason = "phase_error".into();
    s.last_error = Some("phase \"t\" exited with code 2".into());
    assert_eq!(
        over(&s).as_deref(),
        Some(
            "run fix-20260101-000000 is over, so there is nothing to resume: it failed \
             (phase_error): phase \"t\" exited with code 2. Start a new run with `loopctl run`."
        )
    );
    s.status = Status::Completed;
    s.stop.reason = "threshold_reached".into();
    let why = over(&s).expect("a completed run is over");
    assert!(
        why.contains(": it is completed (threshold_reached)."),
        "{why}"
    );
}

#[test]
fn resume_takes_the_loop_and_options_from_run_started_only() {
    let opts = RunOptions {
        max_retries: 3,
        ..RunOptions::new("/work".into())
    };
    let cfg =
        loopctl_core::rules::loop_file::parse(r#"{"loop": [{"name": "t", "run": "true"}]}"#, None)
            .expect("loop file")
            .file;
    let started = json!({"config": cfg, "options": opts});
    let (c, o) = stored_config("r", Some(started)).expect("our run");
    assert_eq!((c.loop_.len(), c.loop_[0].name.as_str()), (1, "t"));
    assert_eq!(o, opts);
    let refusal = "run r was not started by `loopctl run` (its log has no loop configuration), \
                   so loopctl cannot continue it";
    for foreign in [None, Some(json!({"options": opts})), Some(json!([1, 2]))] {
        assert_eq!(stored_config("r", foreign).err().as_deref(), Some(refusal));
    }
}
