//! Values read out of an event's payload, as the trace's records hold them.

use serde_json::Value;

use crate::decode::timestamp::Ts;

pub(super) fn s(v: &Value, k: &str) -> Option<String> {
    match v.get(k)? {
        Value::String(t) => Some(t.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(super) fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

pub(super) fn i(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

pub(super) fn gap(from: Option<Ts>, to: Option<Ts>) -> Option<u64> {
    let (a, b) = (from?, to?);
    u64::try_from(b.0.checked_sub(a.0)?).ok()
}

pub(super) fn marker_text(v: &Value) -> Option<String> {
    let m = v.get("marker")?;
    let d = m.get("directive").and_then(Value::as_str)?;
    Some(match m.get("label").and_then(Value::as_str) {
        Some(l) if !l.is_empty() => format!("{d}: {l}"),
        _ => d.to_string(),
    })
}
