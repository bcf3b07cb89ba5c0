//! Printing shared by the commands: findings, errors, tables. Colours follow the terminal and
//! `NO_COLOR` (anstream strips them when stdout/stderr is not a terminal).

use std::io::Write;
use std::path::Path;

use loopctl_core::Finding;
use owo_colors::OwoColorize;

pub fn error(msg: &str) {
    let _ = writeln!(anstream::stderr(), "{} {msg}", "error:".red().bold());
}

pub fn warn(msg: &str) {
    let _ = writeln!(anstream::stderr(), "{} {msg}", "warning:".yellow().bold());
}

pub fn note(msg: &str) {
    let _ = writeln!(anstream::stderr(), "{} {msg}", "note:".cyan());
}

/// Findings printed per log on stderr; the rest are counted and summed up (a log of a million
/// damaged lines does not flood the terminal).
pub const SHOWN: usize = 50;

/// Findings said on stderr as they are read, at most `SHOWN` per log.
#[derive(Default)]
pub struct Findings {
    per_log: std::collections::BTreeMap<std::path::PathBuf, usize>,
}

impl Findings {
    /// Prints `text` (a finding in `log`) unless `SHOWN` were printed for `log`; returns
    /// whether this was the first one not printed.
    pub fn warn(&mut self, log: &Path, text: &str) -> bool {
        let n = match self.per_log.get_mut(log) {
            Some(n) => n,
            None => self.per_log.entry(log.to_path_buf()).or_default(),
        };
        *n += 1;
        if *n <= SHOWN {
            warn(text);
        }
        *n == SHOWN + 1
    }

    /// How many findings were not printed, per log: one line each.
    pub fn finish(&self) {
        for (log, n) in self.per_log.iter().filter(|(_, n)| **n > SHOWN) {
            warn(&more_findings(log, n - SHOWN));
        }
    }
}

fn more_findings(log: &Path, more: usize) -> String {
    format!(
        "{more} more findings in {}; `loopctl check {} --json` lists them all",
        log.display(),
        log.display()
    )
}

/// `file:line: byte N: kind: reason` on stderr, one per finding (`SHOWN` at most).
pub fn findings(log: &Path, findings: &[Finding]) {
    for f in findings.iter().take(SHOWN) {
        warn(&finding(log, f));
    }
    if findings.len() > SHOWN {
        warn(&more_findings(log, findings.len() - SHOWN));
    }
}

/// `file:line: byte N: kind: reason`.
pub fn finding(log: &Path, f: &Finding) -> String {
    format!(
        "{}:{}: byte {}: {}: {}",
        log.display(),
        f.line,
        f.offset,
        kind(f),
        f.reason
    )
}

pub fn kind(f: &Finding) -> String {
    serde_json::to_value(f.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A table row of log text: each cell escaped (`visible`), so it stays one line.
pub fn row<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> Vec<String> {
    cells
        .into_iter()
        .map(|c| loopctl_core::render::visible(c.as_ref()).into_owned())
        .collect()
}

pub fn table(header: &[&str]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(
        header
            .iter()
            .map(|h| comfy_table::Cell::new(h).add_attribute(comfy_table::Attribute::Bold)),
    );
    t
}

/// The first failure to write stdout other than its reader going away (a full disk, an I/O
/// error): the output is incomplete, which `main` says (exit 2) once the command is done.
static STDOUT_FAILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Notes a write to stdout that failed. A reader that went away (`| head -1`) is no error: the
/// command ends quietly.
fn noted(written: std::io::Result<()>) {
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        let _ = STDOUT_FAILED.set(e.to_string());
    }
}

/// Why stdout could not be written, if it could not.
pub fn stdout_failure() -> Option<&'static str> {
    STDOUT_FAILED.get().map(String::as_str)
}

/// Writes `bytes` as is (not through the colour-stripping adapter).
pub fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    noted(out.write_all(bytes).and_then(|()| out.flush()));
}

