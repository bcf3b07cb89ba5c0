//! The loop driver. Every fact goes to `history.jsonl` first (fsynced), then into the state,
//! `run.json`, the `--on-event` stream and the caller's observer. What to do next is always
//! `next_step::next_step` over the events written so far, so a resumed run takes the same path.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopctl_core::decode::event::Kind;
use loopctl_core::fold::run_state::{LogMark, fingerprint};
use loopctl_core::fold::trace::Trace;
use loopctl_core::rules::loop_file::{LoopFile, Phase, PhaseKind};
use loopctl_core::rules::next_step::{self, Cursor, Ending, ExitReason, Pos, Shape, Step};
use loopctl_core::rules::sentinel::Sentinel;
use loopctl_core::{Event, Replay, RunState, apply_mut, parse_line, render::avenor_events};
use loopctl_store::StoreError;
use loopctl_store::append::{Fsync, LogWriter};
use loopctl_store::discover::{self, CURRENT, Current, LOG_NAME, RUN_JSON, RunRef};
use loopctl_store::fold::fold_file;
use loopctl_store::read::ReadOptions;
use loopctl_store::snapshot::{folder_run, render, run_json_of, state_file, write_atomic};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::after_crash;
use crate::control::{Control, Interrupt};
use crate::phase::{self, Attempt, Program};
use crate::template::{self, Vars};
use memory::{Memories, Memory};
use snapshots::SnapshotWriter;

mod decide;
mod memory;
mod prepare;
mod record;
mod snapshots;
#[cfg(test)]
mod tests;
pub use decide::ESCALATION;
pub use prepare::{Prepared, Refused, prepare};
use prepare::{open_sink, prompt_path, running};

/// The stop reason of a phase the stall watchdog ended.
const STALLED: &str = "stalled";

/// Where `loopctl stop` leaves its reason for a live runner (`clean` knows these names).
pub use loopctl_store::clean::STOP_REQUEST;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The cause is part of the message, not also its `source()` (printed once in a chain).
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{0}")]
    NotResumable(String),
    /// An output outside the run folder (the `--on-event` stream) cannot be opened.
    #[error("{0}")]
    Output(String),
    #[error("{0}")]
    Invalid(String),
}

type Result<T> = std::result::Result<T, RunnerError>;

fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RunnerError {
    let path = path.into();
    move |cause| RunnerError::Io { path, cause }
}

/// How a run is driven. Stored in its `run_started` event, so `resume` needs nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// `--agent`: the argv template of prompt phases without an agent of their own.
    pub agent: Option<Vec<String>>,
    /// Where phases run (absolute).
    pub workdir: PathBuf,
    /// The loop file (absolute); `prompt_file`s are relative to its folder.
    pub loop_file: Option<PathBuf>,
    pub timeout_ms: Option<u64>,
    pub max_retries: u64,
    pub retry_base_ms: u64,
    pub retry_cap_ms: u64,
    pub sentinel_file: Option<PathBuf>,
    /// A file to append Avenor lifecycle events to, or `-` for stdout.
    pub on_event: Option<String>,
    /// Copy phase output to the `Runner::on_output` sink (not stored: a presentation choice
    /// of this invocation).
    #[serde(skip)]
    pub echo: bool,
}

impl RunOptions {
    pub fn new(workdir: PathBuf) -> RunOptions {
        RunOptions {
            agent: None,
            workdir,
            loop_file: None,
            timeout_ms: None,
            max_retries: 0,
            retry_base_ms: 2000,
            retry_cap_ms: 30_000,
            sentinel_file: None,
            on_event: None,
            echo: false,
        }
    }
}

/// How a run ended, for the caller to report.
#[derive(Debug, Clone)]
pub struct Finished {
    pub run_id: String,
    pub dir: PathBuf,
    pub ending: Ending,
    pub sentinel: Sentinel,
    pub state: RunState,
}

