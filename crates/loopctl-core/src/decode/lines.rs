//! Splits a byte stream into lines with their positions, in bounded memory.
//!
//! Pure: the caller reads the bytes and pushes them in; any split of the stream into chunks
//! yields the same lines (a property test checks every split point).

/// Default cap on one line: longer lines are reported and skipped, never buffered whole.
pub const DEFAULT_MAX_LINE: usize = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'b> {
    /// A complete, newline-terminated line (without the `\n`).
    Line(Pos, &'b [u8]),
    /// A line longer than the cap; its bytes were skipped.
    Oversize(Pos, u64),
    /// Bytes after the last newline at end of input.
    Unterminated(Pos, &'b [u8]),
}

/// What a raw line holds once a leading BOM and a trailing CR are removed.
#[derive(Debug, PartialEq, Eq)]
pub enum LineText<'b> {
    Blank,
    Text(&'b str),
    /// Not UTF-8; the reason names the first bad byte.
    NotUtf8(String),
}

impl<'b> LineText<'b> {
    /// The text, when the line holds some (not blank, UTF-8).
    pub fn text(self) -> Option<&'b str> {
        match self {
            LineText::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// A line's text. A UTF-8 byte order mark is dropped from the start of any line, not only the
/// log's first: logs written on Windows start with one, and two of them joined (`cat a b`) hold
/// one mid-file, before a line as readable as the first.
pub fn decode(raw: &[u8]) -> LineText<'_> {
    let mut b = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    b = b.strip_suffix(b"\r").unwrap_or(b);
    if b.iter().all(u8::is_ascii_whitespace) {
        return LineText::Blank;
    }
    // simdutf8 for the check (twice std's speed on ASCII), std for the position of a bad byte.
    match simdutf8::basic::from_utf8(b) {
        Ok(t) => LineText::Text(t),
        Err(_) => match std::str::from_utf8(b) {
            Ok(t) => LineText::Text(t),
            Err(e) => LineText::NotUtf8(format!(
                "invalid UTF-8 at byte {} of the line",
                e.valid_up_to()
            )),
        },
    }
}

/// `decode` for a line already known to be UTF-8.
pub fn decode_str(text: &str) -> LineText<'_> {
    decode_str_cr(text, text.ends_with('\r'))
}

/// `decode_str` told whether the line ends with a CR, so that it does not read the line's end
/// (a reader that found the newline knows; the line's end is often out of cache by now).
pub fn decode_str_cr(text: &str, cr: bool) -> LineText<'_> {
    debug_assert_eq!(cr, text.ends_with('\r'));
    let mut t = text;
    if cr {
        t = &t[..t.len() - 1];
    }
    t = t.strip_prefix('\u{FEFF}').unwrap_or(t);
    if t.bytes().all(|c| c.is_ascii_whitespace()) {
        LineText::Blank
    } else {
        LineText::Text(t)
    }
}

pub struct Splitter {
    carry: Vec<u8>,
    /// Offset of the first byte of the line being assembled.
    start: u64,
    line: u64,
    max_line: usize,
    /// Length so far of an oversize line being skipped.
    skipping: Option<u64>,
    /// Offset of the next byte to be pushed.
    next: u64,
}

impl Splitter {
    pub fn new(max_line: usize) -> Splitter {
        Splitter::starting_at(max_line, 0, 0)
    }

    /// Resumes at `offset`, which begins line `lines_before + 1`.
    pub fn starting_at(max_line: usize, offset: u64, lines_before: u64) -> Splitter {
        Splitter {
            carry: Vec::new(),
            start: offset,
            line: lines_before + 1,
            max_line,
            skipping: None,
            next: offset,
        }
    }

