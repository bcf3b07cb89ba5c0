//! The fast path of `parse_line`: one pass over the line, no closures, no per-key `Cow`.
//!
//! It gives exactly the event `reference_parser::parse_line_reference` gives, or `None` for whatever it
//! does not handle itself: invalid JSON (the reference names the error), keys written with
//! escapes, a repeated `payload`, Avenor lines, nesting deeper than `MAX_DEPTH`. `parse_line`
//! then falls back to the reference, so `None` is always safe; a differential test and the
//! replay tests hold the `Some` side to the reference.

use std::borrow::Cow;

use super::event::{Dialect, Event, Facts, Kind};
use super::json_scanner::{find_special, u64_of_number, unescape};
use super::timestamp::Ts;

/// Deeper values go to the reference scanner (which is iterative and has no limit).
const MAX_DEPTH: u32 = 64;

struct P<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    /// `&self.s[start..end]` where both ends are known to be at ASCII bytes (quotes, delimiters)
    /// or at the end of the line: no character-boundary checks (they cost a call per value).
    #[inline(always)]
    fn sub(&self, start: usize, end: usize) -> &'a str {
        let bytes = &self.b[start..end];
        debug_assert!(self.s.is_char_boundary(start) && self.s.is_char_boundary(end));
        // SAFETY: `self.b` is `self.s`'s bytes, and a slice of a str between two character
        // boundaries is UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    #[inline(always)]
    fn ws(&mut self) {
        self.i = skip_ws(self.b, self.i);
    }

    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    /// The string at the cursor (on its `"`): the span of its body and whether it has escapes.
    #[inline(always)]
    fn string_span(&mut self) -> Option<(usize, usize, bool)> {
        let (end, escaped) = string_end(self.b, self.i + 1)?;
        let span = (self.i + 1, end - 1, escaped);
        self.i = end;
        Some(span)
    }

    /// A key and its `:`, as a `word`; `None` for a key with escapes (the reference unescapes
    /// before matching).
    #[inline(always)]
    fn key(&mut self) -> Option<u128> {
        let (key, next) = key_at(self.b, self.i)?;
        self.i = next;
        Some(key)
    }

    /// After a member: `Some(true)` at `,` (more follow), `Some(false)` at the closing byte.
    #[inline(always)]
    fn next_member(&mut self, close: u8) -> Option<bool> {
        let c = self.peek()?;
        self.i += 1;
        if c == b',' {
            Some(true)
        } else if c == close {
            Some(false)
        } else {
            None
        }
    }

    fn string(&mut self) -> Option<Cow<'a, str>> {
        let (s, e, escaped) = self.string_span()?;
        let inner = self.sub(s, e);
        Some(if escaped {
            Cow::Owned(unescape(inner))
        } else {
            Cow::Borrowed(inner)
        })
    }

    /// Validates a number at the cursor (same grammar as the reference) and returns its text.
    #[inline(always)]
    fn number(&mut self) -> Option<&'a str> {
        let start = self.i;
        self.i = number_end(self.b, start)?;
        Some(self.sub(start, self.i))
    }

    /// Validates and skips one value.
    #[inline(always)]
    fn skip(&mut self, depth: u32) -> Option<()> {
        self.i = skip_value(self.b, self.i, depth)?;
        Some(())
    }

    /// `skip`, with strings and numbers (most values) read here rather than in a call.
    #[inline(always)]
    fn skip_inline(&mut self, depth: u32) -> Option<()> {
        self.i = match self.b.get(self.i) {
            Some(b'"') => string_end(self.b, self.i + 1)?.0,
            Some(b'-' | b'0'..=b'9') => number_end(self.b, self.i)?,
            _ => skip_value(self.b, self.i, depth)?,
        };
        Some(())
    }

    /// Skips a value and returns its text (the reference's `skip`).
    fn raw(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        self.skip(0)?;
        Some(self.sub(start, self.i))
    }

    fn opt_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'"' {
            self.string().map(Some)
        } else {
            self.skip(0).map(|_| None)
        }
    }

    #[inline(always)]
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => {
                let n = self.number()?;
                // Up to 19 digits cannot overflow; anything else takes the shared rule.
                if n.len() <= 19 && n.bytes().all(|c| c.is_ascii_digit()) {
                    Some(Some(
                        n.bytes()
                            .fold(0u64, |acc, c| acc * 10 + u64::from(c - b'0')),
                    ))
                } else {
                    Some(u64_of_number(n))
                }
            }
            _ => self.skip(0).map(|_| None),
        }
    }

    fn opt_f64(&mut self) -> Option<Option<f64>> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => Some(self.number()?.parse().ok()),
            _ => self.skip(0).map(|_| None),
        }
    }

    fn opt_bool(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.lit(b"true").map(|_| Some(true)),
            b'f' => self.lit(b"false").map(|_| Some(false)),
            _ => self.skip(0).map(|_| None),
        }
    }

    fn opt_string_array(&mut self) -> Option<Option<Vec<String>>> {
        if self.peek()? != b'[' {
            return self.skip(0).map(|_| None);
        }
        self.i += 1;
        let mut out = Vec::new();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(Some(out));
        }
        loop {
            if let Some(s) = self.opt_string()? {
                out.push(s.into_owned());
            }
            if !self.next_member(b']')? {
                return Some(Some(out));
            }
        }
    }

    /// The payload object (cursor on its `{`), read into `f` key by key like `Facts::take`.
    /// `f` holds no facts yet. Without `ALL`, only `score` and `new_iteration` are read (what
    /// a row needs), the rest validated and skipped.
    fn facts<const ALL: bool>(&mut self, f: &mut Facts, depth: u32) -> Option<()> {
        if depth == 0 {
            if let Some(end) = self.flat_facts::<ALL>(f) {
                self.i = end;
                return Some(());
            }
            *f = Facts::default();
        }
        self.facts_general::<ALL>(f, depth)
    }

    /// `facts` without the flat-object shortcut.
    fn facts_general<const ALL: bool>(&mut self, f: &mut Facts, depth: u32) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            match self.key()? {
                K_SCORE => f.score = self.opt_f64()?,
                K_NEW_ITERATION | K_TO => f.new_iteration = self.opt_u64()?,
                K_USAGE if self.peek()? == b'{' => self.facts_general::<ALL>(f, depth + 1)?,
                K_PASSED if ALL => f.passed = self.opt_bool()?,
                K_THRESHOLD if ALL => f.threshold = self.opt_f64()?,
                K_FAILED | K_FAILED_RULES if ALL => f.failed = self.opt_string_array()?,
                K_WARNINGS | K_WARN_RULES if ALL => f.warnings = self.opt_string_array()?,
                K_FAIL_COUNT if ALL => f.fail_count = self.opt_u64()?,
                K_REASON if ALL => f.reason = self.opt_string()?.map(Cow::into_owned),
                K_TOKENS_IN | K_INPUT_TOKENS if ALL => f.tokens_in = self.opt_u64()?,
                K_TOKENS_OUT | K_OUTPUT_TOKENS if ALL => f.tokens_out = self.opt_u64()?,
                _ => self.skip_inline(depth + 1)?,
            }
            if !self.next_member(b'}')? {
                return Some(());
            }
        }
    }
}

