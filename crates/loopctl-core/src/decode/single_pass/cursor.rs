//! The single pass's cursor over one line: JSON values read or skipped in place, keys
//! matched as numbers (`word`), the payload's `Facts` picked out as they go by.

use std::borrow::Cow;

use super::bytes::*;
use crate::decode::event::{Facts, is_usage_extra};
use crate::decode::json_scanner::{find_special, u64_of_number, unescape};

pub(super) struct P<'a> {
    pub(super) s: &'a str,
    pub(super) b: &'a [u8],
    pub(super) i: usize,
}

impl<'a> P<'a> {
    /// `&self.s[start..end]` where both ends are known to be at ASCII bytes (quotes, delimiters)
    /// or at the end of the line: no character-boundary checks (they cost a call per value).
    #[inline(always)]
    pub(super) fn sub(&self, start: usize, end: usize) -> &'a str {
        let bytes = &self.b[start..end];
        debug_assert!(self.s.is_char_boundary(start) && self.s.is_char_boundary(end));
        // SAFETY: `self.b` is `self.s`'s bytes, and a slice of a str between two character
        // boundaries is UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    #[inline(always)]
    pub(super) fn ws(&mut self) {
        self.i = skip_ws(self.b, self.i);
    }

    #[inline(always)]
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    /// The string at the cursor (on its `"`): the span of its body and whether it has escapes.
    #[inline(always)]
    pub(super) fn string_span(&mut self) -> Option<(usize, usize, bool)> {
        let (end, escaped) = string_end(self.b, self.i + 1)?;
        let span = (self.i + 1, end - 1, escaped);
        self.i = end;
        Some(span)
    }

