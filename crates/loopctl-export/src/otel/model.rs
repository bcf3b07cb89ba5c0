//! The span model: a run's log folded into OTLP-shaped spans, with no OpenTelemetry crate in
//! sight. Pure: events in, spans out; a trace is a projection of the log like `run.json`, so
//! replaying a log gives the same spans, and the runner's live export (`live`) folds the
//! same events through the same code.
//!
//! Shape (docs/otel.md): a run is one trace. Each session of the run (its start, then each
//! `run_resumed`) is a root span `RUN <loop>`; a resumed session links to the previous one.
//! Each phase attempt (native, Avenor) or derived step (aif-loop) is a child of the session
//! it ran in. Iterations are an attribute, not a span level: an iteration's end is only known
//! when the next one begins (a live span would lag a whole iteration), pre and post phases
//! belong to none, and a flat tree keeps every phase one hop from its run. Evaluations,
//! retries, decisions (transitions), escalations and quality-phase switches are events of the
//! session's root; a phase's winning marker is an event of its span.

use std::collections::BTreeMap;

use loopctl_core::fold::run_state::{RunState, Status, apply_mut_lean};
use loopctl_core::fold::trace::Trace;
use loopctl_core::fold::{Damage, Line, Projection, Split};
use loopctl_core::{Dialect, Event, Kind};
use rustc_hash::FxHashMap;

use super::ids::{Role, SpanId, TraceId, span_id, trace_id};

