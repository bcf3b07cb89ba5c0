//! `loopctl tail`: follow live runs, one line per event, for people (`--json` for scripts).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Args as ClapArgs;
use loopctl_core::Ts;
use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::decode::event::{Event, Kind};
use loopctl_core::decode::lines::Pos;
use loopctl_core::fold::live_runs::LiveRuns;
use loopctl_core::fold::replay::{Finding, FindingKind, SeqState};
use loopctl_core::fold::{Damage, Line, Projection, feed};
use loopctl_core::render::visible;
use loopctl_follow::{Follower, Item, Start};
use loopctl_store::discover;
use loopctl_store::fold::fold_prefix;

use super::Ctx;
use super::timeline::{Colors, human, iteration_header};
use crate::output;

/// Follow one or more runs as they happen: one line per event. RUN may be a run folder, a log
/// file of any dialect, a run id or alias, or a root folder (runs that appear in it later are
/// picked up). With no RUN: the active run (current.json), else the newest run under the root.
///
/// Findings are reported on stderr as every reader reports them (file:line: byte N: kind:
/// reason): damaged lines are skipped, and so is a line repeating its run's last seq (replay
/// does not apply it), in every format. With --no-follow the bytes after the last newline are
/// the last line: an event, or a torn tail; when following, they wait for their newline. Under
/// --strict, findings make the exit code 1 once tail ends (unless --until-done gives another);
/// a following tail ended by Ctrl-C exits 130, or 1 under --strict when there were findings.
#[derive(ClapArgs)]
#[command(after_help = "\
Examples:
  loopctl tail                         # the active run, last 10 events, then follow
  loopctl tail .loopctl --level milestones
  loopctl tail run1 --json | jq .event
  loopctl tail run1 --until-done; echo \"loop ended with $?\"

--until-done exits with the code the run's sentinel gives (the same rule as `loopctl run`, in
docs/runner.md): 0 DONE, 3 DONE stopped for stagnation, 5 BLOCKED (abort, ask a human), the
phase's code for FAILED, 124 TIMEOUT, 130 KILLED/user_stop. Logs without an exit_reason
(aif-loop) get the same codes from their stop reason: 1 for a failure without a code.")]
pub struct Args {
    /// Runs, log files or root folders to follow.
    targets: Vec<String>,
    /// Start with the last N events of each log (after filters). The lines before them are
    /// read too, not printed and not reported, so seqs are judged as replay judges them: a
    /// line repeating its run's last seq is not printed, so not counted.
    #[arg(short = 'n', long, value_name = "N", value_parser = super::values::usize_from(0))]
    lines: Option<usize>,
    /// Start with events at or after TIME (RFC 3339) or this long ago (10m, 2h).
    #[arg(long, value_name = "TIME|DURATION")]
    since: Option<String>,
    /// Print what is there and exit.
    #[arg(long)]
    no_follow: bool,
    /// Only these event types (native names, e.g. phase_finished; repeatable).
    #[arg(long = "event", value_name = "NAME")]
    events: Vec<String>,
    /// Only events of this phase (quality phase A/B, or a runner phase name).
    #[arg(long)]
    phase: Option<String>,
    /// Only events of this iteration.
    #[arg(long)]
    iteration: Option<u64>,
    /// Only events of this run (id or alias).
    #[arg(long)]
    run: Option<String>,
    /// `milestones`: loop and phase boundaries, evaluations, retries, errors, stops.
    #[arg(long, value_parser = ["all", "milestones"], default_value = "all")]
    level: String,
    /// Normalised events as NDJSON (loopctl's native format).
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    /// The original lines, as written.
    #[arg(long)]
    raw: bool,
    /// Exit when the followed run ends, with the exit code its sentinel gives; 1 if its runner
    /// is gone before it ended (interrupted: nothing will end it but resume or stop), or, with
    /// --no-follow, if it has not ended. Following several runs (a root, a merged log), it
    /// exits once all of them have ended, with the code of the last to end: at once when none
    /// runs; a run started later is not waited for.
    #[arg(long)]
    until_done: bool,
    /// How often to check files when no notification arrives, in milliseconds.
    #[arg(long, default_value_t = 250, value_parser = super::values::count_u64(), value_name = "MS")]
    poll_ms: u64,
}

