//! One event model for three dialects: loopctl's native log, aif-loop's `history.jsonl` and
//! Avenor's `--on-event` NDJSON. `docs/events.md` is the reference for every type and payload.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::json::{JsonError, Scanner};
use crate::ts::Ts;

/// Version written in the `v` field of native events.
pub const NATIVE_VERSION: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    Native,
    AifLoop,
    Avenor,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Native => "native",
            Dialect::AifLoop => "aif-loop",
            Dialect::Avenor => "avenor",
        }
    }
}

macro_rules! kinds {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// Event types loopctl understands; anything else is `Other` and kept verbatim.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind { $($variant,)* Other }

        impl Kind {
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// Native (and, where it has one, aif-loop) name.
            pub fn name(self) -> &'static str {
                match self { $(Kind::$variant => $name,)* Kind::Other => "other" }
            }

            pub fn from_name(s: &str) -> Kind {
                match s { $($name => Kind::$variant,)* _ => Kind::Other }
            }
        }
    };
}

kinds! {
    RunStarted => "run_started",
    RunResumed => "run_resumed",
    PlanCreated => "plan_created",
    ArtifactCreated => "artifact_created",
    ChecksPrepared => "checks_prepared",
    EvaluationDone => "evaluation_done",
    CritiqueDone => "critique_done",
    RefinementDone => "refinement_done",
    PhaseSwitched => "phase_switched",
    IterationAdvanced => "iteration_advanced",
    PhaseStarted => "phase_started",
    PhaseFinished => "phase_finished",
    PhaseRetry => "phase_retry",
    PhaseError => "phase_error",
    Escalated => "escalated",
    Transition => "transition",
    Usage => "usage",
    SessionEnded => "session_ended",
    Stopped => "stopped",
    Failed => "failed",
}

impl Kind {
    /// Loop and phase boundaries, evaluations, retries, errors and stops.
    pub fn is_milestone(self) -> bool {
        !matches!(
            self,
            Kind::PlanCreated
                | Kind::ArtifactCreated
                | Kind::ChecksPrepared
                | Kind::CritiqueDone
                | Kind::RefinementDone
                | Kind::Usage
                | Kind::Other
        )
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Kind::Stopped | Kind::Failed)
    }
}

/// Payload fields the reducer needs on the hot path, pulled out while the line is scanned.
/// Rarer payloads are decoded from `Event::payload` when they are applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub score: Option<f64>,
    pub passed: Option<bool>,
    pub threshold: Option<f64>,
    /// Failed fail-severity rule ids (`failed` or `failed_rules`).
    pub failed: Option<Vec<String>>,
    /// Failed warn-severity rule ids (`warnings` or `warn_rules`).
    pub warnings: Option<Vec<String>>,
    pub fail_count: Option<u64>,
    pub reason: Option<String>,
    pub new_iteration: Option<u64>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
}

impl Facts {
    fn take(&mut self, sc: &mut Scanner<'_>, key: &str) -> Result<(), JsonError> {
        match key {
            "score" => self.score = sc.opt_f64()?,
            "passed" => self.passed = sc.opt_bool()?,
            "threshold" => self.threshold = sc.opt_f64()?,
            "failed" | "failed_rules" => self.failed = sc.opt_string_array()?,
            "warnings" | "warn_rules" => self.warnings = sc.opt_string_array()?,
            "fail_count" => self.fail_count = sc.opt_u64()?,
            "reason" => self.reason = sc.opt_string()?.map(Cow::into_owned),
            "new_iteration" | "to" => self.new_iteration = sc.opt_u64()?,
            "tokens_in" | "input_tokens" => self.tokens_in = sc.opt_u64()?,
            "tokens_out" | "output_tokens" => self.tokens_out = sc.opt_u64()?,
            "usage" if sc.peek() == Some(b'{') => sc.object(|sc, k| self.take(sc, &k))?,
            _ => {
                sc.skip()?;
            }
        }
        Ok(())
    }

    fn from_value(v: &Value) -> Facts {
        let mut text = String::new();
        let mut f = Facts::default();
        if serde_json::to_string(v).map(|s| text = s).is_ok() {
            let mut sc = Scanner::new(&text);
            let _ = sc.object(|sc, k| f.take(sc, &k));
        }
        f
    }
}