impl<'a> P<'a> {
    /// `facts` for a payload written without whitespace whose values are scalars or arrays of
    /// scalars (what aif-loop writes): keys told apart by length, then by their bytes, and each
    /// value read once. Returns the index past the closing `}`, or `None` for any other
    /// payload (then `f` holds partial facts and `facts_general` reads it from the start).
    /// Every byte is checked with `skip_flat_object`'s rules, and each fact is what
    /// `facts_general` reads for it.
    #[inline(always)]
    fn flat_facts<const ALL: bool>(&self, f: &mut Facts) -> Option<usize> {
        let b = self.b;
        let mut i = self.i + 1;
        if *b.get(i)? == b'}' {
            return Some(i + 1);
        }
        loop {
            if *b.get(i)? != b'"' {
                return None;
            }
            let (end, escaped) = string_end(b, i + 1)?;
            if escaped || *b.get(end)? != b':' {
                return None;
            }
            let key = &b[i + 1..end - 1];
            i = end + 1;
            i = match (key.len(), key) {
                (2, b"to") | (13, b"new_iteration") => self.flat_u64(i, &mut f.new_iteration)?,
                (5, b"score") => self.flat_f64(i, &mut f.score)?,
                // A nested object: `facts_general` reads it.
                (5, b"usage") if b.get(i) == Some(&b'{') => return None,
                _ if !ALL => flat_value(b, i)?,
                (9, b"tokens_in") | (12, b"input_tokens") => self.flat_u64(i, &mut f.tokens_in)?,
                (10, b"tokens_out") | (13, b"output_tokens") => {
                    self.flat_u64(i, &mut f.tokens_out)?
                }
                (10, b"fail_count") => self.flat_u64(i, &mut f.fail_count)?,
                (9, b"threshold") => self.flat_f64(i, &mut f.threshold)?,
                (6, b"passed") => match b.get(i)? {
                    b't' => {
                        f.passed = Some(true);
                        lit_end(b, i, b"true")?
                    }
                    b'f' => {
                        f.passed = Some(false);
                        lit_end(b, i, b"false")?
                    }
                    _ => {
                        f.passed = None;
                        flat_value(b, i)?
                    }
                },
                (6, b"failed") | (12, b"failed_rules") => self.flat_strings(i, &mut f.failed)?,
                (8, b"warnings") | (10, b"warn_rules") => self.flat_strings(i, &mut f.warnings)?,
                (6, b"reason") => {
                    let (value, end) = self.flat_string(i)?;
                    f.reason = value.map(Cow::into_owned);
                    end
                }
                _ => flat_value(b, i)?,
            };
            match *b.get(i)? {
                b',' => i += 1,
                b'}' => return Some(i + 1),
                _ => return None,
            }
        }
    }

    /// `opt_u64` at `i` for `flat_facts`: the index past the value.
    #[inline(always)]
    fn flat_u64(&self, i: usize, out: &mut Option<u64>) -> Option<usize> {
        let b = self.b;
        match *b.get(i)? {
            b'0'..=b'9' => {
                let len = digit_run(b, i);
                let plain = len <= 19
                    && (b[i] != b'0' || len == 1)
                    && !matches!(b.get(i + len), Some(b'.' | b'e' | b'E'));
                if plain {
                    // At most 19 digits: no overflow.
                    *out = Some(
                        b[i..i + len]
                            .iter()
                            .fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')),
                    );
                    return Some(i + len);
                }
                let end = number_end(b, i)?;
                *out = u64_of_number(self.sub(i, end));
                Some(end)
            }
            b'-' => {
                let end = number_end(b, i)?;
                *out = u64_of_number(self.sub(i, end));
                Some(end)
            }
            _ => {
                *out = None;
                flat_value(b, i)
            }
        }
    }

    /// `opt_f64` at `i` for `flat_facts`.
    #[inline(always)]
    fn flat_f64(&self, i: usize, out: &mut Option<f64>) -> Option<usize> {
        match *self.b.get(i)? {
            b'-' | b'0'..=b'9' => {
                let end = number_end(self.b, i)?;
                *out = Some(decimal(&self.b[i..end]).or_else(|| self.sub(i, end).parse().ok())?);
                Some(end)
            }
            _ => {
                *out = None;
                flat_value(self.b, i)
            }
        }
    }

