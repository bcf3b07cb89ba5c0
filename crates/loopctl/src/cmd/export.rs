use std::path::{Path, PathBuf};

use clap::{Args as ClapArgs, Subcommand};
use loopctl_export::{Options, otel, textfile};

use super::Ctx;
use crate::output;

/// Export what the logs hold: metrics (Prometheus), traces (OpenTelemetry) or the analytics
/// tables (Parquet).
#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    format: Format,
}

#[derive(Subcommand)]
enum Format {
    Prometheus(PromArgs),
    Otel(OtelArgs),
    #[cfg(feature = "analytics")]
    Parquet(super::export_parquet::Args),
}

/// Replay the logs and send every run as an OpenTelemetry trace (OTLP/HTTP, protobuf) with
/// its original timestamps: one root span `RUN <loop>` per session, a child span per phase
/// attempt (aif-loop: per step), evaluations, retries and decisions as events. Ids are derived
/// from the run id and seq, so exporting a log twice gives the same trace (a backend
/// deduplicates) and the trace `run` sent live. docs/otel.md describes the spans.
///
/// The endpoint is --endpoint, else $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is), else
/// $OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else http://localhost:4318/v1/traces. Also
/// honoured: OTEL_EXPORTER_OTLP_HEADERS (and _TRACES_HEADERS), OTEL_SERVICE_NAME (default
/// loopctl), OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_TIMEOUT.
///
/// Exit codes: 0 sent; 1 under --strict when a log has damaged lines; 2 error (no such run,
/// root or log, or the collector could not be reached or refused the spans: the endpoint is
/// named).
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl export otel                       # every run under the root\n  \
loopctl export otel fixtures/avenor-loop --endpoint http://collector:4318\n  \
OTEL_EXPORTER_OTLP_HEADERS='x-honeycomb-team=KEY' loopctl export otel my-task"
)]
struct OtelArgs {
    /// Roots (folders of run folders), run folders, log files or run ids (default: the root).
    paths: Vec<String>,
    /// Collector base URL (http://host:4318); /v1/traces is appended unless the URL ends with it.
    /// An https:// URL is spoken to over TLS (the platform's trusted certificates).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Print what was sent as JSON on stdout ({"endpoint","logs","runs","spans"}).
    #[arg(long)]
    json: bool,
}

/// Replay the logs once and write their metrics in Prometheus text format, as node_exporter's
/// textfile collector reads them (no timestamps): the same series `loopctl serve` shows for
/// the same logs. docs/metrics.md lists them.
///
/// With --textfile the file is written atomically (a temporary file in the same folder, then
/// a rename), so the collector never reads half of it; point node_exporter's
/// --collector.textfile.directory at that folder and name the file *.prom. A symbolic link at
/// PATH is followed (the file it names is written, the link stays); a folder, fifo, device or
/// socket there is refused (exit 2), not replaced.
///
/// Exit codes: 0 written; 1 when a log named as FILE holds no event, or under --strict when a
/// log has findings (damaged lines, a torn tail, seq problems); 2 error (no such root, run or
/// log, the file cannot be written). The metrics are written in every case but 2.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl export prometheus                 # every run under the root, on stdout\n  \
loopctl export prometheus runs/ --textfile /var/lib/node_exporter/loopctl.prom\n  \
loopctl export prometheus my-task history.jsonl   # a run (its folder) and a log file"
)]
struct PromArgs {
    /// Roots (folders of run folders), run folders, log files or run ids (a run id names its
    /// run's folder, or the log file holding it, all of whose runs are exported) (default: the
    /// root).
    paths: Vec<String>,
    /// Write to this file (e.g. /var/lib/node_exporter/loopctl.prom) instead of stdout.
    #[arg(long, value_name = "PATH")]
    textfile: Option<PathBuf>,
    #[command(flatten)]
    series: SeriesArgs,
}

/// The series options `export prometheus` and `serve` share.
#[derive(ClapArgs)]
pub struct SeriesArgs {
    /// Export the per-run gauges of live runs (labels loop and run); false leaves them out.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    per_run_series: bool,
    /// Distinct loop label values kept; the runs of later loops are counted under
    /// loop="other". On stderr, the first 100 values folded (loops and phases together) are
    /// named once each, then a note says later ones are not.
    #[arg(long, default_value_t = 200, value_parser = super::values::count_usize(), value_name = "N")]
    max_loops: usize,
    /// Distinct phase label values kept per loop; later phases are counted under
    /// phase="other" (named once on stderr, as folded loops are).
    #[arg(long, default_value_t = 50, value_parser = super::values::count_usize(), value_name = "N")]
    max_phases: usize,
    /// The detectors' settings behind loopctl_stagnation_verdicts_total: the flags of
    /// `loopctl stagnation`, with the same defaults.
    #[command(
        flatten,
        next_help_heading = "Stagnation (as for `loopctl stagnation`)"
    )]
    stagnation: super::stagnation::ConfigArgs,
}

