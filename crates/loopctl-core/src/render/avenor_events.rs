//! Native events projected onto Avenor's lifecycle events (`--on-event`), with Avenor's field
//! names and key order, so an existing Avenor consumer reads a loopctl run unchanged.

use serde_json::Value;

use crate::decode::event::{Event, Kind};

fn push(out: &mut String, key: &str, v: &Value) {
    out.push(if out.is_empty() { '{' } else { ',' });
    out.push_str(&Value::String(key.into()).to_string());
    out.push(':');
    out.push_str(&v.to_string());
}

/// The Avenor line (no newline) for a native event, or `None` for events Avenor has no name for.
pub fn lifecycle_line(ev: &Event<'_>) -> Option<String> {
    let name = match ev.kind {
        Kind::RunStarted => "avenor.loop.start",
        Kind::PhaseStarted => "avenor.phase.start",
        Kind::PhaseFinished => "avenor.phase.end",
        Kind::Stopped => "avenor.loop.end",
        Kind::PhaseRetry => "avenor.retry",
        _ => return None,
    };
    let p = ev.payload_value();
    let get = |k: &str| p.get(k).filter(|v| !v.is_null()).cloned();
    let mut out = String::with_capacity(200);
    let o = &mut out;
    push(o, "event", &name.into());
    push(o, "run_id", &ev.run_id.as_deref().unwrap_or("").into());
    push(o, "ts", &ev.ts.map(|t| t.millis()).unwrap_or(0).into());
    let phase_fields = |o: &mut String| {
        push(o, "phase", &ev.step.as_deref().unwrap_or("").into());
        push(o, "iteration", &ev.iteration.unwrap_or(0).into());
    };
    match ev.kind {
        Kind::RunStarted => {
            for k in ["max_iterations", "pre_phase_count", "loop_phase_count"] {
                if let Some(v) = get(k) {
                    push(o, k, &v);
                }
            }
        }
        Kind::PhaseStarted => {
            phase_fields(o);
            for k in ["kind", "session_id"] {
                if let Some(v) = get(k) {
                    push(o, k, &v);
                }
            }
        }
        Kind::PhaseFinished => {
            phase_fields(o);
            push(
                o,
                "stop_reason",
                &get("stop_reason").unwrap_or_else(|| "end_turn".into()),
            );
            let marker = p.get("marker");
            let directive = marker
                .and_then(|m| m.get("directive"))
                .and_then(Value::as_str);
            let label = marker
                .and_then(|m| m.get("label"))
                .filter(|l| l.is_string());
            if let Some(d @ ("exit" | "abort")) = directive {
                push(o, &format!("{d}_marker"), &true.into());
                if let Some(l) = label {
                    push(o, &format!("{d}_marker_label"), l);
                }
            }
            if let Some(v) = get("session_id") {
                push(o, "session_id", &v);
            }
        }
        Kind::Stopped => {
            for k in ["iterations_completed", "exit_reason", "exit_label"] {
                if let Some(v) = get(k) {
                    push(o, k, &v);
                }
            }
        }
        Kind::PhaseRetry => {
            phase_fields(o);
            for k in ["attempt", "next_attempt", "delay_ms", "exit_code"] {
                if let Some(v) = get(k) {
                    push(o, k, &v);
                }
            }
        }
        _ => {}
    }
    out.push('}');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_line;

    #[test]
    fn abort_end_matches_avenor_and_reads_back() {
        let native = r#"{"v":1,"seq":9,"ts":"2024-05-06T12:53:20.000Z","run_id":"a3f9","event":"phase_finished","iteration":2,"step":"test","payload":{"kind":"loop","index":0,"stop_reason":"end_turn","marker":{"directive":"abort","label":"stuck"}}}"#;
        let ev = parse_line(native).unwrap();
        let line = lifecycle_line(&ev).unwrap();
        assert_eq!(
            line,
            r#"{"event":"avenor.phase.end","run_id":"a3f9","ts":1715000000000,"phase":"test","iteration":2,"stop_reason":"end_turn","abort_marker":true,"abort_marker_label":"stuck"}"#
        );
        let back = parse_line(&line).unwrap();
        assert_eq!(
            (back.kind, back.step.as_deref()),
            (Kind::PhaseFinished, Some("test"))
        );
        assert!(lifecycle_line(&parse_line(r#"{"v":1,"event":"usage"}"#).unwrap()).is_none());
    }
}