    /// `opt_string` at `i` for `flat_facts`: the string, if the value is one, and its end.
    #[inline(always)]
    fn flat_string(&self, i: usize) -> Option<(Option<Cow<'a, str>>, usize)> {
        if *self.b.get(i)? != b'"' {
            return Some((None, flat_scalar(self.b, i)?));
        }
        let (end, escaped) = string_end(self.b, i + 1)?;
        let body = self.sub(i + 1, end - 1);
        let value = if escaped {
            Cow::Owned(unescape(body))
        } else {
            Cow::Borrowed(body)
        };
        Some((Some(value), end))
    }

    /// `opt_string_array` at `i` for `flat_facts`.
    #[inline(always)]
    fn flat_strings(&self, mut i: usize, out: &mut Option<Vec<String>>) -> Option<usize> {
        let b = self.b;
        if *b.get(i)? != b'[' {
            *out = None;
            return flat_scalar(b, i);
        }
        i += 1;
        let mut list = Vec::new();
        if *b.get(i)? != b']' {
            loop {
                let (value, end) = self.flat_string(i)?;
                list.extend(value.map(Cow::into_owned));
                i = end;
                match *b.get(i)? {
                    b',' => i += 1,
                    b']' => break,
                    _ => return None,
                }
            }
        }
        *out = Some(list);
        Some(i + 1)
    }
}

