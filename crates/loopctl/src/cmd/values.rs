//! Value parsers for numeric flags: a bad value is a usage error (clap's message, exit 2)
//! before any command runs, never a setting that silently changes a verdict.

use std::num::IntErrorKind;
use std::time::Duration;

/// A count of at least 1 (`--threads 0`, `--limit 0` are refused).
pub fn count_u64() -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    whole(1, None)
}

/// `count_u64` for `usize` settings.
pub fn count_usize() -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    whole(1, None)
}

/// `--threads`: 1 to 256 (each is a thread of its own: a typo's 99999 would start them all).
pub fn threads() -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    whole(1, Some(256))
}

/// At least `min`, for `usize` settings.
pub fn usize_from(
    min: u64,
) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    whole(min, None)
}

/// A whole number from `min` (to `max`), refused with its bounds in words (clap's own ranged
/// parser says `0 is not in 1..18446744073709551615`).
fn whole<T: TryFrom<u64>>(
    min: u64,
    max: Option<u64>,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let bounds = match max {
            Some(max) => format!("from {min} to {max}"),
            None => format!("at least {min}"),
        };
        let out_of_range = || format!("{s} is out of range: it must be {bounds}");
        let too_large = || format!("{s} is too large");
        let n = match s.parse::<i128>() {
            Ok(n) => n,
            Err(e) if *e.kind() == IntErrorKind::PosOverflow => return Err(too_large()),
            Err(e) if *e.kind() == IntErrorKind::NegOverflow => return Err(out_of_range()),
            Err(_) => return Err(format!("{s:?} is not a whole number (it must be {bounds})")),
        };
        if n < i128::from(min) || max.is_some_and(|max| n > i128::from(max)) {
            return Err(out_of_range());
        }
        u64::try_from(n)
            .ok()
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(too_large)
    }
}

/// A finite number >= 0: NaN, infinities and negative values are refused (a NaN threshold
/// makes every comparison false, so a healthy run would read as stagnating).
pub fn non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        Ok(_) => Err(format!("{s:?} must be a finite number >= 0")),
        Err(_) => Err(format!("{s:?} is not a number")),
    }
}

/// A score delta: a finite number from 0 to 1. Scores are on aif-loop's 0..1 scale, so a
/// larger gain never happens and every run would read as stagnating.
pub fn score_delta(s: &str) -> Result<f64, String> {
    match non_negative(s)? {
        x if x <= 1.0 => Ok(x),
        _ => Err(format!(
            "{s:?} is no score delta: scores go from 0 to 1, so it must be from 0 to 1"
        )),
    }
}

/// A duration such as 90s, 30m, 1h30m, or plain seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "{s} is out of range: a duration cannot be negative"
        ));
    }
    humantime::parse_duration(s)
        .or_else(|_| s.parse::<u64>().map(Duration::from_secs).map_err(|_| ()))
        .map_err(|_| format!("{s:?} is not a duration (try 90s, 30m, 1h30m)"))
}

/// `duration`, longer than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err(format!("{s:?} must be longer than zero")),
        d => Ok(d),
    }
}