pub struct Runner {
    root: PathBuf,
    dir: PathBuf,
    run_id: String,
    cfg: LoopFile,
    opts: RunOptions,
    shape: Shape,
    writer: LogWriter,
    state: RunState,
    cursor: Cursor,
    /// What the stagnation detectors read, folded from the same events.
    trace: Trace,
    line: u64,
    sink: Option<Box<dyn Write + Send>>,
    control: Arc<Control>,
    observer: Box<dyn FnMut(&Event<'_>)>,
    /// Extra environment for a phase process, from the seq of its `phase_started` (the live
    /// trace export's `TRACEPARENT`).
    phase_env: Box<dyn FnMut(u64) -> Vec<(&'static str, String)>>,
    /// Where warnings go (a decision's warning, a failed run.json write): the caller's to print.
    warn: Box<dyn FnMut(&str)>,
    /// Where phase output is copied with `echo`.
    output: Option<phase::Echo>,
    git: bool,
    /// Record a work-tree fingerprint on phase events (for the no-change detector).
    track_tree: bool,
    last_failure: Option<String>,
    started: Instant,
    snapshots: SnapshotWriter,
    /// The phase's process group a dead runner left running, ended on reopening the run.
    pub ended_group: Option<i32>,
    /// A dead runner left an attempt open (`phase_started` with no end), on reopening.
    attempt_open: bool,
}

/// The wall clock (the store's: one clock for every library).
pub use loopctl_store::clock::now;

/// `<stem>-<yyyyMMdd-HHmmss>`, aif-loop's id shape, so `task_alias` comes out as the stem.
pub fn new_run_id(stem: &str) -> String {
    let t = time::OffsetDateTime::now_utc();
    let stem = safe_name(stem, '-');
    // The id must pass `run_id::check`: it starts with a letter or digit.
    let stem = stem.trim_start_matches(['-', '_']);
    let stem = &stem[..stem.len().min(loopctl_core::rules::run_id::MAX_LEN - 16)];
    format!(
        "{}-{:04}{:02}{:02}-{:02}{:02}{:02}",
        if stem.is_empty() { "loop" } else { stem },
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

fn check_run_id(id: &str) -> Result<()> {
    loopctl_core::rules::run_id::check(id).map_err(|e| RunnerError::Invalid(e.to_string()))
}

/// `name` with anything but ASCII letters, digits, `-` and `_` replaced by `with`.
fn safe_name(name: &str, with: char) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                with
            }
        })
        .collect()
}

fn shape_of(cfg: &LoopFile, opts: &RunOptions) -> Shape {
    Shape {
        pre: cfg.pre.len(),
        loop_: cfg.loop_.len(),
        post: cfg.post.len(),
        max_iterations: cfg.max_iterations,
        max_retries: opts.max_retries,
    }
}

