//! Byte-level scanning for the single pass: string, number and whitespace ends, digit runs
//! eight bytes a step, and validating a value without reading it.

use crate::decode::json_scanner::find_special;

/// Deeper values go to the reference scanner (which is iterative and has no limit).
pub(super) const MAX_DEPTH: u32 = 64;

/// The value of a JSON number written `D.DDD` (one integer digit, at most 14 more), computed
/// exactly as `str::parse::<f64>` rounds it: the digits as an integer (below 10^15 < 2^53,
/// exact) over a power of ten (at most 10^14, exact) is one correctly rounded division. `None`
/// for other forms.
#[inline(always)]
pub(super) fn decimal(n: &[u8]) -> Option<f64> {
    const POW10: [f64; 15] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
    ];
    let [int @ b'0'..=b'9', b'.', frac @ ..] = n else {
        return None;
    };
    if frac.is_empty() || frac.len() > 14 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = frac
        .iter()
        .fold(u64::from(int - b'0'), |m, &c| m * 10 + u64::from(c - b'0'));
    Some(digits as f64 / POW10[frac.len()])
}

/// The key at `i` (after any whitespace) and its `:`, as a `word`, and the index past the colon;
/// `None` for a key with escapes (the reference unescapes before matching).
#[inline(always)]
pub(super) fn key_at(b: &[u8], i: usize) -> Option<(u128, usize)> {
    let i = skip_ws(b, i);
    if *b.get(i)? != b'"' {
        return None;
    }
    let (end, escaped) = string_end(b, i + 1)?;
    let colon = skip_ws(b, end);
    if escaped || *b.get(colon)? != b':' {
        return None;
    }
    let (s, e) = (i + 1, end - 1);
    let len = e - s;
    let key = match b.get(s..s + 16) {
        // The sixteen bytes from the key's start, cut to its length: one load, no copy.
        Some(block) if len < 16 => {
            let all = u128::from_le_bytes(block.try_into().unwrap_or([0; 16]));
            all & ((1u128 << (8 * len)) - 1)
        }
        _ => word(&b[s..e]),
    };
    Some((key, colon + 1))
}

