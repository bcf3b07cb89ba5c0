use loopctl_core::fold::fold_bytes;

use super::*;

fn spans_of(log: &str) -> Vec<Span> {
    let mut p = OtelRuns::new("default", "default");
    fold_bytes(&mut p, log.as_bytes(), 1 << 20);
    p.into_runs().values().flat_map(RunSpans::spans).collect()
}

fn attr<'a>(s: &'a Span, k: &str) -> Option<&'a AttrValue> {
    s.attributes.iter().find(|(n, _)| *n == k).map(|(_, v)| v)
}

fn text(s: &Span, k: &str) -> Option<String> {
    match attr(s, k)? {
        AttrValue::Str(t) => Some(t.clone()),
        _ => None,
    }
}

const RESUMED: &str = r#"{"v":1,"seq":1,"ts":"2026-03-01T09:00:00.000Z","run_id":"demo-20260301-090000","event":"run_started","iteration":0,"payload":{"max_iterations":3}}
{"v":1,"seq":2,"ts":"2026-03-01T09:00:01.000Z","run_id":"demo-20260301-090000","event":"phase_started","iteration":1,"step":"work","payload":{"kind":"loop","index":0,"attempt":1}}
{"v":1,"seq":3,"ts":"2026-03-01T09:00:05.000Z","run_id":"demo-20260301-090000","event":"phase_finished","iteration":1,"step":"work","payload":{"kind":"loop","index":0,"attempt":1,"exit_code":1,"stop_reason":"error","error":"boom","usage":{"input_tokens":10,"output_tokens":4,"model":"m1"}}}
{"v":1,"seq":4,"ts":"2026-03-01T09:00:06.000Z","run_id":"demo-20260301-090000","event":"phase_retry","iteration":1,"step":"work","payload":{"attempt":1,"next_attempt":2,"delay_ms":1000}}
{"v":1,"seq":5,"ts":"2026-03-01T09:00:07.000Z","run_id":"demo-20260301-090000","event":"stopped","iteration":1,"payload":{"reason":"user_stop"}}
{"v":1,"seq":6,"ts":"2026-03-01T10:00:00.000Z","run_id":"demo-20260301-090000","event":"run_resumed","iteration":1,"payload":{"from_seq":5}}
{"v":1,"seq":7,"ts":"2026-03-01T10:00:01.000Z","run_id":"demo-20260301-090000","event":"phase_started","iteration":1,"step":"work","payload":{"kind":"loop","index":0,"attempt":2}}
{"v":1,"seq":8,"ts":"2026-03-01T10:00:09.500Z","run_id":"demo-20260301-090000","event":"phase_finished","iteration":1,"step":"work","payload":{"kind":"loop","index":0,"attempt":2,"exit_code":0,"stop_reason":"end_turn","marker":{"directive":"exit","label":"done"}}}
{"v":1,"seq":9,"ts":"2026-03-01T10:00:10.000Z","run_id":"demo-20260301-090000","event":"evaluation_done","iteration":1,"step":"work","payload":{"score":0.9,"threshold":0.8,"passed":true}}
{"v":1,"seq":10,"ts":"2026-03-01T10:00:11.000Z","run_id":"demo-20260301-090000","event":"stopped","iteration":1,"payload":{"reason":"threshold_reached"}}
"#;

#[test]
fn sessions_are_roots_phases_children_with_original_times() {
    let spans = spans_of(RESUMED);
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let roots: Vec<&Span> = spans.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 2);
    assert!(roots.iter().all(|r| r.name == "RUN demo"));
    assert!(
        spans
            .iter()
            .all(|s| s.trace_id == trace_id("demo-20260301-090000"))
    );
    let (first, second) = (roots[0], roots[1]);
    assert_eq!(first.start_ms, 1772355600000);
    assert_eq!(first.end_ms, 1772355607000);
    assert_eq!(
        text(first, attr::PIPELINE_RESULT).as_deref(),
        Some("cancellation")
    );
    assert_eq!(
        text(first, attr::ERROR_TYPE).as_deref(),
        Some("cancellation")
    );
    assert!(matches!(first.status, SpanStatus::Error(_)));
    assert_eq!(
        first.events.iter().map(|e| e.name).collect::<Vec<_>>(),
        ["retry"]
    );
    // The resumed session links to the earlier one.
    assert_eq!(second.links.len(), 1);
    assert_eq!(second.links[0].span_id, first.span_id);
    assert_eq!(second.status, SpanStatus::Ok);
    assert_eq!(
        text(second, attr::PIPELINE_RESULT).as_deref(),
        Some("success")
    );
    assert_eq!(
        second.events.iter().map(|e| e.name).collect::<Vec<_>>(),
        ["evaluation"]
    );

    let phases: Vec<&Span> = spans.iter().filter(|s| s.parent.is_some()).collect();
    let (failed, ok) = (phases[0], phases[1]);
    assert_eq!(failed.parent, Some(first.span_id));
    assert_eq!(ok.parent, Some(second.span_id));
    assert_eq!(
        failed.span_id,
        span_id("demo-20260301-090000", Role::Phase, 2)
    );
    assert_eq!(
        (failed.start_ms, failed.end_ms),
        (1772355601000, 1772355605000)
    );
    assert_eq!(
        text(failed, attr::TASK_RUN_RESULT).as_deref(),
        Some("failure")
    );
    assert_eq!(failed.status, SpanStatus::Error("boom".into()));
    assert_eq!(
        attr(failed, attr::GEN_AI_INPUT_TOKENS),
        Some(&AttrValue::Int(10))
    );
    assert_eq!(
        attr(failed, attr::GEN_AI_OUTPUT_TOKENS),
        Some(&AttrValue::Int(4))
    );
    assert_eq!(
        text(failed, attr::GEN_AI_OPERATION_NAME).as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(ok.status, SpanStatus::Ok);
    assert_eq!(ok.events[0].name, "marker");
    assert_eq!(ok.end_ms - ok.start_ms, 8500);
}

#[test]
fn same_log_same_spans_and_live_sees_each_phase_when_it_ends() {
    assert_eq!(spans_of(RESUMED), spans_of(RESUMED));
    let mut run = RunSpans::new("demo-20260301-090000", "demo");
    let mut live = Vec::new();
    for line in RESUMED.lines() {
        let ev = loopctl_core::parse_line(line).expect("event");
        run.apply(&ev);
        live.extend(run.finished_phases());
    }
    let all = run.spans();
    let phases: Vec<Span> = all.into_iter().filter(|s| s.parent.is_some()).collect();
    assert_eq!(live, phases);
    assert_eq!(run.ended_before(1).len(), 2, "the first root and its phase");
}

#[test]
fn running_phase_and_run_have_no_result() {
    let log: String = RESUMED.lines().take(2).map(|l| format!("{l}\n")).collect();
    let spans = spans_of(&log);
    assert_eq!(spans.len(), 2);
    assert!(spans.iter().all(|s| s.status == SpanStatus::Unset));
    assert!(spans.iter().all(|s| attr(s, attr::ERROR_TYPE).is_none()));
}