/// Attribute names: the OTel CI/CD and GenAI semantic conventions, written here (the
/// crate's `GEN_AI_*` constants are deprecated), and loopctl's own.
pub mod attr {
    pub const PIPELINE_NAME: &str = "cicd.pipeline.name";
    pub const PIPELINE_RUN_ID: &str = "cicd.pipeline.run.id";
    pub const PIPELINE_RESULT: &str = "cicd.pipeline.result";
    pub const TASK_NAME: &str = "cicd.pipeline.task.name";
    pub const TASK_RUN_ID: &str = "cicd.pipeline.task.run.id";
    pub const TASK_RUN_RESULT: &str = "cicd.pipeline.task.run.result";
    pub const ERROR_TYPE: &str = "error.type";
    pub const EXIT_CODE: &str = "process.exit.code";
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    pub const GEN_AI_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const GEN_AI_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    pub const INVOKE_AGENT: &str = "invoke_agent";
    pub const DIALECT: &str = "loopctl.dialect";
    pub const SESSION: &str = "loopctl.session";
    pub const STOP_REASON: &str = "loopctl.stop.reason";
    pub const SCORE: &str = "loopctl.score";
    pub const ITERATIONS: &str = "loopctl.iterations";
    pub const ITERATION: &str = "loopctl.iteration";
    pub const ATTEMPT: &str = "loopctl.attempt";
    pub const PHASE_KIND: &str = "loopctl.phase.kind";
    pub const QUALITY_PHASE: &str = "loopctl.quality_phase";
    pub const PHASE_STOP_REASON: &str = "loopctl.phase.stop_reason";
    pub const MARKER: &str = "loopctl.marker";
    pub const VERDICT: &str = "loopctl.verdict";
    pub const LINK_KIND: &str = "loopctl.link";
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

pub type Attrs = Vec<(&'static str, AttrValue)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A session's root: the run as a `cicd.pipeline.run.server` span.
    Server,
    Internal,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpanStatus {
    Unset,
    Ok,
    Error(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: &'static str,
    pub time_ms: i64,
    pub attributes: Attrs,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpanLink {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub attributes: Attrs,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    pub name: String,
    pub kind: SpanKind,
    /// Milliseconds since the Unix epoch, as the log has them.
    pub start_ms: i64,
    pub end_ms: i64,
    pub attributes: Attrs,
    pub events: Vec<SpanEvent>,
    pub links: Vec<SpanLink>,
    pub status: SpanStatus,
}

/// Where a session's share of the trace's lists begins.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Marks {
    evaluations: usize,
    retries: usize,
    escalations: usize,
    transitions: usize,
    switches: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct Session {
    key: u64,
    start_ms: Option<i64>,
    last_ms: Option<i64>,
    from: Marks,
    /// How the session ended (status, canonical reason, stop time), when it did.
    stop: Option<(Status, String, Option<i64>)>,
}

/// What a span needs of an attempt beyond the trace's `Attempt`.
#[derive(Debug, Clone, Default, PartialEq)]
struct Extra {
    key: u64,
    session: usize,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    agent: bool,
}

/// One run's log folded into spans: `apply` each event of the run in file order.
#[derive(Debug, Clone)]
pub struct RunSpans {
    run_id: String,
    /// The name of its log (its folder, or a log file's stem): the loop of a bare id.
    log: String,
    dialect: Option<Dialect>,
    state: RunState,
    trace: Trace,
    ordinal: u64,
    sessions: Vec<Session>,
    /// Parallel to `trace.attempts` and `trace.steps`.
    attempts: Vec<Extra>,
    steps: Vec<Extra>,
    /// Explicit attempts not yet finished (indexes into `trace.attempts`).
    open: Vec<usize>,
    /// Attempts finished by the last event applied.
    just_finished: Vec<usize>,
}

fn ms(ts: Option<loopctl_core::Ts>) -> Option<i64> {
    ts.map(|t| t.millis())
}

fn str_attr(k: &'static str, v: impl Into<String>) -> (&'static str, AttrValue) {
    (k, AttrValue::Str(v.into()))
}

fn int_attr(k: &'static str, v: u64) -> (&'static str, AttrValue) {
    (k, AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX)))
}

/// `cicd.pipeline.result` of a run that stopped: success, or what went wrong.
fn run_result(status: Status, reason: &str) -> &'static str {
    match (status, reason) {
        (Status::Completed, _) => "success",
        (_, "timeout") => "timeout",
        (_, "user_stop" | "cancelled") => "cancellation",
        (Status::Failed, "phase_error") => "failure",
        (Status::Failed, _) => "error",
        _ => "failure",
    }
}

impl RunSpans {
    /// Run `run_id` of the log named `log`.
    pub fn new(run_id: &str, log: &str) -> RunSpans {
        RunSpans {
            run_id: run_id.to_string(),
            log: log.to_string(),
            dialect: None,
            state: RunState::new(run_id),
            trace: Trace::new(),
            ordinal: 0,
            sessions: Vec::new(),
            attempts: Vec::new(),
            steps: Vec::new(),
            open: Vec::new(),
            just_finished: Vec::new(),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    fn marks(&self) -> Marks {
        let t = &self.trace;
        Marks {
            evaluations: t.evaluations.len(),
            retries: t.retries.len(),
            escalations: t.escalations.len(),
            transitions: t.transitions.len(),
            switches: t.switches.len(),
        }
    }

    /// Folds one event of this run.
    pub fn apply(&mut self, ev: &Event<'_>) {
        self.just_finished.clear();
        let duplicates = self.trace.duplicates;
        let (attempts, steps) = (self.trace.attempts.len(), self.trace.steps.len());
        let fresh = self.sessions.is_empty() || ev.kind == Kind::RunResumed;
        let from = self.marks();
        self.trace.apply(ev);
        if self.trace.duplicates != duplicates {
            return;
        }
        apply_mut_lean(&mut self.state, ev);
        self.ordinal += 1;
        self.dialect.get_or_insert(ev.dialect);
        let key = ev.seq.unwrap_or(self.ordinal);
        let at = ms(ev.ts);
        if fresh {
            self.sessions.push(Session {
                key,
                start_ms: at,
                last_ms: at,
                from,
                stop: None,
            });
        }
        let session = self.sessions.len() - 1;
        let s = &mut self.sessions[session];
        if let Some(t) = at {
            s.start_ms.get_or_insert(t);
            s.last_ms = Some(s.last_ms.map_or(t, |l| l.max(t)));
        }
        if matches!(ev.kind, Kind::Stopped | Kind::Failed | Kind::SessionEnded)
            && self.trace.stop.is_some()
        {
            s.stop = Some((self.state.status, self.state.stop.reason.clone(), at));
        }
        let avenor = ev.dialect == Dialect::Avenor;
        let extra = || Extra {
            key,
            session,
            agent: avenor,
            ..Extra::default()
        };
        for i in attempts..self.trace.attempts.len() {
            self.attempts.push(extra());
            self.open.push(i);
        }
        for _ in steps..self.trace.steps.len() {
            self.steps.push(extra());
        }
        let trace = &self.trace;
        let (done, open): (Vec<usize>, Vec<usize>) =
            self.open.iter().partition(|&&i| trace.attempts[i].finished);
        self.open = open;
        for &i in &done {
            if ev.kind == Kind::PhaseFinished {
                // Token counts outside a `usage` object (`tokens_in`, Avenor's fields); the
                // usage object itself is the trace's (`Attempt::usage`).
                let x = &mut self.attempts[i];
                (x.input_tokens, x.output_tokens) = (ev.facts.tokens_in, ev.facts.tokens_out);
            }
        }
        self.just_finished = done;
    }

    fn explicit(&self) -> bool {
        !self.trace.attempts.is_empty()
    }

    fn session_root(&self, i: usize) -> SpanId {
        span_id(&self.run_id, Role::Session, self.sessions[i].key)
    }

    /// The loop, as the metrics' `loop` label and the analytics name it.
    fn loop_name(&self) -> &str {
        self.state.loop_label(&self.log)
    }

    /// The session's time span: its first event to its stop, else its last event.
    fn session_times(&self, i: usize) -> Option<(i64, i64)> {
        let s = &self.sessions[i];
        let start = s.start_ms?;
        let end = s.stop.as_ref().and_then(|x| x.2).or(s.last_ms)?;
        Some((start, end.max(start)))
    }

    /// Spans of the attempts the last `apply` finished (what a live export sends then).
    pub fn finished_phases(&self) -> Vec<Span> {
        self.just_finished
            .iter()
            .filter_map(|&i| self.phase_span(i, true))
            .collect()
    }

    /// Every span of the run so far: each session's root and each phase's.
    pub fn spans(&self) -> Vec<Span> {
        let mut out: Vec<Span> = (0..self.sessions.len())
            .filter_map(|i| self.root_span(i))
            .collect();
        let n = if self.explicit() {
            self.trace.attempts.len()
        } else {
            self.trace.steps.len()
        };
        out.extend((0..n).filter_map(|i| self.phase_span(i, self.explicit())));
        out
    }

    /// The index of the session in progress (the one a live run is in).
    pub fn current_session(&self) -> Option<usize> {
        self.sessions.len().checked_sub(1)
    }

    /// Span ids of what ended before session `i` began: earlier sessions' roots and their
    /// finished phases (a resumed live run does not send them again).
    pub fn ended_before(&self, i: usize) -> Vec<SpanId> {
        let mut out: Vec<SpanId> = (0..i.min(self.sessions.len()))
            .map(|s| self.session_root(s))
            .collect();
        for (a, x) in self.trace.attempts.iter().zip(&self.attempts) {
            if a.finished && x.session < i {
                out.push(span_id(&self.run_id, Role::Phase, x.key));
            }
        }
        out
    }

    fn root_span(&self, i: usize) -> Option<Span> {
        let (start_ms, end_ms) = self.session_times(i)?;
        let s = &self.sessions[i];
        let next = self.sessions.get(i + 1).map(|n| n.from);
        let range = |from: usize, to: Option<usize>, len: usize| from..to.unwrap_or(len).min(len);
        let t = &self.trace;
        let mut attributes = vec![
            str_attr(attr::PIPELINE_NAME, self.loop_name()),
            str_attr(attr::PIPELINE_RUN_ID, &self.run_id),
            int_attr(attr::SESSION, i as u64),
        ];
        if let Some(d) = self.dialect {
            attributes.push(str_attr(attr::DIALECT, d.name()));
        }
        let mut status = SpanStatus::Unset;
        if let Some((st, reason, _)) = &s.stop {
            let result = run_result(*st, reason);
            attributes.push(str_attr(attr::PIPELINE_RESULT, result));
            attributes.push(str_attr(attr::STOP_REASON, reason));
            attributes.push(int_attr(attr::ITERATIONS, self.state.iteration));
            // As `status` shows it: a run that was never scored has no score, not 0.
            if let Some(score) = self.state.score() {
                attributes.push((attr::SCORE, AttrValue::Float(score)));
            }
            if result == "success" {
                status = SpanStatus::Ok;
            } else {
                attributes.push(str_attr(attr::ERROR_TYPE, result));
                let detail = self.state.stop.detail.as_deref().unwrap_or("");
                status = SpanStatus::Error(
                    format!("run ended: {reason} {detail}")
                        .trim_end()
                        .to_string(),
                );
            }
        }
        let when = |ts: Option<loopctl_core::Ts>| ms(ts).unwrap_or(start_ms);
        let slice = |from: usize, to: fn(&Marks) -> usize, len: usize| {
            range(from, next.as_ref().map(to), len)
        };
        let mut events = Vec::new();
        let f = &s.from;
        for e in &t.evaluations[slice(f.evaluations, |m| m.evaluations, t.evaluations.len())] {
            events.push(records::evaluation(e, when));
        }
        for r in &t.retries[slice(f.retries, |m| m.retries, t.retries.len())] {
            events.push(records::retry(r, when));
        }
        for d in &t.transitions[slice(f.transitions, |m| m.transitions, t.transitions.len())] {
            events.push(records::decision(d, when));
        }
        for e in &t.escalations[slice(f.escalations, |m| m.escalations, t.escalations.len())] {
            events.push(records::escalation(e, when));
        }
        for w in &t.switches[slice(f.switches, |m| m.switches, t.switches.len())] {
            events.push(records::switch(w, when));
        }
        // One order whatever the lists: by time, then name (stable).
        events.sort_by(|a, b| a.time_ms.cmp(&b.time_ms).then(a.name.cmp(b.name)));
        let links = match i.checked_sub(1) {
            Some(prev) => vec![SpanLink {
                trace_id: trace_id(&self.run_id),
                span_id: self.session_root(prev),
                attributes: vec![str_attr(attr::LINK_KIND, "resumed_from")],
            }],
            None => Vec::new(),
        };
        Some(Span {
            trace_id: trace_id(&self.run_id),
            span_id: self.session_root(i),
            parent: None,
            name: format!("RUN {}", self.loop_name()),
            kind: SpanKind::Server,
            start_ms,
            end_ms,
            attributes,
            events,
            links,
            status,
        })
    }

    fn phase_span(&self, i: usize, explicit: bool) -> Option<Span> {
        let (a, x) = if explicit {
            (self.trace.attempts.get(i)?, self.attempts.get(i)?)
        } else {
            (self.trace.steps.get(i)?, self.steps.get(i)?)
        };
        let p = records::phase(a);
        let (s_start, s_end) = self.session_times(x.session)?;
        // A phase whose start no event gave (Avenor's `phase.end` alone) is a point at its
        // end: no duration is made up from the session's start.
        let start_ms = ms(p.started).or(ms(p.ended)).unwrap_or(s_start);
        let end_ms = ms(p.ended).unwrap_or(s_end).max(start_ms);
        let mut attributes = vec![
            str_attr(attr::PIPELINE_NAME, self.loop_name()),
            str_attr(attr::PIPELINE_RUN_ID, &self.run_id),
            str_attr(attr::TASK_NAME, p.name),
            str_attr(attr::TASK_RUN_ID, format!("{}/{}", self.run_id, x.key)),
        ];
        attributes.extend(p.attributes);
        let u = p.usage;
        let input = u.and_then(|u| u.input_tokens).or(x.input_tokens);
        let output = u.and_then(|u| u.output_tokens).or(x.output_tokens);
        let model = u.and_then(|u| u.model.as_deref());
        if x.agent || input.is_some() || output.is_some() || model.is_some() {
            attributes.push(str_attr(attr::GEN_AI_OPERATION_NAME, attr::INVOKE_AGENT));
            attributes.push(str_attr(attr::GEN_AI_AGENT_NAME, p.name));
            if let Some(m) = model {
                attributes.push(str_attr(attr::GEN_AI_REQUEST_MODEL, m));
            }
            if let Some(n) = input {
                attributes.push(int_attr(attr::GEN_AI_INPUT_TOKENS, n));
            }
            if let Some(n) = output {
                attributes.push(int_attr(attr::GEN_AI_OUTPUT_TOKENS, n));
            }
        }
        let mut status = SpanStatus::Unset;
        if let Some(result) = p.result {
            attributes.push(str_attr(attr::TASK_RUN_RESULT, result));
            if result == "success" {
                status = SpanStatus::Ok;
            } else {
                attributes.push(str_attr(attr::ERROR_TYPE, result));
                status = SpanStatus::Error(p.error_text.unwrap_or_default());
            }
        }
        let events = p
            .marker
            .iter()
            .map(|m| SpanEvent {
                name: "marker",
                time_ms: end_ms,
                attributes: vec![str_attr(attr::MARKER, *m)],
            })
            .collect();
        Some(Span {
            trace_id: trace_id(&self.run_id),
            span_id: span_id(&self.run_id, Role::Phase, x.key),
            parent: Some(self.session_root(x.session)),
            name: p.name.to_string(),
            kind: SpanKind::Internal,
            start_ms,
            end_ms,
            attributes,
            events,
            links: Vec::new(),
            status,
        })
    }
}

/// Every run of a log (or of several), folded into spans: a projection for the store's fold
/// driver, split by run like `Traces`.
#[derive(Debug, Clone, Default)]
pub struct OtelRuns {
    default_run: String,
    log: String,
    runs: FxHashMap<String, RunSpans>,
    /// Lines that are no event, for the caller to report (they are skipped).
    damaged: Vec<(Line, Damage)>,
}

impl OtelRuns {
    /// The runs of the log named `log`; a line naming no run is run `default_run`'s.
    pub fn new(default_run: &str, log: &str) -> OtelRuns {
        OtelRuns {
            default_run: default_run.to_string(),
            log: log.to_string(),
            runs: FxHashMap::default(),
            damaged: Vec::new(),
        }
    }

    /// The damaged lines met, in file order.
    pub fn damaged(&self) -> &[(Line, Damage)] {
        &self.damaged
    }

    /// Every span of every run, runs in id order.
    pub fn spans(&self) -> Vec<Span> {
        let mut ids: Vec<&String> = self.runs.keys().collect();
        ids.sort();
        ids.into_iter()
            .flat_map(|id| self.runs[id].spans())
            .collect()
    }

    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Runs whose log gives no timestamp at all: no span can be placed in time, so none is
    /// made (an Avenor session stream, say).
    pub fn untimed(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .runs
            .values()
            .filter(|r| r.sessions.iter().all(|s| s.start_ms.is_none()))
            .map(RunSpans::run_id)
            .collect();
        v.sort();
        v
    }

    pub fn apply(&mut self, ev: &Event<'_>) {
        let key = ev.run_id.as_deref().unwrap_or(&self.default_run);
        if let Some(r) = self.runs.get_mut(key) {
            return r.apply(ev);
        }
        let mut r = RunSpans::new(key, &self.log);
        r.apply(ev);
        self.runs.insert(key.to_string(), r);
    }

    /// The runs by id.
    pub fn into_runs(self) -> BTreeMap<String, RunSpans> {
        self.runs.into_iter().collect()
    }
}

impl Projection for OtelRuns {
    fn event(&mut self, _line: Line, ev: &Event<'_>) {
        self.apply(ev);
    }
    fn damaged(&mut self, line: Line, damage: &Damage) {
        self.damaged.push((line, damage.clone()));
    }
}

impl Split for OtelRuns {
    fn fork(&self) -> Self {
        OtelRuns::new(&self.default_run, &self.log)
    }
    fn join(&mut self, other: Self) {
        self.runs.extend(other.runs);
        self.damaged.extend(other.damaged);
        self.damaged.sort_by_key(|(l, _)| l.pos.offset);
    }
}

mod records;
#[cfg(test)]
mod tests;