/// The end (just past the closing quote) of the string whose body starts at `j`, and whether it
/// has escapes; `None` for a bad escape, a control byte or no closing quote.
#[inline(always)]
pub(super) fn string_end(b: &[u8], mut j: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        j = find_special(b, j);
        match *b.get(j)? {
            b'"' => return Some((j + 1, escaped)),
            b'\\' => {
                escaped = true;
                match *b.get(j + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                    b'u' => {
                        let hex = b.get(j + 2..j + 6)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        j += 6;
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
}

/// The end of the number at `i` (the reference's grammar).
#[inline(always)]
pub(super) fn number_end(b: &[u8], start: usize) -> Option<usize> {
    let (end, exponent) = number_end_unchecked(b, start)?;
    // Beyond f64: the reference parser names the error.
    (!crate::decode::json_scanner::out_of_range(&b[start..end], exponent)).then_some(end)
}

/// The end of the number at `i`, and whether it has an exponent.
#[inline(always)]
fn number_end_unchecked(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i += digit_run(b, i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        match digit_run(b, i) {
            0 => return None,
            n => i += n,
        }
    }
    let exponent = matches!(b.get(i), Some(b'e' | b'E'));
    if exponent {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        match digit_run(b, i) {
            0 => return None,
            n => i += n,
        }
    }
    Some((i, exponent))
}

pub(super) const ONES: u64 = 0x0101_0101_0101_0101;

/// How many ASCII digits start at `start`, eight bytes a step.
#[inline(always)]
pub(super) fn digit_run(b: &[u8], start: usize) -> usize {
    let mut i = start;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        // Per byte, the high bit ends up set where the byte is not a digit: below b'0' the
        // subtraction borrows, above b'9' the addition reaches 0x80 (or carries out). Borrows and
        // carries start only at such bytes and move up, so the lowest flag is exact.
        let not_digit = (x.wrapping_sub(ONES * 0x30) | x.wrapping_add(ONES * 0x46)) & (ONES * 0x80);
        if not_digit != 0 {
            return i - start + (not_digit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i - start
}

/// The digits starting at `i` when one to seven of them are followed by another byte among the
/// eight at `i`: their value and count, the eight bytes read as one word and combined in three
/// multiplies (two digits, then four, then eight). `None` otherwise (fewer than eight bytes
/// left, eight digits, no digit at `i`).
#[inline(always)]
pub(super) fn short_digits(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let x = u64::from_le_bytes(*b.get(i..)?.first_chunk::<8>()?);
    // As in `digit_run`: the lowest flag is the first byte that is not a digit.
    let not_digit = (x.wrapping_sub(ONES * 0x30) | x.wrapping_add(ONES * 0x46)) & (ONES * 0x80);
    let len = (not_digit.trailing_zeros() / 8) as usize;
    if !(1..8).contains(&len) {
        return None;
    }
    // The digits' values in the high bytes, zeros (leading zeros) below: the first digit read is
    // the lowest byte, the most significant of each pair.
    let d = (x & (ONES * 0x0F)) << (64 - 8 * len);
    let d = (d.wrapping_mul(10 << 8 | 1) >> 8) & 0x00FF_00FF_00FF_00FF;
    let d = (d.wrapping_mul(100 << 16 | 1) >> 16) & 0x0000_FFFF_0000_FFFF;
    Some((d.wrapping_mul(10_000 << 32 | 1) >> 32, len))
}

/// Whether `s` holds a `.`, eight bytes a step.
#[inline(always)]
pub(super) fn has_dot(s: &str) -> bool {
    let b = s.as_bytes();
    let mut chunks = b.chunks_exact(8);
    for chunk in &mut chunks {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])) ^ (ONES * u64::from(b'.'));
        if x.wrapping_sub(ONES) & !x & (ONES * 0x80) != 0 {
            return true;
        }
    }
    chunks.remainder().contains(&b'.')
}

#[inline(always)]
pub(super) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Validates the value at `i` (after any whitespace) and returns its end. Iterative, with the
/// open containers as bits of one word (1 = object): no call per value, the cursor in a
/// register. `depth` containers are open around it already; past `MAX_DEPTH` in all it
/// returns `None` (the reference takes such lines).
#[inline]
pub(super) fn skip_value(b: &[u8], i: usize, depth: u32) -> Option<usize> {
    if b.get(i) == Some(&b'{')
        && depth + 2 < MAX_DEPTH
        && let Some(end) = skip_flat_object(b, i)
    {
        return Some(end);
    }
    skip_value_general(b, i, depth)
}

/// `skip_value` without the flat-object shortcut.
pub(super) fn skip_value_general(b: &[u8], mut i: usize, depth: u32) -> Option<usize> {
    let mut open: u64 = 0;
    let mut level = depth;
    'value: loop {
        i = skip_ws(b, i);
        match *b.get(i)? {
            b'"' => i = string_end(b, i + 1)?.0,
            b'-' | b'0'..=b'9' => i = number_end(b, i)?,
            c @ (b'{' | b'[') => {
                if level >= MAX_DEPTH {
                    return None;
                }
                let object = c == b'{';
                let close = if object { b'}' } else { b']' };
                i = skip_ws(b, i + 1);
                if *b.get(i)? == close {
                    i += 1;
                } else {
                    open = (open << 1) | u64::from(object);
                    level += 1;
                    if object {
                        i = key_end(b, i)?;
                    }
                    continue 'value;
                }
            }
            b't' => i = lit_end(b, i, b"true")?,
            b'f' => i = lit_end(b, i, b"false")?,
            b'n' => i = lit_end(b, i, b"null")?,
            _ => return None,
        }
        // After a value: close containers until one goes on with `,`.
        loop {
            if level == depth {
                return Some(i);
            }
            i = skip_ws(b, i);
            let object = open & 1 == 1;
            match (*b.get(i)?, object) {
                (b',', _) => {
                    i = skip_ws(b, i + 1);
                    if object {
                        i = key_end(b, i)?;
                    }
                    continue 'value;
                }
                (b'}', true) | (b']', false) => {
                    i += 1;
                    open >>= 1;
                    level -= 1;
                }
                _ => return None,
            }
        }
    }
}

/// `skip_value` for the usual payload: an object written without whitespace whose values are
/// strings, numbers, literals or arrays of those (cursor on its `{`). `None` for anything else,
/// valid or not (`skip_value` then reads it the general way); when it takes a value, it is the
/// value `skip_value` takes: every byte is checked with the same rules.
#[inline(always)]
pub(super) fn skip_flat_object(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    if *b.get(i)? == b'}' {
        return Some(i + 1);
    }
    loop {
        if *b.get(i)? != b'"' {
            return None;
        }
        let end = string_end(b, i + 1)?.0;
        if *b.get(end)? != b':' {
            return None;
        }
        i = flat_value(b, end + 1)?;
        match *b.get(i)? {
            b',' => i += 1,
            b'}' => return Some(i + 1),
            _ => return None,
        }
    }
}

/// A string, number, literal or compact array of those at `i`, for `skip_flat_object`.
#[inline(always)]
pub(super) fn flat_value(b: &[u8], mut i: usize) -> Option<usize> {
    if *b.get(i)? != b'[' {
        return flat_scalar(b, i);
    }
    i += 1;
    if *b.get(i)? == b']' {
        return Some(i + 1);
    }
    loop {
        i = flat_scalar(b, i)?;
        match *b.get(i)? {
            b',' => i += 1,
            b']' => return Some(i + 1),
            _ => return None,
        }
    }
}

#[inline(always)]
pub(super) fn flat_scalar(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => Some(string_end(b, i + 1)?.0),
        b'-' | b'0'..=b'9' => number_end(b, i),
        b't' => lit_end(b, i, b"true"),
        b'f' => lit_end(b, i, b"false"),
        b'n' => lit_end(b, i, b"null"),
        _ => None,
    }
}

/// The key at `i` (on its `"`) and its `:`: the index just past the colon.
#[inline(always)]
pub(super) fn key_end(b: &[u8], i: usize) -> Option<usize> {
    if *b.get(i)? != b'"' {
        return None;
    }
    let i = skip_ws(b, string_end(b, i + 1)?.0);
    (*b.get(i)? == b':').then_some(i + 1)
}

#[inline(always)]
pub(super) fn lit_end<const N: usize>(b: &[u8], i: usize, lit: &[u8; N]) -> Option<usize> {
    let next: &[u8; N] = b.get(i..i + N)?.try_into().ok()?;
    (next == lit).then_some(i + N)
}

/// A key of up to 15 bytes as a number (its bytes little-endian, zero-padded), so that keys are
/// told apart by comparing numbers; longer keys are 0, which names no key of interest.
pub(super) const fn word(k: &[u8]) -> u128 {
    if k.len() >= 16 {
        return 0;
    }
    let mut w = 0u128;
    let mut i = k.len();
    while i > 0 {
        i -= 1;
        w = (w << 8) | k[i] as u128;
    }
    w
}