/// A normalised event. Borrowed from the line it was parsed from where possible.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    pub dialect: Dialect,
    pub seq: Option<u64>,
    pub ts: Option<Ts>,
    pub run_id: Option<Cow<'a, str>>,
    pub kind: Kind,
    /// The event's name as loopctl writes it: the native name for known kinds, else as written.
    pub name: Cow<'a, str>,
    pub iteration: Option<u64>,
    /// aif-loop's quality phase (`A`, `B`).
    pub phase: Option<Cow<'a, str>>,
    /// The step or phase name within an iteration (aif-loop `step`, Avenor/native phase name).
    pub step: Option<Cow<'a, str>>,
    pub status: Option<Cow<'a, str>>,
    /// The payload object as JSON text.
    pub payload: Option<Cow<'a, str>>,
    pub facts: Facts,
}

impl<'a> Event<'a> {
    pub fn new(kind: Kind) -> Event<'static> {
        Event {
            dialect: Dialect::Native,
            seq: None,
            ts: None,
            run_id: None,
            kind,
            name: Cow::Borrowed(kind.name()),
            iteration: None,
            phase: None,
            step: None,
            status: None,
            payload: None,
            facts: Facts::default(),
        }
    }

    pub fn into_owned(self) -> Event<'static> {
        let own = |c: Option<Cow<'a, str>>| c.map(|c| Cow::Owned(c.into_owned()));
        Event {
            dialect: self.dialect,
            seq: self.seq,
            ts: self.ts,
            run_id: own(self.run_id),
            kind: self.kind,
            name: Cow::Owned(self.name.into_owned()),
            iteration: self.iteration,
            phase: own(self.phase),
            step: own(self.step),
            status: own(self.status),
            payload: own(self.payload),
            facts: self.facts,
        }
    }

    /// Sets the payload (and the facts read from it).
    pub fn with_payload(mut self, payload: &Value) -> Event<'a> {
        self.facts = Facts::from_value(payload);
        self.payload = Some(Cow::Owned(payload.to_string()));
        self
    }

    /// The payload decoded, or `Null` when there is none.
    pub fn payload_value(&self) -> Value {
        self.payload
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null)
    }

    /// The native NDJSON line for this event, without the trailing newline. Keys come in a
    /// fixed order so that the same event always gives the same bytes.
    pub fn to_native_line(&self) -> String {
        let mut out = String::with_capacity(160);
        let mut field = |k: &str, v: &str| {
            out.push(if out.is_empty() { '{' } else { ',' });
            out.push('"');
            out.push_str(k);
            out.push_str("\":");
            out.push_str(v);
        };
        let quoted = |s: &str| Value::String(s.to_string()).to_string();
        field("v", &NATIVE_VERSION.to_string());
        if let Some(seq) = self.seq {
            field("seq", &seq.to_string());
        }
        if let Some(ts) = self.ts {
            field("ts", &quoted(&ts.to_rfc3339()));
        }
        if let Some(r) = &self.run_id {
            field("run_id", &quoted(r));
        }
        field("event", &quoted(&self.name));
        if let Some(i) = self.iteration {
            field("iteration", &i.to_string());
        }
        for (k, v) in [
            ("phase", &self.phase),
            ("step", &self.step),
            ("status", &self.status),
        ] {
            if let Some(v) = v {
                field(k, &quoted(v));
            }
        }
        if self.payload.is_some() {
            field("payload", &self.payload_value().to_string());
        }
        out.push('}');
        out
    }
}

/// Why a line is not an event. The JSON error is part of the message, not also a `source()`
/// (a `{:#}` chain would print it twice).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("not valid JSON: {0}")]
    Json(JsonError),
    #[error("not a JSON object")]
    NotObject,
    #[error("no \"event\" field")]
    NoEvent,
    #[error("{0}")]
    Unreadable(String),
}

impl From<JsonError> for LineError {
    fn from(e: JsonError) -> LineError {
        LineError::Json(e)
    }
}

/// Parses one line (no newline, no BOM, no CR) into an event, detecting its dialect:
/// a `v` field means native; an event name with a dot (`avenor.*`, `session.*`, ...) means
/// Avenor; anything else is aif-loop.
///
/// Most lines take a one-pass fast path (`fast`); the rest, and every damaged line (for the
/// exact error), go through `parse_line_reference`. Both give the same event.
pub fn parse_line(line: &str) -> Result<Event<'_>, LineError> {
    match crate::fast::parse_line_fast(line) {
        Some(ev) => Ok(ev),
        None => parse_line_reference(line),
    }
}