/// The value of a JSON number written `D.DDD` (one integer digit, at most 14 more), computed
/// exactly as `str::parse::<f64>` rounds it: the digits as an integer (below 10^15 < 2^53,
/// exact) over a power of ten (at most 10^14, exact) is one correctly rounded division. `None`
/// for other forms.
#[inline(always)]
fn decimal(n: &[u8]) -> Option<f64> {
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
fn key_at(b: &[u8], i: usize) -> Option<(u128, usize)> {
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
fn string_end(b: &[u8], mut j: usize) -> Option<(usize, bool)> {
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
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
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
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        match digit_run(b, i) {
            0 => return None,
            n => i += n,
        }
    }
    Some(i)
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// How many ASCII digits start at `start`, eight bytes a step.
#[inline(always)]
fn digit_run(b: &[u8], start: usize) -> usize {
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

/// Whether `s` holds a `.`, eight bytes a step.
#[inline(always)]
fn has_dot(s: &str) -> bool {
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
fn skip_ws(b: &[u8], mut i: usize) -> usize {
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
fn skip_value(b: &[u8], i: usize, depth: u32) -> Option<usize> {
    if b.get(i) == Some(&b'{')
        && depth + 2 < MAX_DEPTH
        && let Some(end) = skip_flat_object(b, i)
    {
        return Some(end);
    }
    skip_value_general(b, i, depth)
}

/// `skip_value` without the flat-object shortcut.
fn skip_value_general(b: &[u8], mut i: usize, depth: u32) -> Option<usize> {
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
fn skip_flat_object(b: &[u8], mut i: usize) -> Option<usize> {
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
fn flat_value(b: &[u8], mut i: usize) -> Option<usize> {
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
fn flat_scalar(b: &[u8], i: usize) -> Option<usize> {
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
fn key_end(b: &[u8], i: usize) -> Option<usize> {
    if *b.get(i)? != b'"' {
        return None;
    }
    let i = skip_ws(b, string_end(b, i + 1)?.0);
    (*b.get(i)? == b':').then_some(i + 1)
}

#[inline(always)]
fn lit_end<const N: usize>(b: &[u8], i: usize, lit: &[u8; N]) -> Option<usize> {
    let next: &[u8; N] = b.get(i..i + N)?.try_into().ok()?;
    (next == lit).then_some(i + N)
}

/// A key of up to 15 bytes as a number (its bytes little-endian, zero-padded), so that keys are
/// told apart by comparing numbers; longer keys are 0, which names no key of interest.
const fn word(k: &[u8]) -> u128 {
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

const K_EVENT: u128 = word(b"event");
const K_V: u128 = word(b"v");
const K_SEQ: u128 = word(b"seq");
const K_TS: u128 = word(b"ts");
const K_RUN_ID: u128 = word(b"run_id");
const K_SESSION_ID: u128 = word(b"session_id");
const K_ITERATION: u128 = word(b"iteration");
const K_PHASE: u128 = word(b"phase");
const K_STEP: u128 = word(b"step");
const K_STATUS: u128 = word(b"status");
const K_PAYLOAD: u128 = word(b"payload");
const K_SCORE: u128 = word(b"score");
const K_PASSED: u128 = word(b"passed");
const K_THRESHOLD: u128 = word(b"threshold");
const K_FAILED: u128 = word(b"failed");
const K_FAILED_RULES: u128 = word(b"failed_rules");
const K_WARNINGS: u128 = word(b"warnings");
const K_WARN_RULES: u128 = word(b"warn_rules");
const K_FAIL_COUNT: u128 = word(b"fail_count");
const K_REASON: u128 = word(b"reason");
const K_NEW_ITERATION: u128 = word(b"new_iteration");
const K_TO: u128 = word(b"to");
const K_TOKENS_IN: u128 = word(b"tokens_in");
const K_INPUT_TOKENS: u128 = word(b"input_tokens");
const K_TOKENS_OUT: u128 = word(b"tokens_out");
const K_OUTPUT_TOKENS: u128 = word(b"output_tokens");
const K_USAGE: u128 = word(b"usage");

impl<'a> P<'a> {
    /// Steps over `lit` if it is next, byte for byte (a fixed-size compare, inlined: no call).
    #[inline(always)]
    fn lit<const N: usize>(&mut self, lit: &[u8; N]) -> Option<()> {
        self.i = lit_end(self.b, self.i, lit)?;
        Some(())
    }

    /// The body of a string whose opening quote is just behind the cursor, when it has no
    /// escapes (and no control bytes); the cursor ends past the closing quote.
    #[inline(always)]
    fn plain(&mut self) -> Option<&'a str> {
        let start = self.i;
        let end = find_special(self.b, start);
        if *self.b.get(end)? != b'"' {
            return None;
        }
        self.i = end + 1;
        Some(self.sub(start, end))
    }

    /// A JSON integer of at most 19 digits (no sign, no fraction, no exponent).
    #[inline(always)]
    fn digits(&mut self) -> Option<u64> {
        let start = self.i;
        let len = digit_run(self.b, start);
        if len == 0 || len > 19 || (self.b[start] == b'0' && len > 1) {
            return None;
        }
        self.i = start + len;
        // At most 19 digits: no overflow.
        Some(
            self.b[start..start + len]
                .iter()
                .fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')),
        )
    }
}

/// The fixed fields of the line shape aif-loop writes, keys in its order and no whitespace:
/// `{"ts":"..","run_id":"..","seq":N,"iteration":N,"phase":"..","step":"..","event":"..",
/// "status":"..","payload":{..}}`.
struct AifHead<'a> {
    ts: &'a str,
    run_id: &'a str,
    seq: u64,
    iteration: u64,
    phase: &'a str,
    step: &'a str,
    name: &'a str,
    status: &'a str,
}

/// Reads the aif-loop shape up to the payload, leaving the cursor on the payload's `{`. Fixed
/// text is compared rather than parsed; anything else (escapes, other number forms, other keys
/// or order) returns `None` for the general path.
#[inline(always)]
fn aif_head<'a>(p: &mut P<'a>) -> Option<AifHead<'a>> {
    p.lit(b"{\"ts\":\"")?;
    let ts = p.plain()?;
    p.lit(b",\"run_id\":\"")?;
    let run_id = p.plain()?;
    p.lit(b",\"seq\":")?;
    let seq = p.digits()?;
    p.lit(b",\"iteration\":")?;
    let iteration = p.digits()?;
    p.lit(b",\"phase\":\"")?;
    let phase = p.plain()?;
    p.lit(b",\"step\":\"")?;
    let step = p.plain()?;
    p.lit(b",\"event\":\"")?;
    let name = p.plain()?;
    p.lit(b",\"status\":\"")?;
    let status = p.plain()?;
    p.lit(b",\"payload\":")?;
    if p.b.get(p.i) != Some(&b'{') || has_dot(name) {
        return None;
    }
    Some(AifHead {
        ts,
        run_id,
        seq,
        iteration,
        phase,
        step,
        name,
        status,
    })
}

/// After the payload: the closing brace and nothing but whitespace.
#[inline(always)]
fn aif_tail(p: &mut P<'_>) -> Option<()> {
    p.lit(b"}")?;
    p.ws();
    (p.i == p.b.len()).then_some(())
}

/// `parse_into` for the aif-loop shape (see `AifHead`).
#[inline(always)]
fn aif_shape<'a, const FACTS: bool>(line: &'a str, ev: &mut Event<'a>) -> Option<()> {
    let mut p = P {
        s: line,
        b: line.as_bytes(),
        i: 0,
    };
    let head = aif_head(&mut p)?;
    let start = p.i;
    if FACTS {
        p.facts::<true>(&mut ev.facts, 0)?;
    } else {
        p.skip(0)?;
    }
    ev.payload = Some(Cow::Borrowed(p.sub(start, p.i)));
    aif_tail(&mut p)?;
    ev.seq = Some(head.seq);
    ev.iteration = Some(head.iteration);
    ev.phase = Some(Cow::Borrowed(head.phase));
    ev.step = Some(Cow::Borrowed(head.step));
    ev.status = Some(Cow::Borrowed(head.status));
    ev.run_id = Some(Cow::Borrowed(head.run_id));
    ev.dialect = Dialect::AifLoop;
    if FACTS {
        ev.ts = Ts::parse_rfc3339(head.ts);
    }
    ev.kind = Kind::from_name(head.name);
    ev.name = Cow::Borrowed(head.name);
    Some(())
}

/// An aif-loop shaped line as the tally reads it: what counting needs (run, `seq`, name and
/// kind), the rest of the envelope, and the payload facts a row reads.
pub(crate) struct Brief<'a> {
    pub run_id: &'a str,
    pub seq: u64,
    pub name: &'a str,
    pub kind: Kind,
    pub ts: &'a str,
    pub iteration: u64,
    pub phase: &'a str,
    pub facts: RowFacts,
}

/// The payload facts a row reads (`Facts::score`, `Facts::new_iteration`).
#[derive(Default, Clone, Copy)]
pub(crate) struct RowFacts {
    pub score: Option<f64>,
    pub new_iteration: Option<u64>,
}

/// The `Brief` of an aif-loop shaped line, its payload validated: exactly the dialect (aif-loop),
/// run, `seq`, name and envelope `parse_into` gives the line, with no event built, and the
/// payload's `RowFacts` when `want` says so of its kind (else none). `None` for any other line
/// (the caller then takes `parse_into`).
pub(crate) fn aif_brief(line: &str, want: impl Fn(Kind) -> bool) -> Option<Brief<'_>> {
    let mut p = P {
        s: line,
        b: line.as_bytes(),
        i: 0,
    };
    let head = aif_head(&mut p)?;
    let kind = Kind::from_name(head.name);
    let mut facts = RowFacts::default();
    if want(kind) {
        let mut f = Facts::default();
        p.facts::<false>(&mut f, 0)?;
        facts = RowFacts {
            score: f.score,
            new_iteration: f.new_iteration,
        };
    } else {
        p.skip(0)?;
    }
    aif_tail(&mut p)?;
    Some(Brief {
        run_id: head.run_id,
        seq: head.seq,
        name: head.name,
        kind,
        ts: head.ts,
        iteration: head.iteration,
        phase: head.phase,
        facts,
    })
}

/// `parse_line` for the lines it can read in one pass; `None` sends the line to the reference.
pub(crate) fn parse_line_fast(line: &str) -> Option<Event<'_>> {
    parse_fast::<true>(line)
}

/// `parse_line_fast` for a reader that needs only the envelope (dialect, name, kind, run,
/// `seq`, `iteration`, `phase`, `step`, `status`, `payload` text): the payload is validated
/// but its facts are not read, and `ts` is left `None`. (Replay calls `parse_into::<false>`;
/// this is its form for the tests.)
#[cfg(test)]
pub(crate) fn parse_envelope_fast(line: &str) -> Option<Event<'_>> {
    parse_fast::<false>(line)
}

#[inline(always)]
fn parse_fast<const FACTS: bool>(line: &str) -> Option<Event<'_>> {
    let mut ev = Event::new(Kind::Other);
    parse_into::<FACTS>(line, &mut ev)?;
    Some(ev)
}