struct Filter {
    events: BTreeSet<String>,
    phase: Option<String>,
    iteration: Option<u64>,
    run: Option<String>,
    milestones: bool,
    since: Option<Ts>,
}

impl Filter {
    fn keep(&self, ev: &Event<'_>) -> bool {
        (self.events.is_empty() || self.events.contains(ev.name.as_ref()))
            && self.phase.as_ref().is_none_or(|p| {
                ev.phase.as_deref() == Some(p.as_str()) || ev.step.as_deref() == Some(p.as_str())
            })
            && self.iteration.is_none_or(|i| ev.iteration == Some(i))
            && self.run.as_ref().is_none_or(|r| {
                ev.run_id
                    .as_deref()
                    .is_some_and(|id| id == r || loopctl_core::fold::run_state::alias_of(id) == r)
            })
            && (!self.milestones || ev.kind.is_milestone())
            && self.since.is_none_or(|s| ev.ts.is_some_and(|t| t >= s))
    }
}

fn parse_since(s: &str) -> anyhow::Result<Ts> {
    if let Some(t) = Ts::parse_rfc3339(s) {
        return Ok(t);
    }
    let d = humantime::parse_duration(s).with_context(|| {
        format!("--since {s:?}: neither an RFC 3339 time nor a duration (10m, 2h)")
    })?;
    let now = loopctl_store::clock::now().millis();
    Ok(Ts::from_millis(now.saturating_sub(
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
    )))
}

/// A followed log and what is known about it.
struct Log {
    name: String,
    /// Named in what is said about its lines.
    path: PathBuf,
    /// The runs seen in it (`--until-done` asks whether one is left unfinished).
    runs: BTreeSet<String>,
    /// The one run of the log to follow, when RUN named it (a run id or alias).
    only: Option<String>,
    /// Offset just past the last line taken: a line before it means the log is read again
    /// from its start (truncated, replaced), its runs' seqs checked afresh.
    next: u64,
}

struct Tail {
    filter: Filter,
    mode: Mode,
    logs: Vec<Log>,
    /// The followed runs' states, and the exit code of the run that ended last.
    runs: LiveRuns,
    colors: Colors,
    out: anstream::AutoStream<std::io::Stdout>,
    /// The first failed write to `out`: nothing more is written.
    write_error: Option<std::io::Error>,
    /// On a terminal: a status line under the stream with the running phase and its elapsed time.
    status: Option<indicatif::ProgressBar>,
    /// Longer lines are reported and skipped, as every reader does (`--max-line-bytes`).
    max_line: usize,
    /// Per log and run: events applied and last seq, for replay's seq checks.
    seqs: HashMap<(usize, String), SeqState>,
    /// Findings reported (`--strict` makes them exit 1).
    findings: usize,
    /// Findings printed, per log (`output::SHOWN` at most).
    said: output::Findings,
}

#[derive(PartialEq, Clone, Copy)]
enum Mode {
    Human,
    Json,
    Raw,
}

/// A line of a followed log, decoded and parsed as every reader does (`fold::feed`).
struct Live<'t> {
    tail: &'t mut Tail,
    log: usize,
    raw: &'t [u8],
}

impl Projection for Live<'_> {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        self.tail.parsed(self.log, line.pos, self.raw, ev, false);
    }
    fn damaged(&mut self, line: Line, damage: &Damage) {
        let (kind, reason) = damage.finding(&line);
        self.tail.damaged(self.log, line.pos, kind, &reason);
    }
}

impl Tail {
    /// A line of log `log`; `terminated` false for the bytes after its last newline.
    fn event(&mut self, log: usize, pos: Pos, raw: &[u8], terminated: bool) {
        if pos.offset < self.logs[log].next {
            self.seqs.retain(|(l, _), _| *l != log);
        }
        self.logs[log].next = pos.offset + raw.len() as u64 + 1;
        let line = Line {
            pos,
            len: raw.len() as u64,
            terminated,
        };
        if raw.len() > self.max_line {
            let (kind, reason) = Damage::Oversize.finding(&line);
            return self.damaged(log, pos, kind, &reason);
        }
        feed(
            &mut Live {
                tail: self,
                log,
                raw,
            },
            line,
            raw,
            None,
        );
    }