    /// A key and its `:`, as a `word`; `None` for a key with escapes (the reference unescapes
    /// before matching).
    #[inline(always)]
    /// The text of the key whose string starts at or after `at` (whitespace first), for keys
    /// `key` reads as word 0 (sixteen bytes and more).
    pub(super) fn key_text_at(&self, at: usize) -> Option<&'a [u8]> {
        let i = skip_ws(self.b, at);
        let (end, _) = string_end(self.b, i + 1)?;
        self.b.get(i + 1..end - 1)
    }

    pub(super) fn key(&mut self) -> Option<u128> {
        let (key, next) = key_at(self.b, self.i)?;
        self.i = next;
        Some(key)
    }

    /// After a member: `Some(true)` at `,` (more follow), `Some(false)` at the closing byte.
    #[inline(always)]
    pub(super) fn next_member(&mut self, close: u8) -> Option<bool> {
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

    pub(super) fn string(&mut self) -> Option<Cow<'a, str>> {
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
    pub(super) fn number(&mut self) -> Option<&'a str> {
        let start = self.i;
        self.i = number_end(self.b, start)?;
        Some(self.sub(start, self.i))
    }

    /// Validates and skips one value.
    #[inline(always)]
    pub(super) fn skip(&mut self, depth: u32) -> Option<()> {
        self.i = skip_value(self.b, self.i, depth)?;
        Some(())
    }

    /// `skip`, with strings and numbers (most values) read here rather than in a call.
    #[inline(always)]
    pub(super) fn skip_inline(&mut self, depth: u32) -> Option<()> {
        self.i = match self.b.get(self.i) {
            Some(b'"') => string_end(self.b, self.i + 1)?.0,
            Some(b'-' | b'0'..=b'9') => number_end(self.b, self.i)?,
            _ => skip_value(self.b, self.i, depth)?,
        };
        Some(())
    }

    /// Skips a value and returns its text (the reference's `skip`).
    pub(super) fn raw(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        self.skip(0)?;
        Some(self.sub(start, self.i))
    }

    pub(super) fn opt_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'"' {
            self.string().map(Some)
        } else {
            self.skip(0).map(|_| None)
        }
    }

    #[inline(always)]
    pub(super) fn opt_u64(&mut self) -> Option<Option<u64>> {
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

    pub(super) fn opt_f64(&mut self) -> Option<Option<f64>> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => Some(self.number()?.parse().ok()),
            _ => self.skip(0).map(|_| None),
        }
    }

    pub(super) fn opt_bool(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.lit(b"true").map(|_| Some(true)),
            b'f' => self.lit(b"false").map(|_| Some(false)),
            _ => self.skip(0).map(|_| None),
        }
    }

    pub(super) fn opt_string_array(&mut self) -> Option<Option<Vec<Cow<'a, str>>>> {
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
                out.push(s);
            }
            if !self.next_member(b']')? {
                return Some(Some(out));
            }
        }
    }

    /// The payload object (cursor on its `{`), read into `f` key by key like `Facts::take`.
    /// `f` holds no facts yet. Without `ALL`, only `score` and `new_iteration` are read (what
    /// a row needs), the rest validated and skipped.
    pub(super) fn facts<const ALL: bool>(&mut self, f: &mut Facts<'a>, depth: u32) -> Option<()> {
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
    pub(super) fn facts_general<const ALL: bool>(
        &mut self,
        f: &mut Facts<'a>,
        depth: u32,
    ) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.i += 1;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key_start = self.i;
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
                // Long keys all read as one word: their text tells (`key` read it unescaped).
                k if ALL && (k == K_COST_USD || k == K_TOTAL_COST_USD || k == 0) => {
                    f.usage_extras |=
                        k != 0 || self.key_text_at(key_start).is_some_and(is_usage_extra);
                    self.skip_inline(depth + 1)?
                }
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
    pub(super) fn flat_facts<const ALL: bool>(&self, f: &mut Facts<'a>) -> Option<usize> {
        let b = self.b;
        let mut i = self.i + 1;
        if *b.get(i)? == b'}' {
            return Some(i + 1);
        }
        loop {
            i = 'member: {
                // The keys aif-loop writes on most events, matched whole with their quotes and
                // colon: one compare, no scan for the closing quote.
                match b.get(i + 1) {
                    Some(b't') => {
                        if let Some(j) = lit_end(b, i, b"\"tokens_in\":") {
                            break 'member match ALL {
                                true => self.flat_u64(j, &mut f.tokens_in)?,
                                false => flat_value(b, j)?,
                            };
                        }
                        if let Some(j) = lit_end(b, i, b"\"tokens_out\":") {
                            break 'member match ALL {
                                true => self.flat_u64(j, &mut f.tokens_out)?,
                                false => flat_value(b, j)?,
                            };
                        }
                    }
                    Some(b'd') => {
                        if let Some(j) = lit_end(b, i, b"\"duration_ms\":") {
                            break 'member flat_value(b, j)?;
                        }
                    }
                    _ => {}
                }
                self.flat_member::<ALL>(i, f)?
            };
            match *b.get(i)? {
                b',' => i += 1,
                b'}' => return Some(i + 1),
                _ => return None,
            }
        }
    }

    /// A member of `flat_facts` other than the usual three (`i` on its key's `"`): the index
    /// past its value.
    #[inline(always)]
    fn flat_member<const ALL: bool>(&self, i: usize, f: &mut Facts<'a>) -> Option<usize> {
        let b = self.b;
        if *b.get(i)? != b'"' {
            return None;
        }
        let (end, escaped) = string_end(b, i + 1)?;
        if escaped || *b.get(end)? != b':' {
            return None;
        }
        let key = &b[i + 1..end - 1];
        let i = end + 1;
        Some(match (key.len(), key) {
            (2, b"to") | (13, b"new_iteration") => self.flat_u64(i, &mut f.new_iteration)?,
            (5, b"score") => self.flat_f64(i, &mut f.score)?,
            // A nested object: `facts_general` reads it.
            (5, b"usage") if b.get(i) == Some(&b'{') => return None,
            _ if !ALL => flat_value(b, i)?,
            (9, b"tokens_in") | (12, b"input_tokens") => self.flat_u64(i, &mut f.tokens_in)?,
            (10, b"tokens_out") | (13, b"output_tokens") => self.flat_u64(i, &mut f.tokens_out)?,
            (10, b"fail_count") => self.flat_u64(i, &mut f.fail_count)?,
            // `USAGE_EXTRAS`, spelt out: arms on the key's length cost nothing to the others.
            (8, b"cost_usd")
            | (14, b"total_cost_usd")
            | (17, b"cache_read_tokens")
            | (21, b"cache_creation_tokens")
            | (23, b"cache_read_input_tokens")
            | (27, b"cache_creation_input_tokens") => {
                f.usage_extras = true;
                flat_value(b, i)?
            }
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
        })
    }

    /// `opt_u64` at `i` for `flat_facts`: the index past the value.
    #[inline(always)]
    pub(super) fn flat_u64(&self, i: usize, out: &mut Option<u64>) -> Option<usize> {
        let b = self.b;
        match *b.get(i)? {
            b'0'..=b'9' => {
                if let Some((n, len)) = short_digits(b, i)
                    && (b[i] != b'0' || len == 1)
                    && !matches!(b[i + len], b'.' | b'e' | b'E')
                {
                    *out = Some(n);
                    return Some(i + len);
                }
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
    pub(super) fn flat_f64(&self, i: usize, out: &mut Option<f64>) -> Option<usize> {
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
    pub(super) fn flat_string(&self, i: usize) -> Option<(Option<Cow<'a, str>>, usize)> {
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
    pub(super) fn flat_strings(
        &self,
        mut i: usize,
        out: &mut Option<Vec<Cow<'a, str>>>,
    ) -> Option<usize> {
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
                list.extend(value);
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

pub(super) const K_EVENT: u128 = word(b"event");
pub(super) const K_V: u128 = word(b"v");
pub(super) const K_SEQ: u128 = word(b"seq");
pub(super) const K_TS: u128 = word(b"ts");
pub(super) const K_RUN_ID: u128 = word(b"run_id");
pub(super) const K_SESSION_ID: u128 = word(b"session_id");
pub(super) const K_ITERATION: u128 = word(b"iteration");
pub(super) const K_PHASE: u128 = word(b"phase");
pub(super) const K_STEP: u128 = word(b"step");
pub(super) const K_STATUS: u128 = word(b"status");
pub(super) const K_PAYLOAD: u128 = word(b"payload");
pub(super) const K_SCORE: u128 = word(b"score");
pub(super) const K_PASSED: u128 = word(b"passed");
pub(super) const K_THRESHOLD: u128 = word(b"threshold");
pub(super) const K_FAILED: u128 = word(b"failed");
pub(super) const K_FAILED_RULES: u128 = word(b"failed_rules");
pub(super) const K_WARNINGS: u128 = word(b"warnings");
pub(super) const K_WARN_RULES: u128 = word(b"warn_rules");
pub(super) const K_FAIL_COUNT: u128 = word(b"fail_count");
pub(super) const K_REASON: u128 = word(b"reason");
pub(super) const K_NEW_ITERATION: u128 = word(b"new_iteration");
pub(super) const K_TO: u128 = word(b"to");
pub(super) const K_TOKENS_IN: u128 = word(b"tokens_in");
pub(super) const K_INPUT_TOKENS: u128 = word(b"input_tokens");
pub(super) const K_TOKENS_OUT: u128 = word(b"tokens_out");
pub(super) const K_OUTPUT_TOKENS: u128 = word(b"output_tokens");
pub(super) const K_USAGE: u128 = word(b"usage");
pub(super) const K_COST_USD: u128 = word(b"cost_usd");
pub(super) const K_TOTAL_COST_USD: u128 = word(b"total_cost_usd");

impl<'a> P<'a> {
    /// Steps over `lit` if it is next, byte for byte (a fixed-size compare, inlined: no call).
    #[inline(always)]
    pub(super) fn lit<const N: usize>(&mut self, lit: &[u8; N]) -> Option<()> {
        self.i = lit_end(self.b, self.i, lit)?;
        Some(())
    }

    /// The body of a string whose opening quote is just behind the cursor, when it has no
    /// escapes (and no control bytes); the cursor ends past the closing quote.
    #[inline(always)]
    pub(super) fn plain(&mut self) -> Option<&'a str> {
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
    pub(super) fn digits(&mut self) -> Option<u64> {
        let start = self.i;
        if let Some((n, len)) = short_digits(self.b, start)
            && (self.b[start] != b'0' || len == 1)
        {
            self.i = start + len;
            return Some(n);
        }
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
