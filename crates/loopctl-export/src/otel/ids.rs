//! Trace and span ids derived from what the log says (run id, event seq), so that exporting a
//! log twice, or live and after the fact, gives the same ids and a backend deduplicates.
//!
//! An id is the first bytes of SHA-256 over a domain tag, the run id and the key; the W3C
//! trace-context rule that an all-zero id is invalid is kept by setting the last bit then.

use sha2::{Digest, Sha256};

pub type TraceId = [u8; 16];
pub type SpanId = [u8; 8];

/// What a span stands for: one key space each, so a session and a phase keyed by the same
/// seq never share an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A session's root (`RUN <loop>`), keyed by its first event.
    Session,
    /// A phase attempt, keyed by its `phase_started` (or first) event.
    Phase,
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"loopctl-otel/1\0");
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

fn non_zero<const N: usize>(mut id: [u8; N]) -> [u8; N] {
    if id.iter().all(|b| *b == 0) {
        id[N - 1] = 1;
    }
    id
}

/// A run is one trace.
pub fn trace_id(run_id: &str) -> TraceId {
    let d = digest(&[b"trace", run_id.as_bytes()]);
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    non_zero(id)
}

/// The span of `role` whose first event has `key` (its `seq`, else its 1-based place among
/// the run's events).
pub fn span_id(run_id: &str, role: Role, key: u64) -> SpanId {
    let tag: &[u8] = match role {
        Role::Session => b"session",
        Role::Phase => b"phase",
    };
    let d = digest(&[tag, run_id.as_bytes(), &key.to_le_bytes()]);
    let mut id = [0u8; 8];
    id.copy_from_slice(&d[..8]);
    non_zero(id)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The W3C `traceparent` naming the span of the phase started by event `seq` (sampled).
pub fn traceparent(run_id: &str, seq: u64) -> String {
    format!(
        "00-{}-{}-01",
        hex(&trace_id(run_id)),
        hex(&span_id(run_id, Role::Phase, seq))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_and_never_zero() {
        assert_eq!(trace_id("r-1"), trace_id("r-1"));
        assert_ne!(trace_id("r-1"), trace_id("r-2"));
        assert_ne!(span_id("r", Role::Session, 1), span_id("r", Role::Phase, 1));
        assert_ne!(span_id("r", Role::Phase, 1), span_id("r", Role::Phase, 2));
        assert!(trace_id("").iter().any(|b| *b != 0));
        assert_eq!(non_zero([0u8; 8]), [0, 0, 0, 0, 0, 0, 0, 1]);
        let tp = traceparent("r", 2);
        assert_eq!(tp.len(), 55);
        assert!(tp.starts_with("00-") && tp.ends_with("-01"));
    }
}
