//! What `aggregate`, `query` and `export parquet` share: reading the inputs into the analytics
//! tables (with a progress bar on a terminal, damaged lines and unreadable files reported),
//! and printing a frame in the chosen format.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use loopctl_analytics::{Collected, DataFrame, Needs, Options, Tables, collect, format, logs_of};

use super::Ctx;
use crate::{exit, output};

/// How to read the inputs.
#[derive(ClapArgs)]
pub struct ReadArgs {
    /// No progress bar (there is none either when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for reading.
    Table,
    /// RFC 4180, a header line first.
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// A Parquet file (zstd): to --out, or to stdout when it is not a terminal.
    Parquet,
}

/// Output options shared by `aggregate` and `query`.
#[derive(ClapArgs)]
pub struct OutArgs {
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write the output to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

impl OutArgs {
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.format }
    }

    /// Whether the format can hold several tables (`print_frames`): refused before any log is
    /// read when it cannot.
    pub fn check_many(&self) -> anyhow::Result<()> {
        match self.format() {
            Format::Csv | Format::Parquet => anyhow::bail!(
                "csv and parquet hold one table: name one with --report NAME or --by KEY"
            ),
            _ => Ok(()),
        }
    }
}

/// Reads every log the paths name (default: the root) into rows; `events` builds the events
/// table too.
pub fn read(ctx: &Ctx, paths: &[PathBuf], r: &ReadArgs, events: bool) -> anyhow::Result<Collected> {
    let needs = if events {
        Needs::all()
    } else {
        Needs::runs_and_phases()
    };
    read_for(ctx, paths, r, needs)
}

/// Reads every log the paths name (default: the root) into the rows `needs` asks for.
/// A path that does not exist is a run id or alias under the root, else an error, as for
/// `export prometheus`. Findings (damaged lines, torn tails, seq problems) are reported as
/// every reader reports them, damaged lines skipped (`exit_code` says what they mean under
/// --strict, and what a log named as FILE holding no event means); unreadable files are
/// listed, and are an error under --strict.
pub fn read_for(
    ctx: &Ctx,
    paths: &[PathBuf],
    r: &ReadArgs,
    needs: Needs,
) -> anyhow::Result<Collected> {
    let paths = ctx.inputs(ctx.paths_or_runs(paths)?)?;
    let (logs, mut bad) = logs_of(&paths);
    if logs.is_empty() && bad.is_empty() && !paths.is_empty() {
        let named: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        output::warn(&format!(
            "no run folder or log in {}: the tables are empty",
            named.join(", ")
        ));
    }
    let quiet = r.quiet || logs.is_empty() || !std::io::stderr().is_terminal();
    // The sizes only for a bar shown: asking each log's on one thread is slow on large roots.
    let total: u64 = if quiet {
        0
    } else {
        logs.iter()
            .map(|l| std::fs::metadata(&l.log).map_or(0, |m| m.len()))
            .sum()
    };
    let bar = progress_bar(total, quiet);
    let opts = Options {
        read: ctx.read.clone(),
        needs,
        stagnation: Default::default(),
    };
    let n = logs.len();
    let mut c = collect(&logs, &opts, |files, bytes| {
        bar.set_position(bytes);
        bar.set_message(format!("{files}/{n} files"));
    })?;
    bar.finish_and_clear();
    report_findings(&c);
    bad.append(&mut c.unreadable);
    for (p, why) in &bad {
        output::warn(&format!("cannot read {}: {why}", p.display()));
    }
    if ctx.strict && !bad.is_empty() {
        anyhow::bail!("{} input(s) could not be read (--strict)", bad.len());
    }
    c.unreadable = bad;
    // Only a log named as FILE holding no event is said (as `export prometheus` does): a
    // root's empty run folders are runs with no row.
    c.no_event
        .retain(|log| paths.iter().any(|p| p == log && p.is_file()));
    Ok(c)
}

