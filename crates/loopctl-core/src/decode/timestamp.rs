//! Timestamps as milliseconds since the Unix epoch, UTC.
//!
//! The common RFC 3339 shapes (`...Z`, with or without fractional seconds) are parsed by hand
//! because every event carries one and replay throughput depends on it; anything else falls back
//! to the `time` crate's full RFC 3339 parser.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ts(pub i64);

impl Ts {
    pub fn from_millis(ms: i64) -> Ts {
        Ts(ms)
    }

    pub fn millis(self) -> i64 {
        self.0
    }

    /// Parses RFC 3339 (any offset, any fraction length); returns `None` when it is not one.
    #[inline(always)]
    pub fn parse_rfc3339(s: &str) -> Option<Ts> {
        fast_parse(s.as_bytes()).or_else(|| Ts::parse_rfc3339_slow(s))
    }

    #[cold]
    fn parse_rfc3339_slow(s: &str) -> Option<Ts> {
        let dt = OffsetDateTime::parse(s, &Rfc3339).ok()?;
        i64::try_from(floor_ms(dt)).ok().map(Ts)
    }

    /// A JSON value's text as an event's `ts`: a quoted RFC 3339 string, or epoch
    /// milliseconds (Avenor's), or epoch seconds when the number is that small. A fraction of
    /// a millisecond is floored, as in a string.
    pub fn parse_json(raw: &str) -> Option<Ts> {
        let raw = raw.trim();
        if let Some(s) = raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            Ts::parse_rfc3339(s)
        } else {
            let ms: f64 = raw.parse().ok()?;
            Some(Ts(if ms.abs() < 1e11 {
                (ms * 1000.0).floor() as i64
            } else {
                ms.floor() as i64
            }))
        }
    }

    /// `2026-02-18T12:01:10.123Z`: always UTC, always milliseconds.
    pub fn to_rfc3339(self) -> String {
        let mut buf = [0; 24];
        match self.write_rfc3339(&mut buf) {
            Some(text) => text.to_string(),
            None => {
                let (y, m, d, h, mi, s, ms) = self.fields();
                format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
            }
        }
    }

    /// `to_rfc3339` into `buf`, for years 0 to 9999 (the others take `format!`): run.json
    /// holds two timestamps per run, and `format!` was most of their cost.
    pub(crate) fn write_rfc3339(self, buf: &mut [u8; 24]) -> Option<&str> {
        let (y, m, d, h, mi, s, ms) = self.fields();
        if !(0..=9999).contains(&y) {
            return None;
        }
        let mut put = |at: usize, n: i64, width: u32| {
            for k in 0..width as usize {
                buf[at + k] = b'0' + (n / 10i64.pow(width - 1 - k as u32) % 10) as u8;
            }
        };
        put(0, y, 4);
        put(5, m, 2);
        put(8, d, 2);
        put(11, h, 2);
        put(14, mi, 2);
        put(17, s, 2);
        put(20, ms, 3);
        for (at, c) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (23, b'Z'),
        ] {
            buf[at] = c;
        }
        std::str::from_utf8(buf).ok()
    }

    /// Year, month, day, hour, minute, second, millisecond.
    fn fields(self) -> (i64, i64, i64, i64, i64, i64, i64) {
        let days = self.0.div_euclid(86_400_000);
        let rem = self.0.rem_euclid(86_400_000);
        let (y, m, d) = civil_from_days(days);
        (
            y,
            m,
            d,
            rem / 3_600_000,
            rem / 60_000 % 60,
            rem / 1000 % 60,
            rem % 1000,
        )
    }
}

impl std::fmt::Display for Ts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Ts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0; 24];
        match self.write_rfc3339(&mut buf) {
            Some(text) => s.serialize_str(text),
            None => s.serialize_str(&self.to_rfc3339()),
        }
    }
}

impl<'de> Deserialize<'de> for Ts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ts, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ts::parse_rfc3339(&s).ok_or_else(|| serde::de::Error::custom("not an RFC 3339 timestamp"))
    }
}

/// The millisecond an instant falls in: floored, so that before 1970 a fraction of a
/// millisecond counts as the hand-written parser counts it (`/` would round toward zero).
fn floor_ms(dt: OffsetDateTime) -> i128 {
    dt.unix_timestamp_nanos().div_euclid(1_000_000)
}

fn digits(b: &[u8]) -> Option<i64> {
    let mut n = 0i64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(c - b'0');
    }
    Some(n)
}

