//! A small validating JSON pull scanner over a `&str`.
//!
//! Replay reads a handful of fields from every line and skips the rest; a full DOM (or a serde
//! struct with a buffered `flatten`) costs several times more. The scanner validates everything it
//! skips, so a line it accepts is a line `serde_json` accepts (a differential property test and a
//! fuzz target hold it to that; a number beyond f64 is refused, as a `Value` read refuses it), and it is iterative, so no nesting depth can overflow the stack.

use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at byte {pos}")]
pub struct JsonError {
    pub pos: usize,
    pub reason: &'static str,
}

pub struct Scanner<'a> {
    s: &'a str,
    b: &'a [u8],
    pub pos: usize,
}

type R<T> = Result<T, JsonError>;

/// Whether a number literal (valid JSON; `exponent`: it has one) is beyond f64, as `1e400`:
/// `serde_json` refuses the line ("number out of range"), so the scanners do, and a score can
/// never be infinite. Only a literal with an exponent or over 300 bytes can be: the others are
/// not parsed (the scanners know whether they read an exponent: no second look at the bytes).
#[inline(always)]
pub(crate) fn out_of_range(lit: &[u8], exponent: bool) -> bool {
    (exponent || lit.len() > 300) && beyond_f64(lit)
}

#[cold]
fn beyond_f64(lit: &[u8]) -> bool {
    std::str::from_utf8(lit)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .is_some_and(f64::is_infinite)
}

impl<'a> Scanner<'a> {
    pub fn new(s: &'a str) -> Self {
        Scanner {
            s,
            b: s.as_bytes(),
            pos: 0,
        }
    }

    fn err<T>(&self, reason: &'static str) -> R<T> {
        Err(JsonError {
            pos: self.pos,
            reason,
        })
    }