    /// `event` once the line is parsed. A line repeating its run's last seq is reported and
    /// skipped, as replay skips it.
    fn parsed(&mut self, log: usize, pos: Pos, raw: &[u8], ev: &Event<'_>, quiet: bool) {
        let key = ev
            .run_id
            .as_deref()
            .unwrap_or(&self.logs[log].name)
            .to_string();
        if self.logs[log].only.as_ref().is_some_and(|o| *o != key) {
            return;
        }
        if self.seq_duplicate(log, pos, &key, ev.seq, quiet) {
            return;
        }
        let new_iteration = self.runs.apply(&key, ev);
        if !self.logs[log].runs.contains(&key) {
            self.logs[log].runs.insert(key.clone());
        }
        if quiet || !self.filter.keep(ev) {
            return;
        }
        let line = match self.mode {
            Mode::Raw => String::from_utf8_lossy(raw)
                .trim_end_matches('\r')
                .to_string(),
            Mode::Json => {
                let mut e = ev.clone();
                e.run_id = Some(key.clone().into());
                e.to_native_line()
            }
            Mode::Human => {
                let color = self.colors.of(&key);
                let Some(state) = self.runs.state(&key) else {
                    return;
                };
                let mut s = String::new();
                if new_iteration && self.filter.phase.is_none() {
                    s.push_str(&iteration_header(&key, state, color));
                    s.push('\n');
                }
                s.push_str(&human(ev, &key, state, color, false, false));
                s
            }
        };
        if let Some(pb) = self.status.clone() {
            match ev.kind {
                Kind::PhaseStarted => {
                    pb.reset_elapsed();
                    pb.set_message(format!(
                        "{key}: {} running",
                        ev.step.as_deref().unwrap_or("phase")
                    ));
                }
                Kind::PhaseFinished | Kind::Stopped | Kind::Failed => pb.set_message(String::new()),
                _ => {}
            }
            pb.suspend(|| self.write(&line, true));
            return;
        }
        self.write(&line, false);
    }

    /// Writes a line to stdout; the first failure is kept and ends all output.
    fn write(&mut self, line: &str, flush: bool) {
        if self.write_error.is_some() {
            return;
        }
        let r = writeln!(self.out, "{line}")
            .and_then(|()| if flush { self.out.flush() } else { Ok(()) });
        self.write_error = r.err();
    }

    /// Whether output has ended: `Some(0)` when stdout's reader went away (`tail | head -1`),
    /// an error when writing failed otherwise.
    fn output_ended(&mut self, follower: &Follower) -> anyhow::Result<Option<u8>> {
        if self.write_error.is_none()
            && let Err(e) = self.out.flush()
        {
            self.write_error = Some(e);
        }
        match &self.write_error {
            Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Some(crate::exit::OK)),
            Some(e) => Err(anyhow::anyhow!("writing to stdout: {e}")),
            None if follower.stdout_closed() => Ok(Some(crate::exit::OK)),
            None => Ok(None),
        }
    }

    /// Replay's seq checks for an event of run `key` of log `log`, its finding reported
    /// unless `quiet`; whether the event repeats the run's last seq (then it is not applied).
    fn seq_duplicate(
        &mut self,
        log: usize,
        pos: Pos,
        key: &str,
        seq: Option<u64>,
        quiet: bool,
    ) -> bool {
        let step = self
            .seqs
            .entry((log, key.to_string()))
            .or_default()
            .step(seq);
        if let Some((kind, reason)) = step.finding
            && !quiet
        {
            self.damaged(log, pos, kind, &reason);
        }
        step.duplicate
    }

    /// Says it as every reader does (`file:line: byte N: kind: reason`), naming the log file.
    fn damaged(&mut self, log: usize, pos: Pos, kind: FindingKind, reason: &str) {
        self.findings += 1;
        let f = Finding {
            line: pos.line,
            offset: pos.offset,
            kind,
            reason: reason.to_string(),
            run_id: None,
        };
        let path = &self.logs[log].path;
        // Line numbers are unknown when following started mid-file.
        let text = if pos.line > 0 {
            output::finding(path, &f)
        } else {
            let kind = output::kind(&f);
            format!("{}: byte {}: {kind}: {reason}", path.display(), pos.offset)
        };
        if self.said.warn(path, &text) {
            output::note(&format!(
                "further findings in {} are not printed (--strict still counts them)",
                path.display()
            ));
        }
    }
}