/// `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`; other shapes go to the slow path. The separators are
/// checked a word at a time; the date and clock digits when the minute is new (`minute_of`).
#[inline(always)]
fn fast_parse(b: &[u8]) -> Option<Ts> {
    let (minute, rest) = b.split_first_chunk::<16>()?;
    let key = u128::from_le_bytes(*minute);
    // `-` at 4 and 7, `T` or `t` at 10 (0x20 set: `t`), `:` at 13.
    const MASK: u128 = 0xFF << 32 | 0xFF << 56 | 0xFF << 80 | 0xFF << 104;
    const CASE: u128 = 0x20 << 80;
    const SEPS: u128 = u128::from_le_bytes(*b"\0\0\0\0-\0\0-\0\0t\0\0:\0\0");
    if (key | CASE) & MASK != SEPS {
        return None;
    }
    let ms = match *rest {
        [a, b, c, d, e, f, g, h] => clock_ms(u64::from_le_bytes([a, b, c, d, e, f, g, h]))?,
        _ => clock_ms_other(rest)?,
    };
    Some(Ts(minute_of(key)? + ms))
}

/// The milliseconds of `:SS.mmmZ` (or `z`), as eight bytes little-endian: XORed with the shape,
/// separators become 0 and digits their values, so one test per byte (at most 9) checks all.
#[inline(always)]
fn clock_ms(w: u64) -> Option<i64> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let t = (w | 0x20 << 56) ^ u64::from_le_bytes(*b":00.000z");
    // A byte above 9 sets its high bit, alone or with 0x76 added (no carry below 0x80).
    let bad = (t | t.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    let seps = t & (0xFF | 0xFF << 24 | 0xFF << 56);
    if bad | seps != 0 {
        return None;
    }
    let d = |k: u32| (t >> (8 * k) & 0xFF) as i64;
    let s = d(1) * 10 + d(2);
    if s > 59 {
        return None;
    }
    Some(s * 1000 + d(4) * 100 + d(5) * 10 + d(6))
}

/// `clock_ms` for the other shapes: `:SS`, then no fraction or one of 1 to 9 digits, then `Z`.
#[cold]
fn clock_ms_other(rest: &[u8]) -> Option<i64> {
    let [
        b':',
        s1 @ b'0'..=b'5',
        s2 @ b'0'..=b'9',
        ref frac @ ..,
        b'Z' | b'z',
    ] = *rest
    else {
        return None;
    };
    let ms = match *frac {
        [] => 0,
        [b'.', ref digits_ @ ..] if (1..=9).contains(&digits_.len()) => {
            let mut ms = 0;
            for i in 0..3 {
                let c = digits_.get(i).copied().unwrap_or(b'0');
                if !c.is_ascii_digit() {
                    return None;
                }
                ms = ms * 10 + i64::from(c - b'0');
            }
            digits(digits_)?;
            ms
        }
        _ => return None,
    };
    Some((i64::from(s1 - b'0') * 10 + i64::from(s2 - b'0')) * 1000 + ms)
}

/// Milliseconds since the epoch at the start of the minute `YYYY-MM-DDTHH:MM` (a timestamp's
/// first sixteen bytes as one number, separators already checked). The last minute read on
/// this thread is kept: the lines of a log mostly share it, and the calendar arithmetic is the
/// costly part of a timestamp.
#[inline(always)]
fn minute_of(key: u128) -> Option<i64> {
    thread_local! {
        static LAST: std::cell::Cell<(u128, i64)> = const { std::cell::Cell::new((0, 0)) };
    }
    let (last, ms) = LAST.get();
    // A zeroed key is never a valid minute: the first call always computes.
    if last == key {
        return Some(ms);
    }
    let ms = minute_of_text(&key.to_le_bytes())?;
    LAST.set((key, ms));
    Some(ms)
}

/// `minute_of` without the kept minute.
#[cold]
fn minute_of_text(key: &[u8; 16]) -> Option<i64> {
    let days = days_of_date(&key[..10])?;
    let (h, mi) = (digits(&key[11..13])?, digits(&key[14..16])?);
    if h > 23 || mi > 59 {
        return None;
    }
    Some(days * 86_400_000 + h * 3_600_000 + mi * 60_000)
}