    #[inline]
    pub fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    /// Only whitespace may follow a complete document.
    pub fn finish(&mut self) -> R<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.err("trailing characters"),
        }
    }

    /// Calls `f` once per key of the object at the cursor; `f` must consume the value (with
    /// `skip`, `string`, `number`, `object`, ...).
    pub fn object(&mut self, mut f: impl FnMut(&mut Self, Cow<'a, str>) -> R<()>) -> R<()> {
        if self.peek() != Some(b'{') {
            return self.err("expected an object");
        }
        self.pos += 1;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return self.err("expected a key");
            }
            let key = self.string()?;
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.pos += 1;
            f(self, key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    /// Validates and skips one value; returns its text.
    pub fn skip(&mut self) -> R<&'a str> {
        self.ws();
        let start = self.pos;
        // One entry per open container: true for an object.
        let mut stack: Vec<bool> = Vec::new();
        let mut expect_value = true;
        loop {
            self.ws();
            let Some(&c) = self.b.get(self.pos) else {
                return self.err("unexpected end of input");
            };
            if expect_value {
                match c {
                    b'{' | b'[' => {
                        let is_obj = c == b'{';
                        stack.push(is_obj);
                        self.pos += 1;
                        if self.peek() == Some(if is_obj { b'}' } else { b']' }) {
                            self.pos += 1;
                            stack.pop();
                            expect_value = false;
                        } else if is_obj {
                            self.key_colon()?;
                        }
                        if expect_value {
                            continue;
                        }
                    }
                    b'"' => {
                        self.skip_string()?;
                    }
                    b't' => self.literal("true")?,
                    b'f' => self.literal("false")?,
                    b'n' => self.literal("null")?,
                    b'-' | b'0'..=b'9' => {
                        self.number()?;
                    }
                    _ => return self.err("expected a value"),
                }
                expect_value = false;
            } else {
                let Some(&in_obj) = stack.last() else {
                    return Ok(&self.s[start..self.pos]);
                };
                match (c, in_obj) {
                    (b',', true) => {
                        self.pos += 1;
                        self.key_colon()?;
                        expect_value = true;
                    }
                    (b',', false) => {
                        self.pos += 1;
                        expect_value = true;
                    }
                    (b'}', true) | (b']', false) => {
                        self.pos += 1;
                        stack.pop();
                    }
                    (_, true) => return self.err("expected ',' or '}'"),
                    (_, false) => return self.err("expected ',' or ']'"),
                }
            }
            if !expect_value && stack.is_empty() {
                return Ok(&self.s[start..self.pos]);
            }
        }
    }

    fn key_colon(&mut self) -> R<()> {
        if self.peek() != Some(b'"') {
            return self.err("expected a key");
        }
        self.skip_string()?;
        if self.peek() != Some(b':') {
            return self.err("expected ':'");
        }
        self.pos += 1;
        Ok(())
    }

    fn literal(&mut self, word: &'static str) -> R<()> {
        if self.b[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    /// Validates a number and returns its text.
    pub fn number(&mut self) -> R<&'a str> {
        self.ws();
        let start = self.pos;
        let b = self.b;
        let mut i = self.pos;
        let digits = |i: &mut usize| {
            let s = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                *i += 1;
            }
            *i - s
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => {
                self.pos = i;
                return self.err("invalid number");
            }
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                self.pos = i;
                return self.err("invalid number");
            }
        }
        let exponent = matches!(b.get(i), Some(b'e' | b'E'));
        if exponent {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                self.pos = i;
                return self.err("invalid number");
            }
        }
        if out_of_range(&b[start..i], exponent) {
            self.pos = start;
            return self.err("number out of range");
        }
        self.pos = i;
        Ok(&self.s[start..i])
    }

    /// Skips a string at the cursor without decoding it; returns whether it holds escapes.
    fn skip_string(&mut self) -> R<bool> {
        debug_assert_eq!(self.b[self.pos], b'"');
        self.pos += 1;
        let mut escaped = false;
        loop {
            self.pos = find_special(self.b, self.pos);
            match self.b.get(self.pos) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    match self.b.get(self.pos + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 2
                        }
                        Some(b'u') => {
                            let hex = self.b.get(self.pos + 2..self.pos + 6);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return self.err("invalid \\u escape");
                            }
                            self.pos += 6;
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                Some(_) => return self.err("control character in string"),
            }
        }
    }

    /// Reads a string at the cursor, borrowing it when it holds no escapes.
    pub fn string(&mut self) -> R<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string");
        }
        let start = self.pos;
        let escaped = self.skip_string()?;
        let inner = &self.s[start + 1..self.pos - 1];
        Ok(if escaped {
            Cow::Owned(unescape(inner))
        } else {
            Cow::Borrowed(inner)
        })
    }

    /// A string, or `None` (and the value skipped) when the value is of another type.
    pub fn opt_string(&mut self) -> R<Option<Cow<'a, str>>> {
        if self.peek() == Some(b'"') {
            self.string().map(Some)
        } else {
            self.skip().map(|_| None)
        }
    }

    /// A number as f64, or `None` (value skipped) for other types.
    pub fn opt_f64(&mut self) -> R<Option<f64>> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => Ok(self.number()?.parse().ok()),
            _ => self.skip().map(|_| None),
        }
    }

    /// A non-negative integer, or `None` (value skipped) for anything else.
    pub fn opt_u64(&mut self) -> R<Option<u64>> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => Ok(u64_of_number(self.number()?)),
            _ => self.skip().map(|_| None),
        }
    }

    pub fn opt_bool(&mut self) -> R<Option<bool>> {
        match self.peek() {
            Some(b't') => self.literal("true").map(|_| Some(true)),
            Some(b'f') => self.literal("false").map(|_| Some(false)),
            _ => self.skip().map(|_| None),
        }
    }

    /// An array of strings (other elements are skipped); `None` when the value is not an array.
    pub fn opt_string_array(&mut self) -> R<Option<Vec<Cow<'a, str>>>> {
        if self.peek() != Some(b'[') {
            return self.skip().map(|_| None);
        }
        self.pos += 1;
        let mut out = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Some(out));
        }
        loop {
            if let Some(s) = self.opt_string()? {
                out.push(s);
            }
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Some(out));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }
}