/// `parse_fast` into a fresh `Event::new(Kind::Other)` (the event is large: built in place, not
/// returned through every layer). After `None` the event holds partial values.
#[inline(always)]
pub(crate) fn parse_into<'a, const FACTS: bool>(line: &'a str, ev: &mut Event<'a>) -> Option<()> {
    if aif_shape::<FACTS>(line, ev).is_some() {
        return Some(());
    }
    *ev = Event::new(Kind::Other);
    let mut p = P {
        s: line,
        b: line.as_bytes(),
        i: 0,
    };
    if p.peek()? != b'{' {
        return None;
    }
    p.i += 1;
    let mut name: Option<Cow<'_, str>> = None;
    let mut run_id: Option<Cow<'_, str>> = None;
    let mut session: Option<Cow<'_, str>> = None;
    let mut v = false;
    // The timestamp's text: a string's body (what `Ts::parse_json` reads of a quoted value), or
    // any other value whole.
    let mut ts_text: Option<(&str, bool)> = None;
    let mut payload_seen = false;
    if p.peek()? == b'}' {
        // `{}` has no event: the reference says so.
        return None;
    }
    loop {
        match p.key()? {
            K_EVENT => name = p.opt_string()?,
            K_V => {
                p.opt_u64()?;
                v = true;
            }
            K_SEQ => ev.seq = p.opt_u64()?,
            K_TS => {
                ts_text = Some(if p.peek()? == b'"' {
                    let (s, e, _) = p.string_span()?;
                    (p.sub(s, e), true)
                } else {
                    (p.raw()?, false)
                })
            }
            K_RUN_ID if run_id.is_none() => run_id = p.opt_string()?,
            K_SESSION_ID if session.is_none() => session = p.opt_string()?,
            K_ITERATION => ev.iteration = p.opt_u64()?,
            K_PHASE => ev.phase = p.opt_string()?,
            K_STEP => ev.step = p.opt_string()?,
            K_STATUS => ev.status = p.opt_string()?,
            K_PAYLOAD => {
                if payload_seen {
                    return None;
                }
                payload_seen = true;
                // A value's text has no surrounding whitespace: what the reference trims.
                let start = {
                    p.ws();
                    p.i
                };
                if FACTS && p.peek()? == b'{' {
                    p.facts::<true>(&mut ev.facts, 0)?;
                } else {
                    p.skip(0)?;
                }
                let raw = p.sub(start, p.i);
                ev.payload = (raw != "null").then_some(Cow::Borrowed(raw));
            }
            _ => p.skip_inline(0)?,
        }
        if !p.next_member(b'}')? {
            break;
        }
    }
    p.ws();
    if p.i != p.b.len() {
        return None;
    }
    let name = name?;
    if !v && name.bytes().any(|c| c == b'.') {
        return None;
    }
    ev.run_id = run_id.or(session);
    ev.dialect = if v { Dialect::Native } else { Dialect::AifLoop };
    if FACTS {
        ev.ts = match ts_text {
            Some((body, true)) => Ts::parse_rfc3339(body),
            Some((raw, false)) => Ts::parse_json(raw),
            None => None,
        };
    }
    ev.kind = Kind::from_name(&name);
    ev.name = name;
    Some(())
}

