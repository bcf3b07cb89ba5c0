//! Tolerant reading of a damaged JSON object such as a hand-edited or agent-written `run.json`.
//!
//! Top-level members are read one at a time; a missing comma is noted and read past, and a
//! member that cannot be read is skipped up to the next line that starts a member. Everything
//! that could be read is returned with a note of what was repaired.

use serde_json::{Map, Value};

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Salvaged {
    pub fields: Map<String, Value>,
    /// What was wrong, one note each, with the 1-based line it was found on.
    pub repairs: Vec<String>,
}

fn line_of(text: &str, pos: usize) -> usize {
    text[..pos.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// Reads what it can of the top-level object in `text`.
pub fn salvage_object(text: &str) -> Salvaged {
    let mut out = Salvaged::default();
    let b = text.as_bytes();
    let ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut i = ws(0);
    if b.get(i) != Some(&b'{') {
        out.repairs.push("line 1: does not start with '{'".into());
        return out;
    }
    i += 1;
    let mut need_comma = false;
    loop {
        i = ws(i);
        match b.get(i) {
            None => {
                out.repairs.push(format!(
                    "line {}: object is not closed (file cut short?)",
                    line_of(text, i)
                ));
                return out;
            }
            Some(b'}') => return out,
            Some(b',') => {
                i += 1;
                need_comma = false;
                continue;
            }
            Some(b'"') => {}
            Some(_) => {
                out.repairs.push(format!(
                    "line {}: unexpected text; skipped to the next member",
                    line_of(text, i)
                ));
                i = next_member(text, i);
                continue;
            }
        }
        if need_comma {
            out.repairs.push(format!(
                "line {}: missing ',' before this member",
                line_of(text, i)
            ));
        }
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<String>();
        let key = match stream.next() {
            Some(Ok(k)) => k,
            _ => {
                out.repairs.push(format!(
                    "line {}: unreadable key; skipped",
                    line_of(text, i)
                ));
                i = next_member(text, i + 1);
                continue;
            }
        };
        let mut j = ws(i + stream.byte_offset());
        if b.get(j) != Some(&b':') {
            out.repairs.push(format!(
                "line {}: member {key:?} has no ':'; skipped",
                line_of(text, j)
            ));
            i = next_member(text, j);
            continue;
        }
        j += 1;
        let mut stream = serde_json::Deserializer::from_str(&text[j..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                out.fields.insert(key, v);
                i = j + stream.byte_offset();
                need_comma = true;
            }
            _ => {
                out.repairs.push(format!(
                    "line {}: value of {key:?} is unreadable; skipped",
                    line_of(text, j)
                ));
                i = next_member(text, j);
            }
        }
    }
}

/// The start of the next line that begins (after indentation) with a quote, or the end.
fn next_member(text: &str, from: usize) -> usize {
    let b = text.as_bytes();
    let mut i = from;
    while let Some(nl) = memchr::memchr(b'\n', &b[i.min(b.len())..]) {
        let start = i + nl + 1;
        let mut k = start;
        while k < b.len() && (b[k] == b' ' || b[k] == b'\t') {
            k += 1;
        }
        if b.get(k) == Some(&b'"') || b.get(k) == Some(&b'}') {
            return k;
        }
        i = start;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_missing_commas() {
        let s = salvage_object("{\n \"a\": 1\n \"b\": {\"c\": [1, 2]},\n \"d\": \"x\"\n}\n");
        assert_eq!(s.fields.len(), 3);
        assert_eq!(s.fields["b"]["c"][1], 2);
        assert_eq!(s.repairs, ["line 3: missing ',' before this member"]);
    }

    #[test]
    fn keeps_what_precedes_a_cut() {
        let s = salvage_object("{\n \"a\": 1,\n \"b\": {\"c\": [1, 2\n");
        assert_eq!(s.fields.keys().collect::<Vec<_>>(), ["a"]);
        assert!(!s.repairs.is_empty());
    }

    #[test]
    fn skips_a_garbled_member() {
        let s = salvage_object("{\n \"a\": tru,\n \"b\": 2\n}");
        assert_eq!(s.fields.keys().collect::<Vec<_>>(), ["b"]);
    }
}