/// The part of a log before the window tail prints, folded silently (nothing printed, nothing
/// reported) into the run states and their seqs.
struct Before<'t> {
    tail: &'t mut Tail,
    log: usize,
}

impl Projection for Before<'_> {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        self.tail.parsed(self.log, line.pos, &[], ev, true);
    }
}

/// Where the last `n` events tail would print of a log begin, read from its start: only so
/// can a run's seqs be judged as replay does (a line repeating the last seq is not printed,
/// so not counted). An unterminated last line is not counted (a write under way).
struct Window<'a> {
    filter: &'a Filter,
    log: &'a Log,
    n: usize,
    seqs: HashMap<String, SeqState>,
    /// The starts of the last `n` events to print.
    starts: VecDeque<Pos>,
    /// Just after the last complete line.
    end: Start,
    /// The bytes after the last newline are the log's last line (`--no-follow` prints them).
    whole_tail: bool,
}

impl Projection for Window<'_> {
    fn event(&mut self, line: Line, ev: &Event<'_>) {
        if !line.terminated && !self.whole_tail {
            return;
        }
        self.lines(line);
        let key = ev.run_id.as_deref().unwrap_or(&self.log.name);
        if self.log.only.as_deref().is_some_and(|o| o != key) {
            return;
        }
        let seqs = match self.seqs.get_mut(key) {
            Some(s) => s,
            None => self.seqs.entry(key.to_string()).or_default(),
        };
        if seqs.step(ev.seq).duplicate || !self.filter.keep(ev) || self.n == 0 {
            return;
        }
        if self.starts.len() == self.n {
            self.starts.pop_front();
        }
        self.starts.push_back(line.pos);
    }
    fn damaged(&mut self, line: Line, _damage: &Damage) {
        self.lines(line);
    }
    fn blank(&mut self, line: Line) {
        self.lines(line);
    }
}

impl Window<'_> {
    fn lines(&mut self, line: Line) {
        if line.terminated {
            self.end = Start::Line {
                offset: line.end(),
                before: line.pos.line,
            };
        }
    }

    /// Where to start: the first of the last `n` events, the end when `n` is 0, else the start.
    fn start(&self) -> Start {
        match self.starts.front() {
            _ if self.n == 0 => self.end,
            Some(p) if self.starts.len() == self.n => Start::Line {
                offset: p.offset,
                before: p.line - 1,
            },
            _ => Start::Beginning,
        }
    }
}

/// A log to follow, the name of its default run, and the one run to follow in it when RUN
/// named one.
type Target = (PathBuf, String, Option<String>);

