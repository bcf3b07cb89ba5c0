use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args as ClapArgs;
use indicatif::{ProgressBar, ProgressStyle};
use loopctl_export::otel;
use loopctl_export::serve::{self, Config, DEFAULT_LISTEN, Listen, Ui};

use super::Ctx;
use crate::output;

/// Serve Prometheus metrics rebuilt from the logs, following them as they grow.
///
/// At start every run under the roots is replayed once (a progress bar on a terminal); then
/// each log is followed from where that replay ended, new run folders are picked up and
/// deleted ones dropped. A scrape encodes the current state: it never reads a log.
///
/// Endpoints: GET /metrics (Prometheus text 0.0.4, or OpenMetrics when the Accept header
/// prefers application/openmetrics-text), GET /healthz (503 until the first replay is done),
/// GET /api/runs (the rows of `list --json`, one per run), GET / (links to them).
/// docs/metrics.md lists the series, docs/serve.md the behaviour.
///
/// It listens on 127.0.0.1:9477 (loopback only). To bind any other address (0.0.0.0, a LAN
/// address, for a Prometheus in a container) you must say so explicitly with --listen; the
/// metrics carry loop and phase names. Port 0 picks a free port; the bound address is printed
/// on stderr. Stops on SIGINT/SIGTERM.
///
/// Findings (damaged lines, torn tails, seq problems) are reported on stderr as they are read
/// (file:line: byte N: kind: reason; the first 50 of each log) and all counted in
/// loopctl_log_findings_total.
///
/// Exit codes: 0 stopped; 1 under --strict when findings were reported, at start-up or while
/// following (the series are served all the same; the code is given once the server stops, as
/// `tail --strict` does); 2 error (no such root, run or log, the address cannot be bound).
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl serve                             # the root's runs on 127.0.0.1:9477\n  loopctl serve runs/ --listen 0.0.0.0:9477  # for a Prometheus in a container\n  curl -s localhost:9477/metrics | grep loopctl_runs"
)]
pub struct Args {
    /// Roots (folders of run folders), run folders, log files or run ids (a run id names its
    /// run's folder, or the log file holding it, all of whose runs are served), as for `export
    /// prometheus` (default: the root; the default root not existing yet is served empty, its
    /// runs picked up as they appear).
    paths: Vec<String>,
    /// Address to listen on: IP:PORT or HOST:PORT (a host name is resolved; IPv4 first). The
    /// default is loopback only; a non-loopback address must be given here explicitly.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "HOST:PORT")]
    listen: Listen,
    /// How often followed logs are checked when no file notification arrives.
    #[arg(long, default_value = "250ms", value_parser = super::values::positive_duration, value_name = "DURATION")]
    poll: Duration,
    /// How often the roots are scanned for new run folders.
    #[arg(long, default_value = "2s", value_parser = super::values::positive_duration, value_name = "DURATION")]
    rescan: Duration,
    /// Also push the same metrics, cumulative, to an OpenTelemetry collector over OTLP/HTTP:
    /// to URL (a base such as http://localhost:4318; /v1/metrics is appended), else to
    /// $OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT. Every
    /// $OTEL_METRIC_EXPORT_INTERVAL ms (default 60000), and once on shutdown. docs/otel.md.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    otlp_metrics: Option<String>,
    // Last: its stagnation flags open a help heading of their own, which the options after
    // them would be listed under.
    #[command(flatten)]
    series: super::export::SeriesArgs,
}

struct Terminal {
    bar: ProgressBar,
    /// Findings printed, per log (`output::SHOWN` at most).
    said: std::sync::Mutex<output::Findings>,
}

impl Ui for Terminal {
    fn listening(&self, addr: std::net::SocketAddr) {
        if !addr.ip().is_loopback() {
            output::warn(&format!(
                "listening on {addr}, reachable from other hosts (--listen)"
            ));
        }
        self.bar.suspend(|| {
            eprintln!("loopctl serve: listening on http://{addr} (/metrics, /healthz, /api/runs)")
        });
    }

    fn progress(&self, done: usize, total: usize) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        if done == total {
            self.bar.finish_and_clear();
        }
    }

    fn replayed(&self, logs: usize) {
        eprintln!("loopctl serve: {logs} log(s) replayed; following them");
    }

    fn notice(&self, text: &str) {
        self.bar.suspend(|| output::note(text));
    }
    fn finding(&self, log: &std::path::Path, text: &str) {
        // As `export prometheus` and the read commands print them, up to `SHOWN` per log.
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        self.bar.suspend(|| {
            if said.warn(log, text) {
                output::note(&format!(
                    "further findings in {} are not printed (loopctl_log_findings_total counts them)",
                    log.display()
                ));
            }
        });
    }
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    // The default root before the first run: served empty, its runs picked up as they appear
    // (a root named with --root or $LOOPCTL_ROOT must exist).
    let waits = a.paths.is_empty() && !loopctl_store::root::root_exists(&ctx.root, ctx.root_named)?;
    if waits {
        output::note(&format!(
            "no runs under {} yet: serving its runs as they appear",
            ctx.root.display()
        ));
    }
    let roots = if a.paths.is_empty() {
        vec![ctx.root.clone()]
    } else {
        ctx.paths_or_runs(&a.paths)?
    };
    let cfg = Config {
        listen: a.listen,
        roots,
        options: a.series.options()?,
        max_line: ctx.read.max_line,
        threads: ctx.read.threads,
        poll: a.poll,
        rescan: a.rescan,
        max_connections: 64,
        missing_roots_wait: waits,
        root: ctx.root.clone(),
        otlp_metrics: a.otlp_metrics.as_deref().map(|url| {
            let env = |k: &str| std::env::var(k).ok();
            otel::metrics::Push {
                config: otel::Config::resolve_signal(otel::config::Signal::Metrics, Some(url), env),
                interval: otel::metrics::Push::interval_from(env),
            }
        }),
    };
    if let Some(p) = &cfg.otlp_metrics {
        p.config
            .check()
            .map_err(|e| anyhow::anyhow!("OTLP metrics endpoint {}: {e}", p.config.url))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    serve::shutdown_on_signals(&stop)?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} logs replayed {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let served = serve::serve(
        cfg,
        stop,
        &Terminal {
            bar,
            said: Default::default(),
        },
    )?;
    eprintln!("loopctl serve: stopped");
    let strict = ctx.strict && served.findings > 0;
    if strict {
        output::error(&format!(
            "{} finding(s) in the logs (--strict)",
            served.findings
        ));
    }
    Ok(loopctl_core::exit_codes::of_reading(false, false, strict))
}