fn session_id(run_id: &str, pos: &Pos, attempt: u64) -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "{run_id}\0{}\0{}\0{}\0{attempt}",
        pos.kind.as_str(),
        pos.index,
        pos.iteration
    ));
    let d = h.finalize();
    format!(
        "ses_{}",
        d[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

impl Runner {
    /// Creates the run folder under `root` and logs `run_started`.
    pub fn start(
        root: &Path,
        run_id: Option<String>,
        cfg: LoopFile,
        opts: RunOptions,
        task: Option<String>,
    ) -> Result<Runner> {
        prepare::check_outputs(&opts).map_err(RunnerError::Invalid)?;
        // Before the run folder exists: a stream that cannot be opened leaves nothing behind.
        let sink = open_sink(opts.on_event.as_deref())?;
        std::fs::create_dir_all(root).map_err(io_err(root))?;
        let stem = opts
            .loop_file
            .as_deref()
            .and_then(Path::file_stem)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "loop".into());
        let (run_id, dir) = match run_id {
            Some(id) => {
                check_run_id(&id)?;
                let dir = root.join(&id);
                // A log with no event yet (a runner killed while starting) may be started again.
                if std::fs::metadata(dir.join(LOG_NAME)).is_ok_and(|m| m.len() > 0) {
                    let run = RunRef::folder(&dir);
                    return Err(RunnerError::Invalid(format!(
                        "run {id:?} already exists in {} (`{}` shows it): pick another --run-id, or, if it was interrupted, `{}` continues it",
                        dir.display(),
                        discover::run_command(root, &run, "status"),
                        discover::resume_command(root, &run),
                    )));
                }
                (id, dir)
            }
            None => {
                let base = new_run_id(&stem);
                let mut id = base.clone();
                let mut n = 1;
                while root.join(&id).exists() {
                    n += 1;
                    id = format!("{base}-{n}");
                }
                let dir = root.join(&id);
                (id, dir)
            }
        };
        std::fs::create_dir_all(dir.join("logs")).map_err(io_err(&dir))?;
        let (writer, _) = LogWriter::open(&dir.join(LOG_NAME), 1, Fsync::Always)?;
        let shape = shape_of(&cfg, &opts);
        let mut r = Runner::assemble(root, dir, run_id.clone(), cfg, opts, shape, writer);
        r.sink = sink;
        r.state = RunState::new(&run_id);
        let mut payload = json!({
            "max_iterations": r.cfg.max_iterations,
            "pre_phase_count": r.cfg.pre.len(),
            "loop_phase_count": r.cfg.loop_.len(),
            "post_phase_count": r.cfg.post.len(),
            "config": r.cfg,
            "options": r.opts,
        });
        if let Some(t) = task {
            payload["task"] = json!({ "prompt": t });
        }
        if let Some(c) = &r.cfg.criteria {
            payload["criteria"] = c.to_value();
        }
        r.emit(Kind::RunStarted, None, payload)?;
        Ok(r)
    }

    fn assemble(
        root: &Path,
        dir: PathBuf,
        run_id: String,
        cfg: LoopFile,
        opts: RunOptions,
        shape: Shape,
        writer: LogWriter,
    ) -> Runner {
        let dir_json = dir.join(RUN_JSON);
        let group_note = after_crash::group_note(&dir.join(LOG_NAME));
        let track_tree = cfg.stagnation.is_some() && template::head(&opts.workdir).is_some();
        let git = track_tree
            || (cfg_uses_git(&cfg, opts.loop_file.as_deref())
                && template::head(&opts.workdir).is_some());
        Runner {
            root: root.to_path_buf(),
            sink: None,
            dir,
            run_id,
            cfg,
            opts,
            shape,
            writer,
            state: RunState::default(),
            cursor: Cursor::default(),
            trace: Trace::new(),
            line: 0,
            control: Arc::new(Control::noting_groups(group_note)),
            observer: Box::new(|_| {}),
            phase_env: Box::new(|_| Vec::new()),
            warn: Box::new(|_| {}),
            output: None,
            git,
            track_tree,
            last_failure: None,
            started: Instant::now(),
            snapshots: SnapshotWriter::new(dir_json),
            ended_group: None,
            attempt_open: false,
        }
    }

    /// Reopens an interrupted run from its log alone and logs `run_resumed`. `adjust` may
    /// change the stored options (a new timeout, sentinel or event stream).
    pub fn resume(
        root: &Path,
        run: &RunRef,
        adjust: impl FnOnce(&mut RunOptions),
    ) -> Result<Runner> {
        let (mut r, repair) = Runner::reopen(root, run, adjust)?;
        prepare::check_outputs(&r.opts).map_err(RunnerError::Invalid)?;
        let mut payload = json!({ "from_seq": r.state.last_seq.unwrap_or(0) });
        if let Some(rep) = repair {
            payload["tail_repair"] = json!(format!("{rep:?}"));
        }
        if let Some(pgid) = r.ended_group {
            payload["ended_phase_group"] = json!(pgid);
        }
        r.emit(Kind::RunResumed, None, payload)?;
        Ok(r)
    }

    /// Ends an interrupted run (no runner holds it) as its runner ends one that `loopctl stop`
    /// cancels: `stopped` with `user_stop` (and `reason` as its detail) and the facts SIGTERM
    /// gives a live stop (exit 143, `cancelled`, for the attempt the dead runner left
    /// running), run.json, the KILLED sentinel and the event stream's `avenor.loop.end`, where
    /// its stored options name them. The open attempt gets no event: readers call it abandoned
    /// (as after a resume), since how its process ended is not known.
    pub fn stop_interrupted(
        root: &Path,
        run: &RunRef,
        reason: Option<&str>,
    ) -> Result<(Finished, Option<i32>)> {
        // Outputs gone since (a removed folder, an event stream that no longer opens): the
        // `stopped` event alone, as for a run no runner made, rather than no stop at all.
        let (r, _) = Runner::reopen(root, run, |_| {}).map_err(|e| match e {
            RunnerError::Io { .. } | RunnerError::Output(_) => {
                RunnerError::NotResumable(e.to_string())
            }
            e => e,
        })?;
        prepare::check_outputs(&r.opts).map_err(RunnerError::NotResumable)?;
        if let Some(text) = reason {
            let req = r.dir.join(STOP_REQUEST);
            std::fs::write(&req, text).map_err(io_err(&req))?;
        }
        let mut e =
            record::interrupted_ending(Interrupt::Cancelled(record::SIGTERM), &r.cursor, &r.shape);
        if r.attempt_open {
            record::cancel_running(&mut e);
        }
        let ended = r.ended_group;
        r.finish(e).map(|f| (f, ended))
    }

    /// A run's runner again, from its log alone, nothing written yet; with the repair of its
    /// torn tail, if it had one.
    fn reopen(
        root: &Path,
        run: &RunRef,
        adjust: impl FnOnce(&mut RunOptions),
    ) -> Result<(Runner, Option<loopctl_store::append::TailRepair>)> {
        let dir = run.dir.clone().ok_or_else(|| {
            RunnerError::NotResumable(format!(
                "{} is a bare log file; resume works on run folders made by `loopctl run`",
                run.log.display()
            ))
        })?;
        // Another tool's log is neither locked, repaired nor rewritten.
        crate::manage::refuse_foreign(run, "resume")?;
        // Lock and repair the tail first, so the replay sees the log the runner will extend.
        let (mut writer, repair) = after_crash::open_log(&run.log).map_err(|e| match e {
            StoreError::Locked { pid, .. } => RunnerError::Invalid(running(root, run, &pid)),
            e => e.into(),
        })?;
        let ended_group = after_crash::end_left_behind(&run.log);
        let opts_read = ReadOptions {
            default_run: run.name.clone(),
            threads: 1,
            ..ReadOptions::default()
        };
        // One read of the log: every run's state, and what the runner keeps of each.
        let (replay, mut memories) = fold_file(
            &run.log,
            &opts_read,
            (Replay::new(&run.name), Memories::default()),
        )?;
        let outcome = replay.finish();
        let state = match &run.run_id {
            Some(id) => outcome.runs.get(id).cloned(),
            None => folder_run(&outcome, &run.name).cloned(),
        };
        let state = state.ok_or_else(|| {
            RunnerError::NotResumable(format!("{} holds no event", run.log.display()))
        })?;
        if state.is_terminal() {
            // A runner killed between its stop event and its last run.json write leaves a stale
            // projection: bring it up to the log before saying no.
            if let Some(shared) = &run.run_json {
                let path = state_file(shared, &state.run_id, &outcome, &run.name);
                let text = run_json_of(&run.log, &state)?;
                if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                    write_atomic(&path, &text)?;
                }
            }
        }
        if let Some(why) = record::over(&state) {
            return Err(RunnerError::NotResumable(why));
        }
        let Memory {
            cursor,
            trace,
            started,
            attempt_open,
        } = memories.0.remove(&state.run_id).unwrap_or_default();
        let (cfg, mut opts) =
            record::stored_config(&state.run_id, started).map_err(RunnerError::NotResumable)?;
        adjust(&mut opts);
        let shape = shape_of(&cfg, &opts);
        let next_seq = state.last_seq.unwrap_or(0) + 1;
        writer.set_next_seq(next_seq);
        let sink = open_sink(opts.on_event.as_deref())?;
        let mut r = Runner::assemble(root, dir, state.run_id.clone(), cfg, opts, shape, writer);
        r.sink = sink;
        r.line = outcome.stats.lines;
        r.state = state;
        r.cursor = cursor;
        r.trace = trace;
        r.ended_group = ended_group;
        r.attempt_open = attempt_open;
        Ok((r, repair))
    }

    pub fn observe(mut self, f: impl FnMut(&Event<'_>) + 'static) -> Runner {
        self.observer = Box::new(f);
        self
    }

    /// Adds variables to each phase process's environment, given the seq of the attempt's
    /// `phase_started` (its place in the log, which names its span in a trace).
    pub fn phase_env(
        mut self,
        f: impl FnMut(u64) -> Vec<(&'static str, String)> + 'static,
    ) -> Runner {
        self.phase_env = Box::new(f);
        self
    }

    /// Receives the run's warnings (a `stop and warn` rule's, a failed `run.json` write).
    pub fn on_warning(mut self, f: impl FnMut(&str) + 'static) -> Runner {
        self.warn = Box::new(f);
        self
    }

    /// Receives phase and check output as it streams, when `RunOptions::echo` asks for it.
    pub fn on_output(mut self, f: impl Fn(&[u8]) + Send + Sync + 'static) -> Runner {
        self.output = Some(Arc::new(f));
        self
    }

    fn echo(&self) -> Option<phase::Echo> {
        self.output.clone().filter(|_| self.opts.echo)
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one event (log first), then projects it everywhere else.
    fn emit(&mut self, kind: Kind, pos: Option<(&str, u64)>, payload: Value) -> Result<u64> {
        self.emit_in(kind, pos, None, payload)
    }

    /// `emit`, with the quality phase (`A`, `B`) the event belongs to.
    fn emit_in(
        &mut self,
        kind: Kind,
        pos: Option<(&str, u64)>,
        quality: Option<&str>,
        payload: Value,
    ) -> Result<u64> {
        let ev = Event {
            ts: Some(now()),
            run_id: Some(self.run_id.clone().into()),
            iteration: pos.map(|p| p.1),
            step: pos.map(|p| p.0.to_string().into()),
            phase: quality.map(|q| q.to_string().into()),
            ..Event::new(kind)
        }
        .with_payload(&payload);
        let a = self.writer.append(&ev)?;
        self.line += 1;
        // Apply what a replay will read: the line as written.
        let parsed = parse_line(&a.line)
            .map_err(|e| RunnerError::Invalid(format!("internal: own event unreadable: {e}")))?;
        apply_mut(&mut self.state, &parsed);
        self.state.log = LogMark {
            offset: a.end,
            line: self.line,
            len: a.line.len() as u64,
            fingerprint: Some(fingerprint(a.line.as_bytes())),
        };
        self.cursor.apply(&parsed);
        self.trace.apply(&parsed);
        if let (Some(sink), Some(l)) = (self.sink.as_mut(), avenor_events::lifecycle_line(&parsed))
        {
            // A consumer that went away must not stop the loop: the log has the event.
            let _ = sink
                .write_all(format!("{l}\n").as_bytes())
                .and_then(|_| sink.flush());
        }
        (self.observer)(&parsed);
        // run.json after each event (the writer gathers a burst into one write per 100 ms): a
        // phase under way shows in it, as its `phase_started` does in the log.
        self.snapshots.send(render(&self.state));
        Ok(parsed.seq.unwrap_or(0))
    }

    fn set_current(&self, active: bool) {
        let path = self.root.join(CURRENT);
        if active {
            let cur = Current {
                active_run_id: Some(self.run_id.clone()),
                task_alias: Some(
                    self.dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                ),
                status: Some("running".into()),
                updated_at: Some(now().to_rfc3339()),
            };
            if let Ok(text) = serde_json::to_string_pretty(&cur) {
                let _ = write_atomic(&path, &format!("{text}\n"));
            }
        } else if discover::read_current(&self.root)
            .is_some_and(|c| c.active_run_id.as_deref() == Some(self.run_id.as_str()))
        {
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Runs the loop to its end and writes the sentinel.
    pub fn execute(mut self) -> Result<Finished> {
        let deadline = self
            .opts
            .timeout_ms
            .map(|ms| self.started + Duration::from_millis(ms));
        self.control
            .install(deadline)
            .map_err(io_err("signal handlers"))?;
        self.set_current(true);
        let ending = loop {
            if let Some(i) = self.control.interrupted() {
                break record::interrupted_ending(i, &self.cursor, &self.shape);
            }
            match next_step::next_step(&self.shape, &self.cursor) {
                Step::Run { pos, attempt } => self.run_phase(pos, attempt)?,
                Step::Retry {
                    pos,
                    attempt,
                    retry,
                } => {
                    let delay = next_step::backoff_ms(
                        self.opts.retry_base_ms,
                        self.opts.retry_cap_ms,
                        retry,
                    );
                    let name = self.phase(&pos).name.clone();
                    let exit_code = self.cursor.last.as_ref().and_then(|l| l.1.exit_code);
                    self.emit(
                        Kind::PhaseRetry,
                        Some((&name, pos.iteration)),
                        record::retry(&pos, attempt, retry, delay, exit_code),
                    )?;
                    if self.control.sleep(Duration::from_millis(delay)) {
                        self.run_phase(pos, attempt)?;
                    }
                }
                Step::Decide { pos } => self.decide(pos)?,
                Step::Finish(e) => break e,
            }
        };
        self.finish(ending)
    }

    /// The stall watchdog's limit, when the loop stops on `stalled`.
    fn stall_after(&self) -> Option<Duration> {
        let cfg = self.cfg.stagnation_config();
        cfg.stop_on
            .contains(&loopctl_core::analysis::stagnation::Detector::Stalled)
            .then(|| Duration::from_millis(cfg.stalled_after_ms.max(1)))
    }

    fn phase(&self, pos: &Pos) -> &Phase {
        &self.cfg.phases(pos.kind)[pos.index]
    }

    fn run_phase(&mut self, pos: Pos, attempt: u64) -> Result<()> {
        let spec = self.phase(&pos).clone();
        let session = session_id(&self.run_id, &pos, attempt);
        let resume_session =
            (spec.resume_from_previous && pos.kind == PhaseKind::Loop && pos.index > 0)
                .then(|| self.cursor.session.clone())
                .flatten();
        let base = json!({"kind": pos.kind.as_str(), "index": pos.index, "attempt": attempt, "session_id": session});
        let mut started = base.clone();
        if let Some(s) = &resume_session {
            started["resume_session"] = json!(s);
        }
        if self.git
            && let Some(c) = template::head(&self.opts.workdir)
        {
            started["commit"] = json!(c);
        }
        if self.track_tree
            && let Some(w) = template::worktree(&self.opts.workdir)
        {
            started["worktree"] = json!(w);
        }
        let step = Some((spec.name.as_str(), pos.iteration));
        let seq = self.emit(Kind::PhaseStarted, step, started)?;
        let stem = format!("logs/{seq:06}-{}", safe_name(&spec.name, '_'));
        let (out_rel, err_rel) = (format!("{stem}.stdout"), format!("{stem}.stderr"));
        let wd = self.opts.workdir.clone();
        let mut env: Vec<(&'static str, String)> = vec![
            ("LOOPCTL_RUN_ID", self.run_id.clone()),
            ("LOOPCTL_RUN_DIR", self.dir.display().to_string()),
            ("LOOPCTL_PHASE", spec.name.clone()),
            ("LOOPCTL_PHASE_KIND", pos.kind.as_str().into()),
            ("LOOPCTL_ITERATION", pos.iteration.to_string()),
            (
                "LOOPCTL_MAX_ITERATIONS",
                self.cfg.max_iterations.to_string(),
            ),
            ("LOOPCTL_ATTEMPT", attempt.to_string()),
            ("LOOPCTL_WORKDIR", wd.display().to_string()),
            ("LOOPCTL_SESSION_ID", session.clone()),
        ];
        if let Some(s) = &resume_session {
            env.push(("LOOPCTL_RESUME_SESSION", s.clone()));
        }
        if let Some(f) = &self.cursor.last_failure {
            env.push(("LOOPCTL_LAST_FAILURE", f.clone()));
        }
        env.extend((self.phase_env)(seq));
        let (program, stdin) = match self.program(&spec, &pos, &stem, &mut env) {
            Ok(p) => p,
            Err(msg) => return self.phase_failed_to_start(&spec, pos, base, msg, None),
        };
        // Named when it cannot be started ("No such file or directory" says which file not).
        let program_name = match &program {
            Program::Argv(argv) => argv.first().cloned().unwrap_or_default(),
            Program::Shell(_) => "sh".into(),
        };
        let attempt_run = Attempt {
            program,
            stdin,
            env,
            cwd: &wd,
            stdout: self.dir.join(&out_rel),
            stderr: self.dir.join(&err_rel),
            echo: self.echo(),
            stall_after: self.stall_after(),
        };
        let result = phase::run(attempt_run, &self.control);
        let f = match result {
            Ok(f) => f,
            Err(e) => {
                let code = record::start_failure_code(&e);
                return self.phase_failed_to_start(
                    &spec,
                    pos,
                    base,
                    format!("cannot start phase: {program_name}: {e}"),
                    code,
                );
            }
        };
        let interrupt = self.control.interrupted();
        let facts = record::PhaseFacts {
            name: &spec.name,
            pos,
            attempt,
            observed: pos.kind == PhaseKind::Loop && self.cfg.observes(pos.index),
            loop_decides: self.cfg.decides(),
            branches: spec.transition.is_some(),
            stall_after: self.stall_after(),
            commit: self
                .git
                .then(|| template::head(&self.opts.workdir))
                .flatten(),
            worktree: self
                .track_tree
                .then(|| template::worktree(&self.opts.workdir))
                .flatten(),
        };
        let (fin, failure) =
            record::phase_finished(base, &f, interrupt, &facts, (&out_rel, &err_rel));
        if failure.is_some() {
            self.last_failure = failure;
        }
        self.emit(Kind::PhaseFinished, step, fin)?;
        Ok(())
    }

    /// The phase never ran (template error, missing program): recorded as a failed attempt.
    fn phase_failed_to_start(
        &mut self,
        spec: &Phase,
        pos: Pos,
        fin: Value,
        msg: String,
        code: Option<i64>,
    ) -> Result<()> {
        let (fin, err) = record::never_ran(fin, &spec.name, pos.iteration, &msg, code);
        self.last_failure = Some(err);
        self.emit(Kind::PhaseFinished, Some((&spec.name, pos.iteration)), fin)?;
        Ok(())
    }

    /// The process a phase runs: its `run` command, or its agent with the rendered prompt.
    fn program(
        &self,
        spec: &Phase,
        pos: &Pos,
        stem: &str,
        env: &mut Vec<(&'static str, String)>,
    ) -> std::result::Result<(Program, Option<String>), String> {
        if let Some(cmd) = &spec.run {
            return Ok((Program::Shell(cmd.clone()), None));
        }
        let text = match (&spec.prompt, &spec.prompt_file) {
            (Some(t), _) => t.clone(),
            (_, Some(f)) => {
                let path = prompt_path(self.opts.loop_file.as_deref(), f);
                std::fs::read_to_string(&path)
                    .map_err(|e| format!("prompt_file {}: {e}", path.display()))?
            }
            _ => return Err("phase has neither prompt nor run".into()),
        };
        let mut vars = Vars {
            run_id: self.run_id.clone(),
            phase: spec.name.clone(),
            iteration: pos.iteration,
            max_iterations: self.cfg.max_iterations,
            work_dir: self.opts.workdir.display().to_string(),
            last_failure: self.cursor.last_failure.clone().unwrap_or_default(),
            ..Vars::default()
        };
        if self.git
            && let Some(after) = &self.cursor.commit
        {
            template::git_delta(
                &self.opts.workdir,
                self.cursor.commit_before.as_deref(),
                after,
                &mut vars,
            );
        }
        let prompt = template::render(&text, &vars).map_err(|e| format!("prompt template: {e}"))?;
        let prompt_file = self.dir.join(format!("{stem}.prompt"));
        std::fs::write(&prompt_file, &prompt)
            .map_err(|e| format!("{}: {e}", prompt_file.display()))?;
        env.push(("LOOPCTL_PROMPT_FILE", prompt_file.display().to_string()));
        let argv = self
            .cfg
            .agent_for(spec, self.opts.agent.as_deref())
            .ok_or("a prompt phase needs an agent (--agent, or \"agent\" in the loop file)")?;
        let (argv, stdin) = place_prompt(argv, prompt);
        Ok((Program::Argv(argv), stdin))
    }

    fn finish(mut self, e: Ending) -> Result<Finished> {
        let req = self.dir.join(STOP_REQUEST);
        let stop_request = (e.reason == ExitReason::Cancelled)
            .then(|| std::fs::read_to_string(&req).ok())
            .flatten();
        if stop_request.is_some() {
            let _ = std::fs::remove_file(&req);
        }
        let (payload, warning) = record::stopped(
            &e,
            self.last_failure.as_deref(),
            &self.cursor,
            self.opts.timeout_ms,
            stop_request.as_deref(),
        );
        if let Some(w) = warning {
            (self.warn)(&w);
        }
        self.emit(Kind::Stopped, None, payload)?;
        if let Some(e) = self.snapshots.flush() {
            (self.warn)(&format!("an earlier run.json update failed: {e}"));
        }
        write_atomic(&self.dir.join(RUN_JSON), &render(&self.state))?;
        let session = self.cursor.session.clone().unwrap_or_default();
        let sentinel = Sentinel::for_ending(&e, &session, &self.run_id);
        if let Some(p) = &self.opts.sentinel_file {
            write_atomic(p, &sentinel.render())?;
        }
        self.control.finish();
        self.set_current(false);
        Ok(Finished {
            run_id: self.run_id.clone(),
            dir: self.dir.clone(),
            ending: e,
            sentinel,
            state: self.state.clone(),
        })
    }
}

/// The agent's argv with the prompt in place of every `{prompt}`; without one, the prompt
/// goes in on stdin (returned second).
fn place_prompt(argv: &[String], prompt: String) -> (Vec<String>, Option<String>) {
    let mut placed = false;
    let out = argv
        .iter()
        .map(|a| {
            if a.contains("{prompt}") {
                placed = true;
                a.replace("{prompt}", &prompt)
            } else {
                a.clone()
            }
        })
        .collect();
    (out, (!placed).then_some(prompt))
}

fn cfg_uses_git(cfg: &LoopFile, loop_file: Option<&Path>) -> bool {
    [&cfg.pre, &cfg.loop_, &cfg.post]
        .iter()
        .flat_map(|l| l.iter())
        .any(|p| {
            p.prompt.as_deref().is_some_and(template::uses_git)
                || p.prompt_file.as_deref().is_some_and(|f| {
                    std::fs::read_to_string(prompt_path(loop_file, f))
                        .is_ok_and(|t| template::uses_git(&t))
                })
        })
}

/// Writes the FAILED sentinel of a loop file that did not validate.
pub fn write_config_failure(sentinel: &Path, message: &str, run_id: &str) -> Result<()> {
    Ok(write_atomic(
        sentinel,
        &Sentinel::config_error(message, run_id).render(),
    )?)
}