/// Days since 1970-01-01 of a valid `YYYY-MM-DD`.
fn days_of_date(date: &[u8]) -> Option<i64> {
    let (y, mo, d) = (
        digits(date.get(0..4)?)?,
        digits(date.get(5..7)?)?,
        digits(date.get(8..10)?)?,
    );
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    Some(days_from_civil(y, mo, d))
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_shapes_seen_in_real_logs() {
        let a = Ts::parse_rfc3339("2026-07-19T16:50:14Z").unwrap();
        let b = Ts::parse_rfc3339("2026-07-19T16:50:14.000Z").unwrap();
        let c = Ts::parse_rfc3339("2026-07-19T18:50:14+02:00").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.to_rfc3339(), "2026-07-19T16:50:14.000Z");
        assert_eq!(
            Ts(1_715_000_000_000).to_rfc3339(),
            "2024-05-06T12:53:20.000Z"
        );
        assert!(Ts::parse_rfc3339("2026-02-30T00:00:00Z").is_none());
        // Before 1970 a fraction of a millisecond is floored in every shape.
        for s in [
            "1969-12-31T23:59:59.9995Z",
            "1969-12-31T23:59:59.9995+00:00",
        ] {
            assert_eq!(Ts::parse_rfc3339(s), Some(Ts(-1)), "{s}");
        }
        assert_eq!(Ts::parse_json("-0.0005"), Some(Ts(-1)));
        assert!(Ts::parse_rfc3339("yesterday").is_none());
    }

    /// Every ASCII byte at every place of the usual shapes: the word-at-a-time checks of the
    /// separators and clock digits take exactly what the `time` crate takes.
    #[test]
    fn every_byte_changed_parses_as_the_time_crate_does() {
        for base in [
            "2026-02-18T13:03:23.570Z",
            "2026-02-18T13:03:23Z",
            "2026-02-18T13:03:23.5Z",
        ] {
            for at in 0..base.len() {
                for c in 0u8..0x80 {
                    let mut b = base.as_bytes().to_vec();
                    b[at] = c;
                    let s = String::from_utf8(b).unwrap();
                    let want = OffsetDateTime::parse(&s, &Rfc3339)
                        .ok()
                        .map(|t| floor_ms(t) as i64);
                    assert_eq!(Ts::parse_rfc3339(&s).map(|t| t.0), want, "{s:?}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(ms in -62_000_000_000_000i64..250_000_000_000_000i64) {
            let t = Ts(ms);
            prop_assert_eq!(Ts::parse_rfc3339(&t.to_rfc3339()), Some(t));
        }

        #[test]
        fn fast_path_agrees_with_time_crate(ms in -62_000_000_000_000i64..4_000_000_000_000i64, frac in 0usize..4) {
            let full = Ts(ms).to_rfc3339();
            let s = match frac { 0 => format!("{}Z", &full[..19]), 1 => full.clone(),
                                 2 => format!("{}123456Z", &full[..23]), _ => format!("{}Z", &full[..21]) };
            let slow = OffsetDateTime::parse(&s, &Rfc3339).unwrap();
            prop_assert_eq!(fast_parse(s.as_bytes()).map(|t| t.0),
                            Some(floor_ms(slow) as i64));
        }

        #[test]
        fn written_timestamps_are_formatted_ones(ms in -400_000_000_000_000i64..400_000_000_000_000i64) {
            let (y, m, d, h, mi, s, milli) = Ts(ms).fields();
            prop_assert_eq!(Ts(ms).to_rfc3339(),
                format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z"));
        }

        /// Any timestamp with one byte changed, or cut short, parses as the `time` crate reads
        /// it: the hand-written shape checks take nothing the full parser would not.
        #[test]
        fn damaged_timestamps_parse_as_the_time_crate_does(
            ms in -62_000_000_000_000i64..4_000_000_000_000i64,
            frac in 0usize..4,
            at in 0usize..40,
            byte in prop::sample::select(b"0123456789:-.+TtZz 5x".to_vec()),
            cut in 0usize..40,
        ) {
            let full = Ts(ms).to_rfc3339();
            let mut s = match frac { 0 => format!("{}Z", &full[..19]), 1 => full.clone(),
                                     2 => format!("{}123456Z", &full[..23]), _ => format!("{}Z", &full[..21]) }
                .into_bytes();
            if at < s.len() {
                s[at] = byte;
            }
            if cut < s.len() && cut % 3 == 0 {
                s.truncate(cut);
            }
            let s = String::from_utf8(s).unwrap();
            let want = OffsetDateTime::parse(&s, &Rfc3339)
                .ok()
                .map(|t| floor_ms(t) as i64);
            prop_assert_eq!(Ts::parse_rfc3339(&s).map(|t| t.0), want, "{}", s);
        }

        /// The minute kept from the last timestamp never leaks into the next one: a run of
        /// timestamps on nearby days, some with impossible dates or clock fields, parses as
        /// each alone would.
        #[test]
        fn the_kept_date_never_leaks(stamps in prop::collection::vec(
            (0i64..40, prop_oneof![0i64..86_400_000, (0i64..3).prop_map(|m| m * 60_000)], 0u8..7), 1..30)) {
            for (day, ms, bad) in stamps {
                let mut s = Ts(1_770_000_000_000 + day * 86_400_000 + ms).to_rfc3339();
                match bad {
                    // An impossible day or month, the rest unchanged.
                    0 => s.replace_range(8..10, "31"),
                    1 => s.replace_range(5..7, "13"),
                    2 => s.replace_range(11..13, "24"),
                    3 => s.replace_range(14..16, "60"),
                    4 => s.replace_range(17..19, "60"),
                    _ => {}
                }
                let want = OffsetDateTime::parse(&s, &Rfc3339)
                    .ok()
                    .map(|t| floor_ms(t) as i64);
                prop_assert_eq!(Ts::parse_rfc3339(&s).map(|t| t.0), want, "{}", s);
            }
        }
    }
}