fn targets(ctx: &Ctx, specs: &[String]) -> anyhow::Result<(Vec<Target>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut roots = Vec::new();
    if specs.is_empty() {
        let run = ctx.resolve(None).context("no run to follow")?;
        files.push((run.log, run.name, run.run_id));
        return Ok((files, roots));
    }
    for spec in specs {
        let p = Path::new(spec);
        if p.is_dir() && discover::folder_log(p).is_none() {
            for r in discover::list_runs(p).unwrap_or_default() {
                files.push((r.log, r.name, None));
            }
            roots.push(p.to_path_buf());
            continue;
        }
        let r = ctx.resolve(Some(spec))?;
        files.push((r.log, r.name, r.run_id));
    }
    Ok((files, roots))
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let filter = Filter {
        events: a.events.iter().cloned().collect(),
        phase: a.phase.clone(),
        iteration: a.iteration,
        run: a.run.clone(),
        milestones: a.level == "milestones",
        since: a.since.as_deref().map(parse_since).transpose()?,
    };
    let (files, roots) = targets(ctx, &a.targets)?;
    let mode = if a.json {
        Mode::Json
    } else if a.raw {
        Mode::Raw
    } else {
        Mode::Human
    };
    let mut tail = Tail {
        filter,
        mode,
        logs: Vec::new(),
        runs: LiveRuns::default(),
        colors: Colors::default(),
        out: anstream::stdout(),
        write_error: None,
        status: None,
        max_line: ctx.read.max_line,
        seqs: HashMap::new(),
        findings: 0,
        said: output::Findings::default(),
    };
    if mode == Mode::Human && !a.no_follow && std::io::stdout().is_terminal() {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(Duration::from_millis(500));
        tail.status = Some(pb);
    }
    let poll = Duration::from_millis(a.poll_ms.max(1));
    let mut follower = if a.no_follow {
        Follower::without_notifications(poll)
    } else {
        let f = Follower::new(poll);
        f.watch_stdout();
        f
    };
    // Roots first: their run folders then need no watch of their own.
    for r in &roots {
        follower.watch(r);
    }
    let first = a
        .lines
        .unwrap_or(if a.since.is_some() { usize::MAX } else { 10 });
    let mut known: BTreeSet<PathBuf> = BTreeSet::new();
    for (path, name, only) in &files {
        let log = Log {
            name: name.clone(),
            path: path.clone(),
            runs: BTreeSet::new(),
            only: only.clone(),
            next: 0,
        };
        let max_line = ctx.read.max_line;
        add_log(
            &mut tail,
            &mut follower,
            path,
            log,
            first,
            max_line,
            a.no_follow,
        )?;
        known.insert(path.clone());
    }
    let pump = |tail: &mut Tail, follower: &mut Follower| {
        follower.poll(&mut |item| match item {
            Item::Line {
                source,
                line,
                offset,
                text,
            } => tail.event(source, Pos { line, offset }, &text, true),
            Item::Notice { source, text } => {
                output::note(&format!("{}: {text}", visible(&tail.logs[source].name)))
            }
            Item::Gone { .. } => {}
            // Its lines come again from the start; `event` sees the offset go back.
            Item::Restarted { .. } => {}
        });
    };
    // Ctrl-C ends a following tail with its exit code (130, or 1 under --strict with
    // findings); a second one ends it at once, should it be stuck writing.
    let interrupted = Arc::new(AtomicBool::new(false));
    if !a.no_follow {
        let sig = signal_hook::consts::SIGINT;
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&interrupted))?;
        signal_hook::flag::register(sig, Arc::clone(&interrupted))?;
    }
    let mut follow = || -> anyhow::Result<u8> {
        pump(&mut tail, &mut follower);
        if a.no_follow {
            // A single look: the bytes after the last newline are the log's last line, whole or
            // torn (when following, its writer may still be writing it).
            for item in follower.unterminated() {
                if let Item::Line {
                    source,
                    line,
                    offset,
                    text,
                } = item
                {
                    tail.event(source, Pos { line, offset }, &text, false);
                }
            }
        }
        loop {
            if let Some(code) = tail.output_ended(&follower)? {
                return Ok(code);
            }
            if a.until_done
                && let Some(code) = done_code(&tail, &files)
            {
                return Ok(code.clamp(0, 255) as u8);
            }
            if a.until_done
                && !a.no_follow
                && tail.take_ending_tail(&follower)
                && let Some(code) = done_code(&tail, &files)
            {
                return Ok(code.clamp(0, 255) as u8);
            }
            if a.until_done && a.no_follow {
                output::note("the run has not ended (--until-done with --no-follow): exit 1");
                return Ok(crate::exit::FINDINGS);
            }
            if a.no_follow {
                return Ok(crate::exit::OK);
            }
            if a.until_done && !tail.abandoned().is_empty() {
                // Whatever its runner wrote before it let go of the lock, then the verdict.
                pump(&mut tail, &mut follower);
                if let Some(code) = done_code(&tail, &files) {
                    return Ok(code.clamp(0, 255) as u8);
                }
                for (log, run) in tail.abandoned() {
                    // Named as `status` names it (with --root when the root is not the default).
                    let resume = discover::resume_command(&ctx.root, &discover::RunRef::file(&log));
                    output::warn(&format!(
                        "{run} will not end: its runner is gone (interrupted); `{resume}` continues it"
                    ));
                }
                return Ok(crate::exit::FINDINGS);
            }
            if follower.live_sources() == 0 && roots.is_empty() {
                output::note("nothing left to follow");
                return Ok(crate::exit::OK);
            }
            follower.wait();
            if let Some(code) = tail.output_ended(&follower)? {
                return Ok(code);
            }
            if interrupted.load(Ordering::SeqCst) {
                pump(&mut tail, &mut follower);
                let findings = ctx.strict && tail.findings > 0;
                return Ok(if findings { crate::exit::OK } else { 130 });
            }
            for root in &roots {
                for r in discover::list_runs(root).unwrap_or_default() {
                    if known.insert(r.log.clone()) {
                        output::note(&format!("new run {}", visible(&r.name)));
                        let log = Log {
                            name: r.name.clone(),
                            path: r.log.clone(),
                            runs: BTreeSet::new(),
                            only: None,
                            next: 0,
                        };
                        let max_line = ctx.read.max_line;
                        let (log_path, n) = (&r.log, usize::MAX);
                        add_log(&mut tail, &mut follower, log_path, log, n, max_line, false)?;
                    }
                }
            }
            pump(&mut tail, &mut follower);
        }
    };
    let code = follow()?;
    Ok(tail.exit_code(ctx.strict, code))
}