pub fn print(text: &str) {
    let mut out = anstream::stdout();
    noted(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
}

/// One compact JSON line per item, in order, `write` appending an item's JSON to a buffer:
/// serialized on up to `threads` threads a block at a time, and printed in large writes.
pub fn json_lines<T: Sync>(items: &[T], threads: usize, write: impl Fn(&T, &mut Vec<u8>) + Sync) {
    in_blocks(items, threads, write, print_json);
}

/// The items as one compact JSON array on one line (serde_json's text of the slice),
/// `write` appending an item's JSON: serialized on up to `threads` threads, a contiguous part
/// each (the text is held whole: for rows, not for whole states).
pub fn json_array<T: Sync>(items: &[T], threads: usize, write: impl Fn(&T, &mut Vec<u8>) + Sync) {
    for part in array_parts(items, threads, write) {
        print_json(&part);
    }
}

/// `json_array`'s text, in parts to print in order.
fn array_parts<T: Sync>(
    items: &[T],
    threads: usize,
    write: impl Fn(&T, &mut Vec<u8>) + Sync,
) -> Vec<Vec<u8>> {
    let mut parts = in_parts(items, threads, |part| {
        let mut out = Vec::with_capacity(part.len() * 256);
        for v in part {
            out.push(b',');
            write(v, &mut out);
        }
        out
    });
    // Each item is preceded by a comma: the first one's becomes the opening bracket.
    match parts[0].first_mut() {
        Some(c) => *c = b'[',
        None => parts[0].push(b'['),
    }
    parts.push(b"]\n".to_vec());
    parts
}

/// `one` over `items` cut into up to `threads` contiguous parts, one thread each (the first
/// part on this one): the results in order.
fn in_parts<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    one: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let per = items.len().div_ceil(threads.max(1)).max(1);
    let one = &one;
    std::thread::scope(|sc| {
        let handles: Vec<_> = items
            .chunks(per)
            .skip(1)
            .map(|part| sc.spawn(move || one(part)))
            .collect();
        let mut out = vec![one(&items[..per.min(items.len())])];
        out.extend(
            handles
                .into_iter()
                .map(|h| h.join().expect("serializing output panicked")),
        );
        out
    })
}

/// `json_lines` handing each block's text, in order, to `emit`.
fn in_blocks<T: Sync>(
    items: &[T],
    threads: usize,
    write: impl Fn(&T, &mut Vec<u8>) + Sync,
    mut emit: impl FnMut(&[u8]),
) {
    const BLOCK: usize = 2048;
    let write = &write;
    // Bytes per item, learnt from the previous block: buffers sized right are not copied as
    // they grow.
    let per_item = std::sync::atomic::AtomicUsize::new(256);
    let per_item = &per_item;
    let one = move |part: &[T]| {
        let hint = per_item.load(std::sync::atomic::Ordering::Relaxed);
        let mut out = Vec::with_capacity(part.len() * hint);
        for v in part {
            write(v, &mut out);
            out.push(b'\n');
        }
        out
    };
    for block in items.chunks(BLOCK) {
        let texts = in_parts(block, threads, one);
        let bytes: usize = texts.iter().map(Vec::len).sum();
        per_item.store(
            (bytes / block.len().max(1)) * 9 / 8 + 16,
            std::sync::atomic::Ordering::Relaxed,
        );
        for t in &texts {
            emit(t);
        }
    }
}

/// `print` for compact JSON from serde_json. Such text holds no control bytes but its
/// newlines (serde_json escapes them in strings), so the stdout adapter would pass it through
/// unchanged, unless it holds a DEL byte (0x7f), which it strips: text without one is written
/// straight to stdout, sparing the adapter's byte-by-byte scan.
fn print_json(text: &[u8]) {
    if text.contains(&0x7f) {
        // serde_json writes UTF-8 only: the lossy decoding never replaces anything.
        print(&String::from_utf8_lossy(text));
        return;
    }
    write_stdout(text);
}

/// Pretty JSON, by `print_json`: serde_json's indentation adds only spaces and newlines.
pub fn json_pretty<T: serde::Serialize>(v: &T) {
    let mut text = serde_json::to_vec_pretty(v).unwrap_or_default();
    text.push(b'\n');
    print_json(&text);
}

pub fn score(s: f64) -> String {
    format!("{s:.3}")
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_every_item_once_in_order() {
        for threads in 1..4 {
            for n in [0, 1, 2, 3, 2047, 2048, 2049, 4097] {
                let items: Vec<usize> = (0..n).collect();
                let mut got = Vec::new();
                in_blocks(
                    &items,
                    threads,
                    |v, out| out.extend_from_slice(v.to_string().as_bytes()),
                    |t| got.extend_from_slice(t),
                );
                let want: String = items.iter().map(|v| format!("{v}\n")).collect();
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    want,
                    "{threads} threads, {n} items"
                );
                let array = array_parts(&items, threads, |v, out| {
                    serde_json::to_writer(out, v).unwrap()
                })
                .concat();
                let mut want = serde_json::to_vec(&items).unwrap();
                want.push(b'\n');
                assert_eq!(array, want, "array: {threads} threads, {n} items");
            }
        }
    }
}
