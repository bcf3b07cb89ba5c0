//! Values read out of an event's payload, as the trace's records hold them; folds beside the
//! trace (analytics' lean fold, postmortem) read them the same way.

use serde_json::Value;

use crate::decode::timestamp::Ts;

/// The text at `k`: a string, or a number written out.
pub fn s(v: &Value, k: &str) -> Option<String> {
    match v.get(k)? {
        Value::String(t) => Some(t.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The unsigned integer at `k`.
pub fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

/// The signed integer at `k`.
pub fn i(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

/// Milliseconds from `from` to `to`, when both are known and `to` is not earlier.
pub fn gap(from: Option<Ts>, to: Option<Ts>) -> Option<u64> {
    let (a, b) = (from?, to?);
    u64::try_from(b.0.checked_sub(a.0)?).ok()
}

/// A marker's `directive` and its `label` (`"blocked: needs a key"`).
pub fn marker_text(v: &Value) -> Option<String> {
    let m = v.get("marker")?;
    let d = m.get("directive").and_then(Value::as_str)?;
    Some(match m.get("label").and_then(Value::as_str) {
        Some(l) if !l.is_empty() => format!("{d}: {l}"),
        _ => d.to_string(),
    })
}
