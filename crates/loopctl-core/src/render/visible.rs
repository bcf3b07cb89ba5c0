//! Text from a log (run ids, phase and rule names, reasons) shown to a person: a newline or a
//! terminal escape in a name must not break a table row or a line, or drive the terminal.
//! JSON output stays exact; only human output goes through here.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with its control characters (C0, DEL, C1) and bidirectional overrides written as
/// escapes: `\n`, `\r`, `\t`, else `\u001b`-style. Other text is returned as is.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A character that moves the cursor, drives the terminal or reorders the text around it.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_other_text_kept() {
        assert!(matches!(visible("run-1 é ✓"), Cow::Borrowed("run-1 é ✓")));
        assert_eq!(
            visible("a\nb\r\tc\u{1b}[31md\u{7f}\u{85}\u{202e}e"),
            "a\\nb\\r\\tc\\u001b[31md\\u007f\\u0085\\u202ee"
        );
    }
}
