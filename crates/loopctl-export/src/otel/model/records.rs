//! The one place that reads the core trace's records (`fold::trace`): each becomes a span
//! event, and a phase attempt a `Phase` view. When the trace's record shapes change, this
//! file is what follows.

use loopctl_core::Ts;
use loopctl_core::decode::agent_usage::AgentUsage;
use loopctl_core::fold::trace::{Attempt, Escalation, Evaluation, Retry, Switch, Transition};

use super::{AttrValue, Attrs, SpanEvent, attr, int_attr, str_attr};

fn iteration(v: Option<u64>) -> Attrs {
    v.map(|n| int_attr(attr::ITERATION, n))
        .into_iter()
        .collect()
}

fn push_str(a: &mut Attrs, k: &'static str, v: &Option<String>) {
    if let Some(v) = v {
        a.push(str_attr(k, v));
    }
}

fn push_int(a: &mut Attrs, k: &'static str, v: Option<u64>) {
    if let Some(v) = v {
        a.push(int_attr(k, v));
    }
}

pub(super) fn evaluation(e: &Evaluation, when: impl Fn(Option<Ts>) -> i64) -> SpanEvent {
    let mut a: Attrs = vec![int_attr(attr::ITERATION, e.iteration)];
    a.push(str_attr(attr::QUALITY_PHASE, &*e.quality_phase));
    for (k, v) in [
        ("loopctl.evaluation.score", e.score),
        ("loopctl.evaluation.threshold", e.threshold),
    ] {
        if let Some(v) = v {
            a.push((k, AttrValue::Float(v)));
        }
    }
    if let Some(x) = e.passed {
        a.push(("loopctl.evaluation.passed", AttrValue::Bool(x)));
    }
    push_str(&mut a, "loopctl.evaluation.step", &e.at.phase);
    push_str(&mut a, "loopctl.evaluation.source", &e.source);
    push_str(&mut a, "loopctl.decision", &e.decision);
    a.push(int_attr("loopctl.evaluation.blocking", e.blocking()));
    SpanEvent {
        name: "evaluation",
        time_ms: when(e.at.ts),
        attributes: a,
    }
}

pub(super) fn retry(r: &Retry, when: impl Fn(Option<Ts>) -> i64) -> SpanEvent {
    let mut a = iteration(r.at.iteration);
    push_str(&mut a, attr::TASK_NAME, &r.at.phase);
    push_int(&mut a, attr::ATTEMPT, r.attempt);
    push_int(&mut a, "loopctl.retry.next_attempt", r.next_attempt);
    push_int(&mut a, "loopctl.retry.delay_ms", r.delay_ms);
    if let Some(x) = r.exit_code {
        a.push((attr::EXIT_CODE, AttrValue::Int(x)));
    }
    SpanEvent {
        name: "retry",
        time_ms: when(r.at.ts),
        attributes: a,
    }
}

pub(super) fn decision(d: &Transition, when: impl Fn(Option<Ts>) -> i64) -> SpanEvent {
    let mut a = iteration(d.at.iteration);
    push_str(&mut a, "loopctl.decision.from", &d.from);
    push_str(&mut a, "loopctl.decision.source", &d.source);
    push_str(&mut a, "loopctl.decision.rule", &d.rule);
    push_str(&mut a, "loopctl.decision.condition", &d.condition);
    push_str(&mut a, "loopctl.decision.end", &d.end_reason);
    if !d.goto.is_empty() {
        a.push(str_attr("loopctl.decision.goto", d.goto.join(",")));
    }
    SpanEvent {
        name: "decision",
        time_ms: when(d.at.ts),
        attributes: a,
    }
}

pub(super) fn escalation(e: &Escalation, when: impl Fn(Option<Ts>) -> i64) -> SpanEvent {
    let mut a = iteration(e.at.iteration);
    push_str(&mut a, attr::TASK_NAME, &e.at.phase);
    push_str(&mut a, "loopctl.escalation.question", &e.question);
    SpanEvent {
        name: "escalation",
        time_ms: when(e.at.ts),
        attributes: a,
    }
}

pub(super) fn switch(w: &Switch, when: impl Fn(Option<Ts>) -> i64) -> SpanEvent {
    let mut a = iteration(w.at.iteration);
    push_str(&mut a, "loopctl.switch.from", &w.from_phase);
    push_str(&mut a, "loopctl.switch.to", &w.to_phase);
    SpanEvent {
        name: "quality_phase_switch",
        time_ms: when(w.at.ts),
        attributes: a,
    }
}

/// What a phase span needs of an attempt.
pub(super) struct Phase<'a> {
    pub name: &'a str,
    pub started: Option<Ts>,
    pub ended: Option<Ts>,
    /// `cicd.pipeline.task.run.result`, once the attempt has ended.
    pub result: Option<&'static str>,
    pub error_text: Option<String>,
    pub marker: Option<&'a str>,
    /// The agent's usage `phase_finished` reported (the usage contract), when it did.
    pub usage: Option<&'a AgentUsage>,
    /// Its own attributes (iteration, attempt, kind, exit code, stop reason, verdict).
    pub attributes: Attrs,
}

/// `cicd.pipeline.task.run.result` of a finished attempt.
fn task_result(a: &Attempt) -> &'static str {
    let x = a.explicit();
    match x.stop_reason.as_deref() {
        _ if !a.failed() => "success",
        Some("timeout") => "timeout",
        Some("cancelled") => "cancellation",
        // The runner could not start it (no exit code, or the shell's 127): not the phase's.
        Some("error") if x.exit_code.is_none_or(|c| c == 127) => "error",
        _ => "failure",
    }
}

pub(super) fn phase(a: &Attempt) -> Phase<'_> {
    let x = a.explicit();
    let mut attributes = vec![int_attr(attr::ATTEMPT, a.attempt)];
    push_int(&mut attributes, attr::ITERATION, a.iteration);
    push_str(&mut attributes, attr::PHASE_KIND, &x.kind);
    if let Some(q) = &a.phase {
        attributes.push(str_attr(attr::QUALITY_PHASE, &**q));
    }
    if let Some(c) = x.exit_code {
        attributes.push((attr::EXIT_CODE, AttrValue::Int(c)));
    }
    push_str(&mut attributes, attr::PHASE_STOP_REASON, &x.stop_reason);
    push_str(&mut attributes, attr::VERDICT, &x.verdict);
    Phase {
        name: &a.name,
        started: a.started,
        ended: a.ended,
        result: a.finished.then(|| task_result(a)),
        error_text: a.error_text(),
        marker: x.marker.as_deref(),
        usage: x.usage.as_ref(),
        attributes,
    }
}
