//! `loopctl run` and `loopctl resume`: drive a loop file, printing one line per phase.

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;
use loopctl_core::decode::event::{Event, Kind};
use loopctl_core::rules::loop_file::agent_argv;
use loopctl_export::otel;
use loopctl_runner::run::{Finished, write_config_failure};
use loopctl_runner::{RunOptions, Runner, RunnerError, prepare};
use owo_colors::OwoColorize;
use serde_json::Value;

use super::Ctx;
use crate::output;

fn run_id(s: &str) -> Result<String, String> {
    loopctl_core::rules::run_id::check(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

/// Output and safety flags shared by `run` and `resume`.
#[derive(ClapArgs)]
pub struct Common {
    /// Stop the whole run after this long (90s, 30m, 2h): TIMEOUT sentinel, exit 124.
    #[arg(long, value_parser = super::values::positive_duration, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// Write Avenor's sentinel file here when the run ends (DONE, BLOCKED, FAILED, TIMEOUT, KILLED).
    #[arg(long, value_name = "FILE")]
    sentinel_file: Option<PathBuf>,
    /// Append Avenor lifecycle events (avenor.loop.start, avenor.phase.end, ...) as NDJSON to
    /// FILE, or `-` for stdout. history.jsonl is written regardless.
    #[arg(long, value_name = "FILE|-")]
    on_event: Option<String>,
    /// Copy each phase's stdout and stderr to this terminal's stderr as it runs.
    #[arg(short = 'v', long)]
    echo: bool,
    /// Print nothing but errors while the loop runs.
    #[arg(short, long)]
    quiet: bool,
    /// Print the final state (run.json) as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Send the run live as an OpenTelemetry trace to this collector (base URL, e.g.
    /// http://localhost:4318); $OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) does the same.
    /// Phases get TRACEPARENT naming their span. docs/otel.md.
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
}

/// Run a loop file: pre phases once, loop phases until an exit marker, an abort marker, a
/// decision (criteria, when rules, branches, stagnation) or max_iterations, then post phases. Every fact goes to <root>/<run-id>/history.jsonl first;
/// run.json, the sentinel and --on-event are projections of it. An Avenor loop file runs
/// unchanged.
#[derive(ClapArgs)]
#[command(after_help = "\
Phases: a phase with \"prompt\"/\"prompt_file\" runs the agent (an argv, no shell): the rendered prompt
replaces {prompt} in the argv, else goes in on stdin, and is always in $LOOPCTL_PROMPT_FILE. A phase
with \"run\" runs that command through sh -c. Phases get LOOPCTL_RUN_ID, LOOPCTL_PHASE,
LOOPCTL_ITERATION, LOOPCTL_MAX_ITERATIONS, LOOPCTL_WORKDIR, LOOPCTL_ATTEMPT, LOOPCTL_SESSION_ID.

Markers: a whole output line <|workflow: exit | label|> ends the loop (then post phases run);
<|workflow: abort | reason|> ends it BLOCKED. Markers inside ``` or ~~~ fences are ignored.

Decisions (docs/decisions.md): \"criteria\" rules with check commands, or a phase's own
<|score: 0.8|> / JSON evaluation, score the work (phase A, then B); \"when\" lines such as
\"it fails: reflect, then plan again\", \"after 5 tries: stop and warn\", \"blocked: ask a human\";
a phase's \"transition\" branches on its result; \"stagnation\" stops a loop that is stuck.

Exit code = the sentinel's: 0 DONE, 3 DONE stopped for stagnation, 5 BLOCKED, the phase's code
for FAILED, 124 TIMEOUT, 130 KILLED; 1 for a loop file that does not validate.

Example (from the repository's root, on a copy of the example's files):
  d=$(mktemp -d) && cp -r examples/fix-the-tests/. \"$d\"
  loopctl run --loop-file \"$d/loop.json\" --dir \"$d\" --root \"$d/.loopctl\"")]
pub struct RunArgs {
    /// The loop file (Avenor's JSON: pre, loop, post, max_iterations).
    #[arg(long, value_name = "FILE")]
    loop_file: PathBuf,
    /// A prompt run first as the implicit pre phase "(initial)".
    #[arg(long, conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// Like --prompt, read from a file.
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
    /// Agent command for prompt phases, split like a shell would (no shell runs it), e.g.
    /// "claude -p {prompt}". A phase's or the loop file's "agent" takes precedence.
    #[arg(long, value_name = "CMD")]
    agent: Option<String>,
    /// Folder the phases run in (default: the current folder).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Retries of a phase that exits with code 1, with backoff doubling from --retry-base to 30s.
    #[arg(long, default_value_t = 0, value_name = "N")]
    max_retries: u64,
    /// First retry delay.
    #[arg(long, value_parser = super::values::duration, default_value = "2s", value_name = "DURATION")]
    retry_base: Duration,
    /// Run id (default: <loop-file-stem>-<yyyyMMdd-HHmmss>); also the run folder's name.
    /// ASCII letters, digits, '-', '_' or '.', starting with a letter or digit, at most 128.
    #[arg(long, value_parser = run_id)]
    run_id: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Continue an interrupted run from its log alone: the phase that was running is run again as a
/// new attempt (the old attempt's output stays), then the loop goes on. Completed, stopped and
/// failed runs are not resumed.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl resume                            # the current run (current.json, else the newest)\n  loopctl resume fix-the-tests -v           # by alias, its phases' output on stderr\n  loopctl list --json | jq -r '.[] | select(.status==\"interrupted\") | .resume'"
)]
pub struct ResumeArgs {
    #[command(flatten)]
    target: super::RunArg,
    #[command(flatten)]
    common: Common,
}

fn abs(p: PathBuf) -> PathBuf {
    std::path::absolute(&p).unwrap_or(p)
}

pub fn run(ctx: &Ctx, a: RunArgs) -> anyhow::Result<u8> {
    one_stdout(&a.common)?;
    let text = match std::fs::read_to_string(&a.loop_file) {
        Ok(t) => t,
        // A loop file that cannot be read is a bad loop file: exit 1 and a FAILED sentinel.
        Err(e) => {
            return bad_loop_file(&a, &[format!("{}: {e}", a.loop_file.display())]);
        }
    };
    let initial = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => Some(p.clone()),
        (_, Some(f)) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("reading --prompt-file {}", f.display()))?,
        ),
        _ => None,
    };
    let agent = match &a.agent {
        Some(s) => Some(
            agent_argv(&Value::String(s.clone())).map_err(|e| anyhow::anyhow!("--agent {e}"))?,
        ),
        None => None,
    };
    let prepared = match prepare(&a.loop_file, &text, initial.clone(), agent.as_deref()) {
        Ok(p) => p,
        Err(refused) => {
            for w in &refused.warnings {
                output::warn(&format!("{}: {w}", a.loop_file.display()));
            }
            return bad_loop_file(&a, &refused.errors);
        }
    };
    for w in &prepared.warnings {
        output::warn(&format!("{}: {w}", a.loop_file.display()));
    }
    let mut opts = RunOptions::new(abs(a.dir.clone().unwrap_or_else(|| PathBuf::from("."))));
    if !opts.workdir.is_dir() {
        anyhow::bail!("--dir {}: not a folder", opts.workdir.display());
    }
    opts.agent = agent;
    opts.loop_file = Some(abs(a.loop_file.clone()));
    opts.max_retries = a.max_retries;
    opts.retry_base_ms = a.retry_base.as_millis() as u64;
    apply_common(&mut opts, &a.common);
    let runner = Runner::start(&ctx.root, a.run_id, prepared.file, opts, initial)?;
    drive(ctx, runner, &a.common)
}

/// Says what is wrong with the loop file, writes the FAILED sentinel if one is asked for, and
/// gives the exit code of a bad loop file (1).
fn bad_loop_file(a: &RunArgs, errors: &[String]) -> anyhow::Result<u8> {
    for e in errors {
        output::error(e);
    }
    if let Some(s) = &a.common.sentinel_file {
        write_config_failure(s, &errors.join("; "), a.run_id.as_deref().unwrap_or(""))
            .context("writing the FAILED sentinel")?;
    }
    Ok(1)
}

/// `--json` prints run.json on stdout: the events cannot go there too.
fn one_stdout(c: &Common) -> anyhow::Result<()> {
    if c.json && c.on_event.as_deref() == Some("-") {
        anyhow::bail!(
            "--json and --on-event - both write to stdout: send the events to a file, or leave out --json"
        );
    }
    Ok(())
}

fn apply_common(opts: &mut RunOptions, c: &Common) {
    if let Some(t) = c.timeout {
        opts.timeout_ms = Some(t.as_millis() as u64);
    }
    if let Some(s) = &c.sentinel_file {
        opts.sentinel_file = Some(abs(s.clone()));
    }
    if let Some(o) = &c.on_event {
        opts.on_event = Some(if o == "-" {
            o.clone()
        } else {
            abs(PathBuf::from(o)).display().to_string()
        });
    }
    opts.echo = c.echo;
}

pub fn resume(ctx: &Ctx, a: ResumeArgs) -> anyhow::Result<u8> {
    one_stdout(&a.common)?;
    let run = ctx.target(&a.target)?;
    let runner = match Runner::resume(&ctx.root, &run, |o| apply_common(o, &a.common)) {
        Ok(r) => r,
        Err(RunnerError::NotResumable(why)) => {
            output::error(&why);
            return Ok(crate::exit::ERROR);
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(g) = runner.ended_group {
        output::warn(&format!(
            "ended the phase the interrupted runner left running (process group {g})"
        ));
    }
    drive(ctx, runner, &a.common)
}

/// The live trace export, when an endpoint is named; a collector that cannot be set up is
/// warned about and the run goes on without it.
fn live_export(ctx: &Ctx, runner: &Runner, c: &Common) -> Option<otel::Live> {
    let cfg = otel::Config::live_from_env(c.otlp_endpoint.as_deref())?;
    let log = runner.dir().join(loopctl_store::discover::LOG_NAME);
    let warn = |w: &str| output::warn(w);
    match otel::Live::attach(&cfg, &log, runner.run_id(), ctx.read.max_line, warn) {
        Ok(l) => Some(l),
        Err(e) => {
            output::warn(&format!("otel: {e}; the run goes on without its trace"));
            None
        }
    }
}

fn drive(ctx: &Ctx, runner: Runner, c: &Common) -> anyhow::Result<u8> {
    if !c.quiet {
        output::note(&format!(
            "run {} in {} (log: history.jsonl)",
            runner.run_id(),
            runner.dir().display()
        ));
    }
    let quiet = c.quiet;
    let live = Rc::new(RefCell::new(live_export(ctx, &runner, c)));
    let mut runner = runner;
    if live.borrow().is_some() {
        let run_id = runner.run_id().to_string();
        runner = runner
            .phase_env(move |seq| vec![("TRACEPARENT", otel::ids::traceparent(&run_id, seq))]);
    }
    let feed = live.clone();
    let runner = runner.observe(move |ev| {
        if !quiet && let Some(line) = progress_line(ev) {
            let _ = writeln!(anstream::stderr(), "{line}");
        }
        if let Some(l) = feed.borrow_mut().as_mut() {
            l.event(ev);
        }
    });
    let runner = runner
        .on_warning(|w| {
            let _ = writeln!(std::io::stderr(), "warning: {w}");
        })
        .on_output(|bytes| {
            let _ = std::io::stderr().write_all(bytes);
        });
    let f = runner.execute();
    if let Some(l) = live.borrow_mut().take() {
        l.finish(otel::live::FLUSH_WAIT);
    }
    let f = f?;
    if c.json {
        output::json_pretty(&f.state);
    }
    if !c.quiet {
        summary(&f);
    }
    Ok(f.sentinel.code.clamp(0, 255) as u8)
}

fn where_(ev: &Event<'_>, p: &Value) -> String {
    let kind = p.get("kind").and_then(Value::as_str).unwrap_or("");
    let at = match (kind, ev.iteration) {
        ("loop", Some(i)) => format!("it {i}"),
        (k, _) => k.to_string(),
    };
    format!("{:<16} {:<6}", ev.step.as_deref().unwrap_or(""), at)
}

fn progress_line(ev: &Event<'_>) -> Option<String> {
    let p = ev.payload_value();
    let clock = ev
        .ts
        .map(|t| t.to_rfc3339()[11..19].to_string())
        .unwrap_or_default();
    let body = match ev.kind {
        Kind::PhaseStarted => {
            let attempt = p.get("attempt").and_then(Value::as_u64).unwrap_or(1);
            format!(
                "{} {}{}",
                where_(ev, &p),
                "started".dimmed(),
                if attempt > 1 {
                    format!(" (attempt {attempt})")
                } else {
                    String::new()
                }
            )
        }
        Kind::PhaseFinished => {
            let secs = p.get("duration_ms").and_then(Value::as_u64).unwrap_or(0) as f64 / 1000.0;
            let reason = p.get("stop_reason").and_then(Value::as_str).unwrap_or("");
            let verdict = if reason == "end_turn" {
                "ok".green().to_string()
            } else {
                let code = p.get("exit_code").map(Value::to_string).unwrap_or_default();
                format!("{} {reason} (exit {code})", "failed".red())
            };
            let marker = p
                .get("marker")
                .and_then(|m| {
                    let d = m.get("directive")?.as_str()?;
                    let l = m.get("label").and_then(Value::as_str);
                    Some(format!(
                        "  <|workflow: {d}{}|>",
                        l.map(|l| format!(" | {l}")).unwrap_or_default()
                    ))
                })
                .unwrap_or_default();
            format!("{} {verdict} {secs:.1}s{}", where_(ev, &p), marker.bold())
        }
        Kind::PhaseRetry => format!(
            "{} {} {} in {}ms",
            where_(ev, &p),
            "retry".yellow(),
            p.get("retry").map(Value::to_string).unwrap_or_default(),
            p.get("delay_ms").map(Value::to_string).unwrap_or_default()
        ),
        Kind::RunResumed => format!("{}", "resumed from the log".cyan()),
        _ => return None,
    };
    Some(format!("{} {body}", clock.dimmed()))
}

fn summary(f: &Finished) {
    let s = &f.state;
    let status = match s.status {
        loopctl_core::Status::Completed => s.status.as_str().green().to_string(),
        loopctl_core::Status::Failed => s.status.as_str().red().to_string(),
        _ => s.status.as_str().yellow().to_string(),
    };
    // The stop reason `status` and run.json give (`iteration_limit`, `user_stop`, ...), not the
    // exit reason (`max_iterations`, `cancelled`): one word for one ending.
    let reason = match &f.ending.decided {
        _ if !s.stop.reason.is_empty() => s.stop.reason.as_str(),
        Some(d) => d.reason.as_str(),
        None => f.ending.reason.as_str(),
    };
    // An abort's label is its stop reason already: said once.
    let label = f
        .ending
        .label
        .as_deref()
        .or(s.stop.detail.as_deref())
        .filter(|l| *l != reason)
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    let _ = writeln!(
        anstream::stderr(),
        "run {} {status} ({}{label}) after {} iteration(s): {} (exit {})",
        f.run_id,
        reason,
        f.ending.iterations_completed,
        f.sentinel.status,
        f.sentinel.code
    );
    if let Some(e) = &s.last_error
        && s.status == loopctl_core::Status::Failed
    {
        output::error(e);
    }
}