/// Replay's findings as every reader says them (`file:line: byte N: kind: reason`), the first
/// `SHOWN`, then how many there are.
fn report_findings(c: &Collected) {
    const SHOWN: usize = 20;
    for f in c.findings.iter().take(SHOWN) {
        output::warn(&output::finding(&f.file, &f.finding));
    }
    if !c.findings.is_empty() {
        let more = c.findings.len().saturating_sub(SHOWN);
        let tail = if more > 0 {
            format!(" ({more} not shown; `loopctl check FILE` lists them)")
        } else {
            String::new()
        };
        let files: std::collections::BTreeSet<_> = c.findings.iter().map(|f| &f.file).collect();
        output::note(&format!(
            "{} finding(s) in {} file(s){tail}",
            c.findings.len(),
            files.len()
        ));
    }
}

/// The exit code once the output is printed: a log named as FILE that holds no event is said
/// and exit 1, as findings under `--strict` are.
pub fn exit_code(ctx: &Ctx, c: &Collected) -> u8 {
    for log in &c.no_event {
        super::no_event(log);
    }
    let strict_findings = ctx.strict && !c.findings.is_empty();
    if strict_findings {
        output::error(&format!(
            "{} finding(s) in the logs (--strict)",
            c.findings.len()
        ));
    }
    exit::of_reading(false, !c.no_event.is_empty(), strict_findings)
}

/// A bar over `total` bytes on a terminal; hidden when `quiet` or stderr is not a terminal.
pub fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} ({eta} left)")
    {
        b.set_style(style);
    }
    b
}

/// The tables of what was read.
pub fn tables(c: &Collected) -> anyhow::Result<Tables> {
    Ok(Tables::of(c)?)
}

fn emit(out: &OutArgs, bytes: &[u8]) -> anyhow::Result<()> {
    match &out.out {
        Some(p) => std::fs::write(p, bytes).with_context(|| format!("writing {}", p.display())),
        None => {
            output::write_stdout(bytes);
            Ok(())
        }
    }
}

/// Prints one frame in the chosen format.
pub fn print_frame(df: &mut DataFrame, out: &OutArgs) -> anyhow::Result<()> {
    let bytes = match out.format() {
        Format::Table => table_text(df).into_bytes(),
        Format::Csv => format::csv(df).into_bytes(),
        Format::Json => (format::json_array(df) + "\n").into_bytes(),
        Format::Ndjson => {
            let mut v = Vec::new();
            format::ndjson(df, &mut v);
            v
        }
        Format::Parquet => {
            if out.out.is_none() && std::io::stdout().is_terminal() {
                anyhow::bail!("--format parquet writes binary: give --out FILE or redirect stdout");
            }
            format::parquet(df)?
        }
    };
    emit(out, &bytes)
}

pub fn table_text(df: &DataFrame) -> String {
    let (head, rows) = format::cells(df);
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = output::table(&head);
    for r in rows {
        t.add_row(output::row(r));
    }
    format!("{t}\n")
}

/// Several named frames: titled tables, a JSON object by name, or NDJSON rows carrying their
/// frame's name under `report`; CSV and Parquet hold one frame only.
pub fn print_frames(frames: &[(&str, &str, DataFrame)], out: &OutArgs) -> anyhow::Result<()> {
    let bytes = match out.format() {
        Format::Table => {
            let mut s = String::new();
            for (name, about, df) in frames {
                s += &format!("== {name}: {about}\n{}\n", table_text(df));
            }
            s.into_bytes()
        }
        Format::Json => {
            let parts: Vec<String> = frames
                .iter()
                .map(|(name, _, df)| {
                    format!(
                        "{}:{}",
                        serde_json::Value::from(*name),
                        format::json_array(df)
                    )
                })
                .collect();
            format!("{{{}}}\n", parts.join(",")).into_bytes()
        }
        Format::Ndjson => {
            let mut v = Vec::new();
            for (name, _, df) in frames {
                for row in format::json_objects(df, Some(("report", name))) {
                    v.extend_from_slice(row.as_bytes());
                    v.push(b'\n');
                }
            }
            v
        }
        Format::Csv | Format::Parquet => return out.check_many(),
    };
    emit(out, &bytes)
}