impl Tail {
    /// With --until-done: the bytes after a log's last newline, when they are an event that
    /// leaves every followed run ended (a writer that ended its log without a newline, as
    /// replay and `status` read it), are taken as the log's last line. Taken only then, so a
    /// line its writer is still writing is never printed twice.
    fn take_ending_tail(&mut self, follower: &Follower) -> bool {
        for item in follower.unterminated() {
            let Item::Line {
                source,
                line,
                offset,
                text,
            } = item
            else {
                continue;
            };
            let decoded = loopctl_core::decode::lines::decode(&text).text();
            let Some(ev) = decoded.and_then(|t| loopctl_core::parse_line(t).ok()) else {
                continue;
            };
            let log = &self.logs[source];
            let key = ev.run_id.as_deref().unwrap_or(&log.name);
            if log.only.as_deref().is_some_and(|o| o != key) || !self.runs.ended_by(key, &ev) {
                continue;
            }
            self.event(source, Pos { line, offset }, &text, false);
            return true;
        }
        false
    }

    /// `code`, or under `--strict` the findings code when there were findings and nothing
    /// else to say.
    fn exit_code(&self, strict: bool, code: u8) -> u8 {
        if code != crate::exit::OK || !strict || self.findings == 0 {
            return code;
        }
        output::error(&format!("{} finding(s) (--strict)", self.findings));
        crate::exit::of_reading(false, false, true)
    }

    /// The unfinished runs of logs whose runner is gone (a free lock: killed, crashed): they
    /// cannot end until someone resumes or stops them.
    /// (log, run id) of the runs that have not ended and whose runner is gone.
    fn abandoned(&self) -> Vec<(PathBuf, String)> {
        let unfinished = |id: &&String| self.runs.state(id).is_some_and(|s| !s.is_terminal());
        self.logs
            .iter()
            .filter(|l| l.runs.iter().any(|id| unfinished(&id)))
            .filter(|l| loopctl_store::append::liveness(&l.path) == Liveness::Dead)
            .flat_map(|l| (l.runs.iter().filter(unfinished)).map(|id| (l.path.clone(), id.clone())))
            .collect()
    }
}

/// With --until-done: every followed run has ended; the code of the last one that did.
fn done_code(tail: &Tail, files: &[Target]) -> Option<i32> {
    if files.is_empty() {
        return None;
    }
    tail.runs.done_code()
}

/// Adds a log: its last `first` matching events are printed, then it is followed. The part
/// before those is applied silently, so run states (--until-done's verdict, the iteration
/// headers) and seqs are those of the whole log.
fn add_log(
    tail: &mut Tail,
    follower: &mut Follower,
    path: &Path,
    log: Log,
    first: usize,
    max_line: usize,
    whole_tail: bool,
) -> anyhow::Result<()> {
    let start = if first == usize::MAX {
        Start::Beginning
    } else {
        let mut window = Window {
            filter: &tail.filter,
            log: &log,
            n: first,
            seqs: HashMap::new(),
            starts: VecDeque::new(),
            end: Start::Beginning,
            whole_tail,
        };
        fold_prefix(path, u64::MAX, max_line, &mut window)?; // store errors name the file
        window.start()
    };
    let index = tail.logs.len();
    tail.logs.push(log);
    if let Start::Line { offset, .. } = start {
        let mut before = Before { tail, log: index };
        fold_prefix(path, offset, max_line, &mut before)?;
    }
    let source = follower.add(path, start);
    debug_assert_eq!(source, index);
    Ok(())
}
