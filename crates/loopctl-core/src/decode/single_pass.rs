//! The fast path of `parse_line`: one pass over the line, no closures, no per-key `Cow`.
//!
//! It gives exactly the event `reference_parser::parse_line_reference` gives, or `None` for
//! whatever it does not handle itself: invalid JSON (the reference names the error), keys
//! written with escapes, a repeated `payload`, Avenor lines, nesting deeper than `MAX_DEPTH`.
//! `parse_line` then falls back to the reference, so `None` is always safe; a differential test
//! (`tests`) and the replay tests hold the `Some` side to the reference.
//!
//! Here: the line shapes (aif-loop's fixed layout, any object) and the run key; `cursor` reads
//! values and payload facts in place; `bytes` finds the ends of strings, numbers and values.

use std::borrow::Cow;

use super::event::{Dialect, Event, Facts, Kind};
use super::json_scanner::find_special;
use super::timestamp::Ts;

mod bytes;
mod cursor;
#[cfg(test)]
mod tests;

use bytes::{has_dot, skip_ws};
use cursor::*;

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
    kind: Kind,
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
    // A known name has no dot: only the others are looked at for one (Avenor's).
    let kind = Kind::from_name(name);
    if p.b.get(p.i) != Some(&b'{') || (kind == Kind::Other && has_dot(name)) {
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
        kind,
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
    ev.kind = head.kind;
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
    let kind = head.kind;
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
            K_RUN_ID => run_id = p.opt_string()?,
            K_SESSION_ID => session = p.opt_string()?,
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

/// `reference_parser::run_key` over raw bytes, for lines whose run comes early and plainly: the
/// first `run_id` string, or `Some(None)` for an object without `run_id`. `None` (session ids,
/// escapes, containers before the run id, anything invalid) sends the line to `run_key`. A line
/// that names `run_id` again (the last one wins) is not looked for: searching every line cost
/// more than the routing, and the fold driver checks each event's run against the shard it was
/// sent to (`replay::shard_of_event`), folding the log again in one pass if one is not. The
/// line need not be UTF-8: a line that is not is reported as damaged by whichever shard gets it.
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
            (b"run_id", b'"') => {
                return Some(Some(plain(&mut i)?));
            }
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
