//! The reference parser: a closure-driven pull scan over the validating JSON scanner that reads
//! every line of every dialect and names the first error. `single_pass` must give the same
//! events; `parse_line` tries it first and falls back here.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::event::{Dialect, Event, Kind, LineError};
use super::json_scanner::{JsonError, Scanner};
use super::timestamp::Ts;

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
    // A repeated key keeps its last value, as serde_json's `Value` does; the run is `run_id`
    // if that is a string, else `session_id`, exactly as in `run_key`, so that a sharded
    // replay sends every line to the shard of the run it is applied to.
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
            "run_id" => run_id = sc.opt_string()?,
            "session_id" => session = sc.opt_string()?,
            "iteration" => ev.iteration = sc.opt_u64()?,
            "phase" => ev.phase = sc.opt_string()?,
            "step" => ev.step = sc.opt_string()?,
            "status" => ev.status = sc.opt_string()?,
            "payload" => {
                // A repeated payload: only the last one's facts.
                ev.facts = Default::default();
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
    ev.ts = ts_raw.and_then(Ts::parse_json);
    ev.kind = Kind::from_name(&name);
    ev.name = name;
    Ok(ev)
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
    ev.ts = m.remove("ts").and_then(|t| Ts::parse_json(&t.to_string()));
    ev.seq = m.remove("seq").and_then(|s| s.as_u64());
    m.remove("run_id");
    // Same rule as the other dialects (the last `run_id`, if a string, else `session_id`).
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

/// The run a line belongs to: its last `run_id` if that is a string, else its last
/// `session_id` if that is one (a repeated key keeps its last value, as in `Value`). The whole
/// object is read; `Err` when the line is not a JSON object.
pub fn run_key(line: &str) -> Result<Option<Cow<'_, str>>, JsonError> {
    let mut sc = Scanner::new(line);
    if sc.peek() != Some(b'{') {
        return Err(JsonError {
            pos: sc.pos,
            reason: "expected an object",
        });
    }
    sc.pos += 1;
    let (mut run, mut session) = (None, None);
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
            "run_id" => run = sc.opt_string()?,
            "session_id" => session = sc.opt_string()?,
            _ => {
                sc.skip()?;
            }
        }
        match sc.peek() {
            Some(b',') => sc.pos += 1,
            Some(b'}') => return Ok(run.or(session)),
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
    use crate::decode::parse_line;

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