/// A validated JSON number as a non-negative integer: exactly, or through f64 when it is written
/// as a whole float (`3.0`, `1e3`); `None` otherwise.
pub(crate) fn u64_of_number(n: &str) -> Option<u64> {
    n.parse::<u64>().ok().or_else(|| {
        let f: f64 = n.parse().ok()?;
        (f >= 0.0 && f.fract() == 0.0 && f < 1.8e19).then_some(f as u64)
    })
}

/// Index of the next `"`, `\` or control byte at or after `i` (or `b.len()`): sixteen bytes a
/// step with SSE2 (part of every x86_64), then eight bytes a step.
#[inline(always)]
pub(crate) fn find_special(b: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let mut i = i;
        while let Some(block) = b.get(i..i + 16) {
            // SAFETY: `block` is 16 readable bytes; SSE2 is always available on x86_64.
            let mask = unsafe {
                let x = _mm_loadu_si128(block.as_ptr().cast());
                let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
                let slash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
                // x >= 0x20 exactly where max(x, 0x20) == x (unsigned).
                let printable = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x20)), x);
                let special = _mm_or_si128(
                    _mm_or_si128(quote, slash),
                    _mm_andnot_si128(printable, _mm_set1_epi8(-1)),
                );
                _mm_movemask_epi8(special) as u32
            };
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
        find_special_swar(b, i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    find_special_swar(b, i)
}