impl SeriesArgs {
    pub fn options(&self) -> anyhow::Result<Options> {
        Ok(Options {
            per_run_series: self.per_run_series,
            stagnation: self.stagnation.config()?,
            max_loops: self.max_loops,
            max_phases: self.max_phases,
        })
    }
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    match a.format {
        Format::Prometheus(a) => prometheus(ctx, a),
        Format::Otel(a) => otel(ctx, a),
        #[cfg(feature = "analytics")]
        Format::Parquet(a) => super::export_parquet::run(ctx, a),
    }
}

/// The logs named as files among `paths`: the ones whose holding no event is said (exit 1),
/// as every read command says it of a log it is given.
fn named_files(paths: &[String]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect()
}

fn otel(ctx: &Ctx, a: OtelArgs) -> anyhow::Result<u8> {
    // A URL that cannot be sent to is said before any log is read.
    let sender = otel::Sender::new(&otel::Config::from_env(a.endpoint.as_deref()))?;
    let files = named_files(&a.paths);
    let specs: Vec<String> = ctx
        .inputs(a.paths.into_iter().map(PathBuf::from).collect())?
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let runs = otel::replay::runs(&specs, |s| ctx.resolve(Some(s)))?;
    let mut findings = 0usize;
    let mut said = output::Findings::default();
    let done = otel::replay::export(&runs, &ctx.read, &sender, &mut |log, f| {
        findings += 1;
        said.warn(log, &output::finding(log, f));
    })?;
    said.finish();
    for (log, run) in &done.untimed {
        output::warn(&format!(
            "{}: run {run} has no timestamps; no span sent",
            log.display()
        ));
    }
    if a.json {
        output::json_pretty(&serde_json::json!({
            "endpoint": sender.url(), "logs": done.logs, "runs": done.runs, "spans": done.spans
        }));
    } else {
        output::note(&format!(
            "sent {} span(s) of {} run(s) in {} log(s) to {}",
            done.spans,
            done.runs,
            done.logs,
            sender.url()
        ));
    }
    let empty: Vec<&PathBuf> = files.iter().filter(|f| done.empty.contains(f)).collect();
    for f in &empty {
        super::no_event(f);
    }
    let strict = ctx.strict && findings > 0;
    if strict {
        output::error(&format!("{findings} finding(s) in the logs (--strict)"));
    }
    Ok(loopctl_core::exit_codes::of_reading(
        false,
        !empty.is_empty(),
        strict,
    ))
}

fn prometheus(ctx: &Ctx, a: PromArgs) -> anyhow::Result<u8> {
    let files = named_files(&a.paths);
    let paths = ctx.inputs(ctx.paths_or_runs(&a.paths)?)?;
    // `ExportError`'s message is whole: its source chain would say it a second time.
    let whole = |e: textfile::ExportError| anyhow::anyhow!("{e}");
    let logs = textfile::maybe_logs(&paths).map_err(whole)?;
    let options = a.series.options()?;
    let mut said = output::Findings::default();
    // A log found under a root that cannot be read is said and skipped, as `serve` and
    // `aggregate` skip it (the other loops' series are still written); one named as FILE, or
    // any under --strict, is an error.
    let mut skipped = 0;
    let state = textfile::replay_skipping(
        &logs,
        options,
        &ctx.read,
        &mut |log, d| {
            said.warn(&log.log, &loopctl_export::serve::damage_text(&log.log, &d));
        },
        &mut |log, e| {
            let named =
                |p: &PathBuf| *p == log.log || p.join(loopctl_store::discover::LOG_NAME) == log.log;
            if paths.iter().any(named) {
                return Err(e);
            }
            output::warn(&format!("{e}; skipped"));
            skipped += 1;
            Ok(())
        },
    )
    .map_err(whole)?;
    said.finish();
    if ctx.strict && skipped > 0 {
        anyhow::bail!("{skipped} log(s) could not be read (--strict): nothing written");
    }
    let mut state = state;
    for n in state.take_notices() {
        output::note(&n);
    }
    // Source `i` is `logs[i]`.
    let empty: Vec<&Path> = files
        .iter()
        .filter(|f| {
            let source = logs.iter().position(|l| &l.log == *f);
            source.is_some_and(|i| !state.has_runs(i))
        })
        .map(PathBuf::as_path)
        .collect();
    let findings = state.findings();
    let text = textfile::render_probing(state, &logs)?;
    match &a.textfile {
        Some(p) => textfile::write_atomic(p, &text)?,
        None => output::print(&text),
    }
    for f in &empty {
        super::no_event(f);
    }
    let strict = ctx.strict && findings > 0;
    if strict {
        output::error(&format!(
            "{findings} finding(s) in the logs (--strict; loopctl_log_findings_total has them by kind)"
        ));
    }
    Ok(loopctl_core::exit_codes::of_reading(
        false,
        !empty.is_empty(),
        strict,
    ))
}