/// The reference parser behind `parse_line`: a closure-driven pull scan that handles every
/// line and names the first error. The fast path must agree with it.
pub fn parse_line_reference(line: &str) -> Result<Event<'_>, LineError> {
    let mut sc = Scanner::new(line);
    if sc.peek() != Some(b'{') {
        sc.skip()?;
        sc.finish()?;
        return Err(LineError::NotObject);
    }
    let mut ev = Event::new(Kind::Other);
    let mut name: Option<Cow<'_, str>> = None;
    // The first string `run_id` (else `session_id`) wins, exactly as in `run_key`, so that a
    // sharded replay sends every line to the shard of the run it is applied to.
    let mut run_id: Option<Cow<'_, str>> = None;
    let mut session: Option<Cow<'_, str>> = None;
    let mut v = None;
    let mut ts_raw: Option<&str> = None;
    sc.object(|sc, key| {
        match &*key {
            "event" => name = sc.opt_string()?,
            "v" => v = Some(sc.opt_u64()?),
            "seq" => ev.seq = sc.opt_u64()?,
            "ts" => ts_raw = Some(sc.skip()?),
            "run_id" if run_id.is_none() => run_id = sc.opt_string()?,
            "session_id" if session.is_none() => session = sc.opt_string()?,
            "iteration" => ev.iteration = sc.opt_u64()?,
            "phase" => ev.phase = sc.opt_string()?,
            "step" => ev.step = sc.opt_string()?,
            "status" => ev.status = sc.opt_string()?,
            "payload" => {
                let start = sc.pos;
                if sc.peek() == Some(b'{') {
                    sc.object(|sc, k| ev.facts.take(sc, &k))?;
                    sc.ws();
                } else {
                    sc.skip()?;
                }
                let raw = line[start..sc.pos].trim();
                ev.payload = (raw != "null").then_some(Cow::Borrowed(raw));
            }
            _ => {
                sc.skip()?;
            }
        }
        Ok(())
    })?;
    sc.finish()?;
    let Some(name) = name else {
        return Err(LineError::NoEvent);
    };
    if v.is_none() && name.contains('.') {
        return parse_avenor(line);
    }
    ev.run_id = run_id.or(session);
    ev.dialect = if v.is_some() {
        Dialect::Native
    } else {
        Dialect::AifLoop
    };
    ev.ts = ts_raw.and_then(parse_ts);
    ev.kind = Kind::from_name(&name);
    ev.name = name;
    Ok(ev)
}

pub(crate) fn parse_ts(raw: &str) -> Option<Ts> {
    let raw = raw.trim();
    if let Some(s) = raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Ts::parse_rfc3339(s)
    } else {
        let ms: f64 = raw.parse().ok()?;
        // Avenor writes epoch milliseconds; a value that small is epoch seconds.
        Some(Ts(if ms.abs() < 1e11 {
            (ms * 1000.0) as i64
        } else {
            ms as i64
        }))
    }
}

/// Avenor lines are flat objects; the envelope keys are lifted out and the rest becomes the
/// payload. Rare enough in large logs to go through a `serde_json::Value`.
fn parse_avenor(line: &str) -> Result<Event<'static>, LineError> {
    let Value::Object(mut m) =
        serde_json::from_str::<Value>(line).map_err(|e| LineError::Unreadable(e.to_string()))?
    else {
        return Err(LineError::NotObject);
    };
    let name = match m.remove("event") {
        Some(Value::String(s)) => s,
        _ => return Err(LineError::NoEvent),
    };
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(Cow::Owned(s)),
        _ => None,
    };
    let mut ev = Event::new(Kind::Other);
    ev.dialect = Dialect::Avenor;
    ev.ts = m.remove("ts").and_then(|t| parse_ts(&t.to_string()));
    ev.seq = m.remove("seq").and_then(|s| s.as_u64());
    m.remove("run_id");
    // Same rule as the fast path (first string wins), whatever serde_json kept of duplicates.
    ev.run_id = run_key(line)
        .ok()
        .flatten()
        .map(|k| Cow::Owned(k.into_owned()));
    ev.iteration = m.remove("iteration").and_then(|i| i.as_u64());
    ev.step = text(m.remove("phase"));
    let flag = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_bool) == Some(true);
    let (kind, payload) = match name.as_str() {
        "avenor.loop.start" => (Kind::RunStarted, Value::Object(m)),
        "avenor.phase.start" => (Kind::PhaseStarted, Value::Object(m)),
        "avenor.phase.end" => {
            // Abort outranks exit when both fired.
            let marker = if flag(&m, "abort_marker") {
                Some(("abort", m.get("abort_marker_label").cloned()))
            } else if flag(&m, "exit_marker") {
                Some(("exit", m.get("exit_marker_label").cloned()))
            } else {
                None
            };
            if let Some((directive, label)) = marker {
                let mut mk = Map::new();
                mk.insert("directive".into(), directive.into());
                if let Some(l) = label {
                    mk.insert("label".into(), l);
                }
                m.insert("marker".into(), Value::Object(mk));
            }
            (Kind::PhaseFinished, Value::Object(m))
        }
        "avenor.loop.end" => (Kind::Stopped, Value::Object(m)),
        "avenor.retry" => (Kind::PhaseRetry, Value::Object(m)),
        "session.end" => (Kind::SessionEnded, Value::Object(m)),
        _ => (Kind::Other, Value::Object(m)),
    };
    ev.kind = kind;
    ev.name = Cow::Owned(if kind == Kind::Other {
        name
    } else {
        kind.name().to_string()
    });
    Ok(ev.with_payload(&payload))
}

