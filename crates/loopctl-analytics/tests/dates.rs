//! Calendar arithmetic of `--by week` and `--since/--until`, against dates checked by hand.

use loopctl_analytics::parse_bound;
use loopctl_analytics::reports::{civil, days_from_civil, iso_week};

#[test]
fn iso_weeks_across_year_ends() {
    for ((y, m, d), week) in [
        ((2026, 1, 1), "2026-W01"),   // a Thursday
        ((2027, 1, 1), "2026-W53"),   // a Friday: still 2026's last week
        ((2024, 12, 30), "2025-W01"), // a Monday in 2025's first week
        ((2026, 11, 23), "2026-W48"),
        ((1970, 1, 1), "1970-W01"),
    ] {
        assert_eq!(iso_week(days_from_civil(y, m, d)), week, "{y}-{m}-{d}");
        assert_eq!(civil(days_from_civil(y, m, d)), (y, m, d));
    }
    assert_eq!(days_from_civil(2026, 11, 20), 20_777);
}

#[test]
fn bounds_are_days_times_or_spans_back() {
    let now = 1_800_000_000_000;
    assert_eq!(parse_bound("2026-11-21", now).unwrap(), 20_778 * 86_400_000);
    assert_eq!(
        parse_bound("2026-11-21T10:00:00Z", now).unwrap(),
        20_778 * 86_400_000 + 36_000_000
    );
    assert_eq!(parse_bound("7d", now).unwrap(), now - 7 * 86_400_000);
    assert_eq!(parse_bound("90m", now).unwrap(), now - 90 * 60_000);
    assert!(parse_bound("last tuesday", now).is_err());
    assert!(parse_bound("2026-13-01", now).is_err());
}