/// `reference_parser::run_key` over raw bytes, for lines whose run comes early and plainly: the first
/// `run_id` string, or `Some(None)` for an object without `run_id`. `None` (session ids, escapes,
/// containers before the run id, anything invalid) sends the line to `run_key`. The line need
/// not be UTF-8: a line that is not is reported as damaged by whichever shard gets it.
pub(crate) fn run_key_fast(line: &[u8]) -> Option<Option<&[u8]>> {
    let b = line;
    // aif-loop's shape, `{"ts":"..","run_id":"..`: two literals and two string scans.
    if let Some(rest) = b.strip_prefix(b"{\"ts\":\"") {
        let ts_end = find_special(rest, 0);
        if rest.get(ts_end) == Some(&b'"')
            && let Some(run) = rest[ts_end + 1..].strip_prefix(b",\"run_id\":\"")
        {
            let end = find_special(run, 0);
            if run.get(end) == Some(&b'"') {
                return Some(Some(&run[..end]));
            }
        }
    }
    let mut i = 0;
    let ws = |i: &mut usize| *i = skip_ws(b, *i);
    // A plain string at `i` (on its `"`): its body, with `i` past the closing quote.
    let plain = |i: &mut usize| -> Option<&[u8]> {
        let start = *i + 1;
        let end = find_special(b, start);
        if *b.get(end)? != b'"' {
            return None;
        }
        *i = end + 1;
        Some(&b[start..end])
    };
    ws(&mut i);
    if *b.get(i)? != b'{' {
        return None;
    }
    i += 1;
    ws(&mut i);
    if *b.get(i)? == b'}' {
        return Some(None);
    }
    loop {
        ws(&mut i);
        if *b.get(i)? != b'"' {
            return None;
        }
        let key = plain(&mut i)?;
        ws(&mut i);
        if *b.get(i)? != b':' {
            return None;
        }
        i += 1;
        ws(&mut i);
        match (key, *b.get(i)?) {
            (b"session_id", _) => return None,
            (b"run_id", b'"') => return plain(&mut i).map(Some),
            (_, b'"') => {
                plain(&mut i)?;
            }
            (_, b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                // Numbers and literals end at the next delimiter; anything odd there is left to
                // the reference.
                while let Some(c) = b.get(i) {
                    if matches!(c, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    if !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'a'..=b'z') {
                        return None;
                    }
                    i += 1;
                }
            }
            _ => return None,
        }
        ws(&mut i);
        match *b.get(i)? {
            b',' => i += 1,
            b'}' => return Some(None),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::reference_parser::{parse_line_reference, run_key};
    use proptest::prelude::*;

    /// The contract: whatever the fast path returns, the reference returns too; the envelope
    /// path gives the same event but for `ts` and the facts, which it does not read.
    fn agrees(line: &str) -> bool {
        let full_ok = parse_line_fast(line).is_none_or(|ev| parse_line_reference(line) == Ok(ev));
        let envelope_ok = parse_envelope_fast(line).is_none_or(|mut env| {
            let Ok(reference) = parse_line_reference(line) else {
                return false;
            };
            env.ts = reference.ts;
            env.facts = reference.facts.clone();
            env == reference
        });
        full_ok && envelope_ok
    }

    const LINES: &[&str] = &[
        r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"billing-svc-20260218-120041-000000","seq":4,"iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","status":"ok","payload":{"score":0.35,"passed":false,"failed_rules":["r8","r10"],"duration_ms":13991,"tokens_in":2790,"tokens_out":517}}"#,
        r#"{"v":1,"seq":9,"ts":"2024-05-06T12:53:20.000Z","run_id":"a3f9","event":"phase_finished","iteration":2,"step":"test","payload":{"kind":"loop","index":0,"stop_reason":"end_turn","marker":{"directive":"abort","label":"stuck"}}}"#,
        r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"b","seq":0,"iteration":10,"phase":"A","step":"S","event":"x.y","status":"ok","payload":{"tokens_in":1}} "#,
        r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"b","seq":01,"iteration":1,"phase":"A","step":"S","event":"e","status":"ok","payload":{}}"#,
        r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"b\u00e9","seq":1,"iteration":1,"phase":"A","step":"S","event":"e","status":"ok","payload":{"to":3}}"#,
        r#"{"ts":"x","run_id":"b","seq":1,"iteration":99999999999999999999,"phase":"A","step":"S","event":"e","status":"ok","payload":{}}"#,
        r#"{"ts":"x","run_id":"b","seq":1,"iteration":1,"phase":"A","step":"S","event":"e","status":"ok","payload":{}}}"#,
        r#"{"ts":"2026-02-18T12:01:06.364Z","run_id":"r","seq":5,"event":"critique_done","payload":{"notes":"Missing validation on \"title\" field\nsee rule r4 \u00e9","usage":{"input_tokens":5,"output_tokens":7,"usage":{"score":1}}}}"#,
        r#" { "event" : "stopped" , "run_id" : 1 , "run_id" : "b\u00e9" , "session_id":"s", "payload" : null , "seq": -0, "iteration": 3.0 } "#,
        r#"{"event":"stopped","payload":{"reason":"user_stop - x","failed":[1,"a",null,["b"]],"warnings":"no","fail_count":1e2,"to":18446744073709551616,"tokens_in":-1,"score":1e400,"passed":"yes","threshold":true}}"#,
        r#"{"event":"x","session_id":"ses","ts":1715000000000,"status":["a"],"phase":{"a":[]}}"#,
        r#"{"event":"avenor.phase.end","run_id":"a"}"#,
        r#"{"v":"1","event":"a.b","ts":"bad"}"#,
        r#"{"event":"e","payload":[1,2],"payload":{}}"#,
        r#"{"ev\u0065nt":"x"}"#,
        r#"{"event":"x"} x"#,
        r#"{"event":"x",}"#,
        r#"{"event":"x","a":[1,]}"#,
        r#"{"event":"x","a":01}"#,
        r#"{"event":"x","a":"\x"}"#,
        r#"{"event":"x","a":"\u12"}"#,
        r#"{"event":nul}"#,
        r#"{"a":1}"#,
        r#"{}"#,
        r#"[1]"#,
        r#""x""#,
        // What the runner writes for its decisions.
        r##"{"v":1,"seq":28,"ts":"2026-11-21T08:45:55.815Z","run_id":"never-green","event":"evaluation_done","iteration":3,"phase":"A","step":"observe","payload":{"active_rule_count":2,"decision":{"action":"retry","feedback":"[fail] parses-months: check exited with code 1: FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)"},"failed":["parses-months"],"passed":false,"passed_rule_count":1,"rule_results":[{"id":"parses-months","message":"check exited with code 1: FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)","passed":false,"phase":"A","severity":"fail","weight":2.0},{"id":"has-notes","passed":true,"phase":"A","severity":"warn","weight":1.0}],"score":0.333333,"source":"checks","threshold":0.8,"warnings":[]}}"##,
        r##"{"v":1,"seq":29,"ts":"2026-11-21T08:45:55.816Z","run_id":"never-green","event":"transition","iteration":3,"step":"observe","payload":{"end":{"detail":"repeated_failure: iterations 1, 2, 3; scores 0.333, 0.333, 0.333; rules parses-months; seqs 8, 18, 28","reason":"stagnation"},"feedback":"[fail] parses-months: check exited with code 1: FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)","from":"observe","index":2,"kind":"loop","observed":true,"outcome":{"blocked":false,"goal_met":false,"passed":false,"tries":3},"source":"stagnation"}}"##,
        r##"{"v":1,"seq":11,"ts":"2026-11-21T08:19:41.779Z","run_id":"r","event":"escalated","iteration":2,"step":"observe","payload":{"attempts_summary":["2 observation(s), the last one blocked"],"feedback":"","question":"Which format?","report":"escalation.md","trigger":"ask_a_human"}}"##,
    ];

    #[test]
    fn fast_path_agrees_with_the_reference() {
        for l in LINES {
            assert!(agrees(l), "{l}");
        }
        // The common shapes are taken by the fast path, not left to the fallback.
        assert!(parse_line_fast(LINES[0]).is_some());
        assert!(parse_line_fast(LINES[1]).is_some());
        for l in &LINES[7..10] {
            assert!(parse_line_fast(l).is_some(), "{l}");
        }
        // The aif-loop shape is read by `aif_shape`; its near misses by the general path.
        let mut ev = Event::new(Kind::Other);
        assert!(aif_shape::<true>(LINES[0], &mut ev).is_some());
        assert!(aif_shape::<true>(LINES[2], &mut ev).is_none());
        assert!(parse_line_fast(LINES[4]).is_some());
        for l in LINES {
            assert_eq!(
                parse_line_fast(l).is_some(),
                parse_envelope_fast(l).is_some(),
                "{l}"
            );
        }
        let deep = format!(
            r#"{{"event":"x","a":{}1{}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        assert!(agrees(&deep));
    }

    /// Where the fast run key answers, it is `run_key`'s answer (for UTF-8 lines).
    fn key_agrees(line: &str) -> bool {
        match run_key_fast(line.as_bytes()) {
            Some(k) => match run_key(line) {
                Ok(r) => r.as_deref().map(str::as_bytes) == k,
                // The line is damaged: parse_line rejects it wherever it is sent.
                Err(_) => parse_line_reference(line).is_err(),
            },
            None => true,
        }
    }

    #[test]
    fn fast_run_key_agrees_with_run_key() {
        for l in LINES {
            assert!(key_agrees(l), "{l}");
        }
        assert_eq!(
            run_key_fast(LINES[0].as_bytes()),
            Some(Some(&b"billing-svc-20260218-120041-000000"[..]))
        );
        assert_eq!(
            run_key_fast(br#"{"event":"x","n":1.5e3,"b":true}"#),
            Some(None)
        );
        assert_eq!(run_key_fast(br#"{"session_id":"s","run_id":"r"}"#), None);
    }

    /// A JSON value of any shape, as text.
    fn json_value() -> impl Strategy<Value = String> {
        let leaf = prop::sample::select(vec![
            "0",
            "-1",
            "2.5e-3",
            "1E+2",
            "true",
            "false",
            "null",
            "\"\"",
            "\"a b\"",
            "\"\\u00e9\\n\"",
            "\"\u{e9}\"",
        ])
        .prop_map(str::to_string);
        leaf.prop_recursive(6, 48, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                (prop::collection::vec(inner, 0..4), any::<bool>()).prop_map(|(v, compact)| {
                    // Written compact (what `skip_flat_object` takes) or spaced out.
                    let (colon, comma, pad) = if compact {
                        (":", ",", "")
                    } else {
                        (" : ", " ,", " ")
                    };
                    let members: Vec<String> = v
                        .iter()
                        .enumerate()
                        .map(|(k, x)| format!("\"k{k}\"{colon}{x}"))
                        .collect();
                    format!("{{{pad}{}{pad}}}", members.join(comma))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// `skip_value` takes every valid value whole, and whatever it takes (even after a
        /// byte is changed) serde_json takes too.
        #[test]
        fn skip_value_validates_like_serde_json(v in json_value(), at in any::<prop::sample::Index>(),
                byte in prop::sample::select(b"{}[],:\"\\ 0-.eEtfnu1a\x01".to_vec()), mutate in any::<bool>()) {
            prop_assert_eq!(skip_value(v.as_bytes(), 0, 0), Some(v.len()), "{}", v);
            let mut b = v.into_bytes();
            if mutate {
                let i = at.index(b.len());
                b[i] = byte;
            }
            if skip_value(&b, 0, 0) == Some(b.len()) {
                prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&b).is_ok(),
                    "took {:?}", String::from_utf8_lossy(&b));
            }
            // The flat-object shortcut takes nothing the general reader would not, and ends
            // where it does.
            if b.first() == Some(&b'{') && let Some(end) = skip_flat_object(&b, 0) {
                prop_assert_eq!(Some(end), skip_value_general(&b, 0, 0), "{:?}", String::from_utf8_lossy(&b));
            }
        }
    }

    /// A payload value of a kind `flat_facts` reads, or one it leaves to `facts_general`.
    fn fact_value() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "0",
            "7",
            "01",
            "-3",
            "1.5",
            "1e2",
            "0.35",
            "0.333333",
            "3.14159265358979",
            "9.999999999999999",
            "12345678901234567890",
            "18446744073709551615",
            "\"x\"",
            "\"a\\nb\\u00e9\"",
            "true",
            "false",
            "tru",
            "null",
            "[]",
            "[\"r1\",\"r2\"]",
            "[\"a\\u00e9\",1,null]",
            "[[1]]",
            "[\"r1\" ]",
            "{\"input_tokens\":3}",
            "{}",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever payload `flat_facts` takes, it ends where `facts_general` does with the same
        /// facts; `facts` (shortcut first) always answers as `facts_general` does; and reading
        /// only a row's facts (`ALL` false) accepts the same payloads with the same two facts.
        #[test]
        fn flat_facts_read_what_the_general_reader_reads(
            members in prop::collection::vec((prop::sample::select(vec![
                "score", "passed", "threshold", "failed", "failed_rules", "warnings", "warn_rules",
                "fail_count", "reason", "new_iteration", "to", "tokens_in", "input_tokens",
                "tokens_out", "output_tokens", "usage", "duration_ms", "path", "t\\u006f"]),
                fact_value()), 0..7),
            spaced in any::<bool>()) {
            let sep = if spaced { ", " } else { "," };
            let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let text = format!("{{{}}}", body.join(sep));
            let p = |f: &mut Facts, general: bool| {
                let mut p = P { s: &text, b: text.as_bytes(), i: 0 };
                let r = if general { p.facts_general::<true>(f, 0) } else { p.facts::<true>(f, 0) };
                r.map(|()| p.i)
            };
            let (mut general, mut shortcut) = (Facts::default(), Facts::default());
            let end = p(&mut general, true);
            prop_assert_eq!(p(&mut shortcut, false), end, "{}", text);
            if end.is_some() {
                prop_assert_eq!(&shortcut, &general, "{}", text);
            }
            let mut row = Facts::default();
            let mut rp = P { s: &text, b: text.as_bytes(), i: 0 };
            let row_end = rp.facts::<false>(&mut row, 0).map(|()| rp.i);
            prop_assert_eq!(row_end, end, "{}", text);
            if end.is_some() {
                prop_assert_eq!((row.score, row.new_iteration), (general.score, general.new_iteration), "{}", text);
            }
            let mut flat = Facts::default();
            let reader = P { s: &text, b: text.as_bytes(), i: 0 };
            if let Some(flat_end) = reader.flat_facts::<true>(&mut flat) {
                prop_assert_eq!(Some(flat_end), end, "{}", text);
                prop_assert_eq!(&flat, &general, "{}", text);
            }
        }

        /// `decimal` gives `str::parse`'s value, bit for bit, where it answers.
        #[test]
        fn decimal_rounds_like_parse(int in 0u8..10, frac in "[0-9]{1,16}") {
            let text = format!("{int}.{frac}");
            let parsed: f64 = text.parse().unwrap();
            match decimal(text.as_bytes()) {
                Some(v) => prop_assert_eq!(v.to_bits(), parsed.to_bits(), "{}", text),
                None => prop_assert!(frac.len() > 14),
            }
        }
    }

    #[test]
    fn the_usual_payload_takes_the_flat_path() {
        let text = r#"{"score":0.35,"passed":false,"failed_rules":["r8","r10"],"duration_ms":13991,"tokens_in":2790,"tokens_out":517}"#;
        let mut f = Facts::default();
        let p = P {
            s: text,
            b: text.as_bytes(),
            i: 0,
        };
        assert_eq!(p.flat_facts::<true>(&mut f), Some(text.len()));
        assert_eq!(f.score, Some(0.35));
        assert_eq!(f.failed, Some(vec!["r8".to_string(), "r10".to_string()]));
        assert_eq!(
            (f.tokens_in, f.tokens_out, f.passed),
            (Some(2790), Some(517), Some(false))
        );
    }

    proptest! {
        #[test]
        fn digit_run_and_has_dot_follow_their_definitions(b in prop::collection::vec(
            prop::sample::select(b"0123456789./:\x00\x7f\x80\xb9\xba\xff a".to_vec()), 0..40),
            start in any::<prop::sample::Index>()) {
            let start = start.index(b.len() + 1);
            let want = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
            prop_assert_eq!(digit_run(&b, start), want);
            let s = String::from_utf8_lossy(&b);
            prop_assert_eq!(has_dot(&s), s.contains('.'));
        }
    }

    proptest! {
        #[test]
        fn mutated_lines_agree(which in 0..LINES.len(), at in any::<prop::sample::Index>(),
                               byte in prop::sample::select(b"{}[],:\"\\ 0-.eEtfnu1a\x01\x7f".to_vec()),
                               insert in any::<bool>()) {
            let mut s = LINES[which].as_bytes().to_vec();
            let i = at.index(s.len() + 1);
            if insert || i == s.len() {
                s.insert(i, byte);
            } else {
                s[i] = byte;
            }
            if let Ok(s) = String::from_utf8(s) {
                prop_assert!(agrees(&s), "disagree on {:?}", s);
                prop_assert!(key_agrees(&s), "run keys disagree on {:?}", s);
            }
        }

        #[test]
        fn generated_lines_agree(keys in prop::collection::vec(prop::sample::select(vec![
                "event", "v", "seq", "ts", "run_id", "session_id", "iteration", "phase", "step",
                "status", "payload", "other"]), 0..8),
                vals in prop::collection::vec(prop::sample::select(vec![
                "\"evaluation_done\"", "\"a.b\"", "1", "-2", "3.5", "1e3", "null", "true", "false",
                "[\"r1\",2]", "{\"score\":0.5,\"failed\":[\"x\"],\"usage\":{\"input_tokens\":3}}",
                "\"2026-02-18T12:01:04.798Z\"", "\"t\\u00e9\\n\"", "{}", "[]"]), 8)) {
            let body: Vec<String> = keys.iter().zip(&vals).map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let line = format!("{{{}}}", body.join(","));
            prop_assert!(agrees(&line), "disagree on {}", line);
            prop_assert!(key_agrees(&line), "run keys disagree on {}", line);
        }
    }
}