    /// Offset just past the last complete line emitted.
    pub fn offset(&self) -> u64 {
        self.start
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            offset: self.start,
        }
    }

    pub fn push(&mut self, mut chunk: &[u8], mut emit: impl FnMut(Piece<'_>)) {
        while !chunk.is_empty() {
            let nl = memchr::memchr(b'\n', chunk);
            let take = nl.map_or(chunk.len(), |i| i);
            if let Some(n) = self.skipping.as_mut() {
                *n += take as u64;
            } else if self.carry.len() + take > self.max_line {
                self.skipping = Some((self.carry.len() + take) as u64);
                self.carry.clear();
            } else if let Some(i) = nl {
                let pos = self.pos();
                if self.carry.is_empty() {
                    emit(Piece::Line(pos, &chunk[..i]));
                } else {
                    self.carry.extend_from_slice(&chunk[..i]);
                    emit(Piece::Line(pos, &self.carry));
                    self.carry.clear();
                }
            } else {
                self.carry.extend_from_slice(chunk);
            }
            let Some(i) = nl else {
                self.next += chunk.len() as u64;
                return;
            };
            if let Some(n) = self.skipping.take() {
                emit(Piece::Oversize(self.pos(), n));
            }
            self.next += i as u64 + 1;
            self.start = self.next;
            self.line += 1;
            chunk = &chunk[i + 1..];
        }
    }

    /// Ends the input: reports what follows the last newline, if anything.
    pub fn finish(self, mut emit: impl FnMut(Piece<'_>)) {
        if let Some(n) = self.skipping {
            emit(Piece::Oversize(self.pos(), n));
        } else if !self.carry.is_empty() {
            emit(Piece::Unterminated(self.pos(), &self.carry));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, PartialEq)]
    enum Owned {
        Line(Pos, Vec<u8>),
        Oversize(Pos, u64),
        Tail(Pos, Vec<u8>),
    }

    fn run(input: &[u8], splits: &[usize], cap: usize) -> Vec<Owned> {
        let mut out = vec![];
        let mut sp = Splitter::new(cap);
        let mut prev = 0;
        let mut emit = |p: Piece<'_>| {
            out.push(match p {
                Piece::Line(p, b) => Owned::Line(p, b.to_vec()),
                Piece::Oversize(p, n) => Owned::Oversize(p, n),
                Piece::Unterminated(p, b) => Owned::Tail(p, b.to_vec()),
            })
        };
        for &s in splits.iter().chain(std::iter::once(&input.len())) {
            let s = s.clamp(prev, input.len());
            sp.push(&input[prev..s], &mut emit);
            prev = s;
        }
        sp.finish(&mut emit);
        out
    }

    #[test]
    fn a_byte_order_mark_is_dropped_from_any_line() {
        for line in ["\u{feff}{\"a\":1}", "\u{feff}{\"a\":1}\r"] {
            assert_eq!(decode(line.as_bytes()), LineText::Text("{\"a\":1}"));
            assert_eq!(decode_str(line), LineText::Text("{\"a\":1}"));
        }
        assert_eq!(decode("\u{feff}  ".as_bytes()), LineText::Blank);
        // Only at the start: one inside a line is its text.
        assert_eq!(decode_str("x\u{feff}"), LineText::Text("x\u{feff}"));
    }

    #[test]
    fn positions_oversize_and_tail() {
        let out = run(b"ab\n\nlonglong\nz", &[], 4);
        assert_eq!(
            out,
            vec![
                Owned::Line(Pos { line: 1, offset: 0 }, b"ab".to_vec()),
                Owned::Line(Pos { line: 2, offset: 3 }, vec![]),
                Owned::Oversize(Pos { line: 3, offset: 4 }, 8),
                Owned::Tail(
                    Pos {
                        line: 4,
                        offset: 13
                    },
                    b"z".to_vec()
                ),
            ]
        );
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_pieces(input in prop::collection::vec(prop::sample::select(b"ab\n{}".to_vec()), 0..200),
                                              mut splits in prop::collection::vec(0usize..200, 0..20),
                                              cap in 1usize..12) {
            splits.sort();
            prop_assert_eq!(run(&input, &splits, cap), run(&input, &[], cap));
        }
    }
}