/// `find_special` eight bytes a step (any target; the tail of a line on x86_64).
#[inline(always)]
fn find_special_swar(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let quote = x ^ (ONES * u64::from(b'"'));
        let slash = x ^ (ONES * u64::from(b'\\'));
        // Per byte: high bit set where the byte is '"', '\\' or below 0x20. Borrows can only set
        // spurious bits above a true match, so the lowest set bit is exact.
        let special = ((quote.wrapping_sub(ONES) & !quote)
            | (slash.wrapping_sub(ONES) & !slash)
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

/// Decodes the escapes of an already validated string body. Lone surrogates become U+FFFD.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices();
    let b = s.as_bytes();
    let hex = |i: usize| u32::from_str_radix(&s[i..i + 4], 16).unwrap_or(0xFFFD);
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else { break };
        match e {
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'u' => {
                let hi = hex(i + 2);
                for _ in 0..4 {
                    chars.next();
                }
                let pair = (0xD800..0xDC00).contains(&hi)
                    && b.get(i + 6) == Some(&b'\\')
                    && b.get(i + 7) == Some(&b'u')
                    && (0xDC00..0xE000).contains(&hex(i + 8));
                if pair {
                    let lo = hex(i + 8);
                    for _ in 0..6 {
                        chars.next();
                    }
                    let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                } else {
                    out.push(char::from_u32(hi).unwrap_or('\u{FFFD}'));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Validates a whole document (used by tests and fuzzing).
pub fn validate(s: &str) -> R<()> {
    let mut sc = Scanner::new(s);
    sc.skip()?;
    sc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Agreement with serde_json's grammar (`IgnoredAny`), plus its refusal of a number beyond
    /// f64, which only a typed read (`Value`) makes.
    fn agrees(s: &str) -> bool {
        let ours = validate(s).is_ok();
        let out_of_range = serde_json::from_str::<serde_json::Value>(s)
            .is_err_and(|e| e.to_string().starts_with("number out of range"));
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok() && !out_of_range;
        ours == theirs
    }

    #[test]
    fn accepts_and_rejects_like_serde_json() {
        for s in [
            "{}",
            "[]",
            "0",
            "-0.5e+3",
            "\"a\\u00e9\\n\"",
            "{\"a\":[1,{\"b\":null}],\"c\":true}",
            "{\"a\":1,}",
            "[1,]",
            "01",
            "1.",
            "-",
            "\"\\x\"",
            "\"a\u{1}\"",
            "{\"a\" 1}",
            "[1 2]",
            "{\"a\":1} x",
            " [ ] ",
            "tru",
            "nul",
            "\"\\ud800\"",
            "{\"a\":{\"b\":{}}}",
            "[[]]]",
            "{\"a\":}",
            "{,}",
            "{\"a\":1,\"a\":2}",
            "1e5",
            "1E-5",
            "-01",
            "[-]",
            "\"\\u12\"",
            "1e400",
            "[-1e0000000000000309]",
            "{\"a\":-1E+400}",
            "1e308",
            "1e-400",
            "0e999",
        ] {
            assert!(agrees(s), "disagree on {s:?}");
        }
        assert!(validate(&format!("{}{}", "[".repeat(5000), "]".repeat(5000))).is_ok());
        assert!(agrees(&format!(
            "{}{}",
            "[{\"a\":".repeat(300),
            "}]".repeat(300)
        )));
    }

    #[test]
    fn special_bytes_are_found_at_every_position() {
        for len in 0..40 {
            for at in 0..len {
                for special in [b'"', b'\\', 0x01, 0x1f] {
                    let mut b = vec![b'a'; len];
                    b[at] = special;
                    // Bytes just above the control range and high bytes must not match.
                    if at > 0 {
                        b[at - 1] = 0xC3;
                    }
                    assert_eq!(
                        find_special(&b, 0),
                        at,
                        "len {len} at {at} byte {special:#x}"
                    );
                }
                assert_eq!(find_special(&vec![b' '; len], 0), len);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn find_special_finds_the_first_special_byte(
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            from in 0usize..90,
        ) {
            let from = from.min(b.len());
            let expected = b[from..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .map_or(b.len(), |k| from + k);
            proptest::prop_assert_eq!(find_special(&b, from), expected);
            proptest::prop_assert_eq!(find_special_swar(&b, from), expected);
        }
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        let mut sc = Scanner::new("\"plain\"");
        assert!(matches!(sc.string().unwrap(), Cow::Borrowed("plain")));
        let mut sc = Scanner::new(r#""t\tab \u00e9 \ud83d\ude00 \ud800x""#);
        assert_eq!(sc.string().unwrap(), "t\tab é 😀 \u{FFFD}x");
    }

    #[test]
    fn object_visits_every_key_and_skips_values() {
        let mut keys = vec![];
        let mut sc = Scanner::new(r#"{"a": [1, {"x": "}"}], "b\"": "s", "c": {"d": 2}}"#);
        sc.object(|sc, k| {
            keys.push(k.into_owned());
            sc.skip().map(|_| ())
        })
        .unwrap();
        assert_eq!(keys, ["a", "b\"", "c"]);
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|n| n.into()),
            (-1e6f64..1e6).prop_map(|f| f.into()),
            ".{0,12}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn valid_documents_are_accepted(v in json_value()) {
            let s = serde_json::to_string(&v).unwrap();
            prop_assert!(validate(&s).is_ok(), "{}", s);
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            prop_assert!(validate(&pretty).is_ok());
        }

        #[test]
        fn mutated_documents_agree_with_serde_json(v in json_value(), at in any::<prop::sample::Index>(),
                                                   byte in prop::sample::select(b"{}[],:\"\\ 0-.eEtfnu1a\x01".to_vec())) {
            let mut s = serde_json::to_string(&v).unwrap().into_bytes();
            let i = at.index(s.len());
            s[i] = byte;
            if let Ok(s) = String::from_utf8(s) {
                prop_assert!(agrees(&s), "disagree on {:?}", s);
            }
        }

        #[test]
        fn arbitrary_text_agrees_with_serde_json(s in "[\\[\\]{}\",:0-9a-z\\\\ .eE+-]{0,24}") {
            prop_assert!(agrees(&s), "disagree on {:?}", s);
        }
    }
}