/// The run a line belongs to (`run_id`, else `session_id`), read without parsing the rest of
/// the line when `run_id` comes early. `Err` when the line is not a JSON object.
pub fn run_key(line: &str) -> Result<Option<Cow<'_, str>>, JsonError> {
    let mut sc = Scanner::new(line);
    if sc.peek() != Some(b'{') {
        return Err(JsonError {
            pos: sc.pos,
            reason: "expected an object",
        });
    }
    sc.pos += 1;
    let mut session = None;
    if sc.peek() == Some(b'}') {
        return Ok(None);
    }
    loop {
        let key = sc.string()?;
        if sc.peek() != Some(b':') {
            return Err(JsonError {
                pos: sc.pos,
                reason: "expected ':'",
            });
        }
        sc.pos += 1;
        match &*key {
            "run_id" => {
                if let Some(id) = sc.opt_string()? {
                    return Ok(Some(id));
                }
            }
            "session_id" if session.is_none() => session = sc.opt_string()?,
            _ => {
                sc.skip()?;
            }
        }
        match sc.peek() {
            Some(b',') => sc.pos += 1,
            Some(b'}') => return Ok(session),
            _ => {
                return Err(JsonError {
                    pos: sc.pos,
                    reason: "expected ',' or '}'",
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_error_is_named_once() {
        let e = parse_line("{\"event\":").unwrap_err();
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(e.to_string().matches(" at byte ").count(), 1, "{e}");
    }

    #[test]
    fn detects_each_dialect() {
        let aif = r#"{"ts":"2026-07-19T16:50:14Z","run_id":"r","iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","status":"ok","payload":{"score":0.444,"threshold":0.8,"passed":false,"fail_count":2}}"#;
        let e = parse_line(aif).unwrap();
        assert_eq!(
            (e.dialect, e.kind),
            (Dialect::AifLoop, Kind::EvaluationDone)
        );
        assert_eq!(
            (e.facts.score, e.facts.passed, e.facts.fail_count),
            (Some(0.444), Some(false), Some(2))
        );
        assert_eq!(e.step.as_deref(), Some("EVALUATE"));

        let av = r#"{"exit_marker_label":"tests green","ts":1715000000000,"event":"avenor.phase.end","run_id":"a3f9","phase":"test","iteration":2,"stop_reason":"end_turn","exit_marker":true}"#;
        let e = parse_line(av).unwrap();
        assert_eq!((e.dialect, e.kind), (Dialect::Avenor, Kind::PhaseFinished));
        assert_eq!(e.step.as_deref(), Some("test"));
        assert_eq!(e.ts, Some(Ts(1_715_000_000_000)));
        let p = e.payload_value();
        assert_eq!(p["marker"]["directive"], "exit");
        assert_eq!(p["marker"]["label"], "tests green");

        let native = Event {
            seq: Some(3),
            ts: Some(Ts(5)),
            run_id: Some("r".into()),
            ..Event::new(Kind::Stopped)
        }
        .with_payload(&serde_json::json!({"reason": "user_stop"}));
        let line = native.to_native_line();
        assert_eq!(parse_line(&line).unwrap(), native);
    }

    #[test]
    fn session_events_use_the_session_as_run() {
        let e = parse_line(
            r#"{"event":"session.end","session_id":"ses_acc","stop_reason":"end_turn"}"#,
        )
        .unwrap();
        assert_eq!(
            (e.kind, e.run_id.as_deref()),
            (Kind::SessionEnded, Some("ses_acc"))
        );
        let e = parse_line(r#"{"event":"tool.call","session_id":"s","kind":"read"}"#).unwrap();
        assert_eq!((e.kind, &*e.name), (Kind::Other, "tool.call"));
    }

    #[test]
    fn rejects_non_events() {
        assert_eq!(parse_line("[1]"), Err(LineError::NotObject));
        assert_eq!(parse_line(r#"{"a":1}"#), Err(LineError::NoEvent));
        assert!(matches!(
            parse_line(r#"{"event":"x""#),
            Err(LineError::Json(_))
        ));
    }
}
