//! The wall clock: the one place `now` enters loopctl (the core is pure and takes it as an
//! argument; the runner stamps events with it, read commands judge idleness by it).

use std::time::{SystemTime, UNIX_EPOCH};

use loopctl_core::Ts;

/// The wall clock, in milliseconds since the Unix epoch.
pub fn now() -> Ts {
    Ts::from_millis(millis_since_epoch(SystemTime::now()))
}

fn millis_since_epoch(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn now_is_the_system_clock_in_milliseconds() {
        let before = millis_since_epoch(SystemTime::now());
        let t = now().millis();
        let after = millis_since_epoch(SystemTime::now());
        assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
        assert_eq!(
            millis_since_epoch(UNIX_EPOCH + Duration::from_millis(1500)),
            1500
        );
        assert_eq!(
            millis_since_epoch(UNIX_EPOCH - Duration::from_millis(1500)),
            -1500
        );
    }
}
