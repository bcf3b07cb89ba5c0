//! How long and how good, as text: the durations and scores that stagnation findings,
//! liveness notes and postmortem reports print. A leaf module, so that those three can share
//! it without importing one another.

/// `1.5s`, `2m 09s`, `1h 02m`, `3d 04h`; under a second, `350ms`.
pub fn duration(ms: u64) -> String {
    let (s, m, h, d) = (ms / 1000, ms / 60_000, ms / 3_600_000, ms / 86_400_000);
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        if ms.is_multiple_of(1000) {
            format!("{s}s")
        } else {
            format!("{s}.{}s", ms % 1000 / 100)
        }
    } else if ms < 3_600_000 {
        format!("{m}m {:02}s", s % 60)
    } else if ms < 86_400_000 {
        format!("{h}h {:02}m", m % 60)
    } else {
        format!("{d}d {:02}h", h % 24)
    }
}

/// A score with at most three decimals and no trailing zeros.
pub fn score(s: f64) -> String {
    let t = format!("{s:.3}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_scores_read_short() {
        assert_eq!(duration(350), "350ms");
        assert_eq!(duration(3900), "3.9s");
        assert_eq!(duration(129_000), "2m 09s");
        assert_eq!(duration(3_720_000), "1h 02m");
        assert!(!duration(u64::MAX).is_empty());
        assert_eq!(score(0.8200000001), "0.82");
        assert_eq!(score(1.0), "1");
    }
}
