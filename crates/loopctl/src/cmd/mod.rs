//! One module per command. Each parses its arguments, calls the store, prints.

#[cfg(feature = "analytics")]
pub mod aggregate;
pub mod check;
pub mod clean;
pub mod docs;
pub mod export;
#[cfg(feature = "analytics")]
pub mod export_parquet;
pub mod history;
pub mod list;
pub mod postmortem;
#[cfg(feature = "analytics")]
pub mod query;
pub mod recover;
pub mod replay;
pub mod run;
pub mod serve;
pub mod stagnation;
pub mod status;
pub mod stop;
#[cfg(feature = "analytics")]
pub mod tables;
pub mod tail;
pub mod timeline;
pub mod values;

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use loopctl_core::analysis::liveness::{Liveness, Standing};
use loopctl_core::{RunState, Ts};
use loopctl_store::discover::{self, RunRef};
use loopctl_store::read::ReadOptions;
use loopctl_store::snapshot::{Prior, Rebuilt, rebuild};

use crate::{exit, output};

/// Leaves a large replay result (one state per run of a log that may hold tens of thousands)
/// to the process's exit instead of freeing it piece by piece: the command is about to
/// return and the process to end.
pub fn free_at_exit<T>(value: T) {
    std::mem::forget(value);
}

/// The RUN argument every per-run command takes.
#[derive(clap::Args)]
pub struct RunArg {
    /// Run folder, log file, or run id/alias under the root (default: the run current.json
    /// names, else the newest run under the root).
    pub run: Option<String>,
    /// The run to use when the log holds several; with no RUN, a run id looked up under the
    /// root.
    #[arg(long, value_name = "RUN_ID")]
    pub run_id: Option<String>,
}

pub struct Ctx {
    pub root: PathBuf,
    /// Whether the user named the root (`--root`, `$LOOPCTL_ROOT`): then it must exist.
    pub root_named: bool,
    pub strict: bool,
    pub read: ReadOptions,
}

impl Ctx {
    pub fn new(root: Option<&Path>, strict: bool, max_line: usize, threads: Option<usize>) -> Ctx {
        let mut read = ReadOptions {
            max_line,
            ..ReadOptions::default()
        };
        if let Some(t) = threads {
            read.threads = t;
        }
        Ctx {
            root: discover::default_root(root),
            root_named: root.is_some(),
            strict,
            read,
        }
    }

    /// The run folders under the root (none when the default root does not exist yet).
    pub fn runs(&self) -> anyhow::Result<Vec<RunRef>> {
        Ok(discover::runs_under(&self.root, self.root_named)?)
    }

    /// The inputs of a command over several runs: `paths`, else the root. With no path, a
    /// root the user named must exist, and the default root not existing gives no input
    /// (`root::root_exists`): then it says `no runs under ROOT` on stderr, and the command
    /// shows nothing, as over an empty root.
    pub fn inputs<P: From<PathBuf>>(&self, paths: Vec<P>) -> anyhow::Result<Vec<P>> {
        if !paths.is_empty() {
            return Ok(paths);
        }
        if !loopctl_store::root::root_exists(&self.root, self.root_named)? {
            output::note(no_runs(&self.root).trim_end());
            return Ok(Vec::new());
        }
        Ok(vec![P::from(self.root.clone())])
    }

    /// The paths a command over several logs names (`export prometheus`, `serve`, the
    /// analytics): an
    /// existing path (a root, a run folder, a log file) as it is, else a run id or alias under
    /// the root, as the run's folder or the log file holding it.
    pub fn paths_or_runs<S: AsRef<Path>>(&self, specs: &[S]) -> anyhow::Result<Vec<PathBuf>> {
        specs
            .iter()
            .map(|spec| {
                let p = spec.as_ref();
                if p.exists() {
                    return Ok(p.to_path_buf());
                }
                // Not UTF-8: no run id either.
                let id = p
                    .to_str()
                    .ok_or_else(|| anyhow::anyhow!("no file or folder {}", p.display()))?;
                let run = self.resolve(Some(id))?;
                Ok(run.dir.unwrap_or(run.log))
            })
            .collect()
    }

    pub fn resolve(&self, spec: Option<&str>) -> anyhow::Result<RunRef> {
        self.select(spec, None)
    }

    /// The run RUN and `--run-id` select (`discover::select`); says on stderr which run was
    /// taken when none was named.
    pub fn select(&self, spec: Option<&str>, run_id: Option<&str>) -> anyhow::Result<RunRef> {
        let sel = discover::select(spec, run_id, &self.root)?;
        if let Some(why) = sel.explain() {
            output::note(&loopctl_core::render::visible(&why));
        }
        Ok(sel.run)
    }

    /// The run `a` selects.
    pub fn target(&self, a: &RunArg) -> anyhow::Result<RunRef> {
        self.select(a.run.as_deref(), a.run_id.as_deref())
    }

    pub fn opts_for(&self, run: &RunRef) -> ReadOptions {
        ReadOptions {
            default_run: run.name.clone(),
            ..self.read.clone()
        }
    }

    /// Rebuilds `run` (the run it selects, else the log's own) from its log and its state
    /// file, as snapshot or salvage source. A state file that cannot be read is warned about
    /// and the log alone is used.
    pub fn rebuild(&self, run: &RunRef, use_snapshot: bool) -> anyhow::Result<Rebuilt> {
        let rebuilt = rebuild(
            &run.log,
            run.run_json.as_deref(),
            &self.opts_for(run),
            run.run_id.as_deref(),
            use_snapshot,
        )?; // store errors name the file
        if let (Prior::Unreadable, Some(path)) = (&rebuilt.prior, &rebuilt.state_path) {
            output::warn(&format!(
                "{} {}; using the log alone (fields only run.json holds, such as task and criteria, are missing)",
                path.display(),
                rebuilt.prior_detail.as_deref().unwrap_or("cannot be read"),
            ));
        }
        Ok(rebuilt)
    }

    /// When a log holds several runs and one is shown: says so on stderr, naming the run shown
    /// and how to pick another.
    pub fn note_one_of(&self, run: &RunRef, runs: usize, shown: &str) {
        if runs > 1 && run.run_id.is_none() {
            output::note(&format!(
                "{} holds {runs} runs; showing {} (pick another with --run-id ID; `loopctl list {}` lists them)",
                run.log.display(),
                loopctl_core::render::visible(shown),
                run.log.display()
            ));
        }
    }

    /// `rebuild` for statistics and findings only: the run states hold just their ids, event
    /// counts and last `seq`.
    pub fn count(&self, run: &RunRef) -> anyhow::Result<Rebuilt> {
        let opts = ReadOptions {
            states: false,
            ..self.opts_for(run)
        };
        Ok(rebuild(&run.log, None, &opts, None, false)?)
    }

    /// How `s`, a run of `run`'s log, stands: the log's status joined with a probe of the
    /// log's lock (only for a run that has not ended; `probe` keeps the answer for the log's
    /// other runs), and for an interrupted run the command that continues it.
    pub fn standing(
        &self,
        run: &RunRef,
        s: &RunState,
        now: Ts,
        probe: &OnceCell<Liveness>,
    ) -> (Standing, Option<String>) {
        discover::standing(&self.root, run, s, now, probe)
    }

    /// Prints findings; under `--strict` turns them into the findings exit code.
    pub fn report_findings(&self, run: &RunRef, rebuilt: &Rebuilt) -> u8 {
        let f = &rebuilt.outcome.findings;
        output::findings(&run.log, f);
        if self.strict && !f.is_empty() {
            output::error(&format!(
                "{} finding(s) in {} (--strict)",
                f.len(),
                run.log.display()
            ));
            return exit::FINDINGS;
        }
        exit::OK
    }
}

/// What `list` and `status` say when a root holds no run.
pub fn no_runs(root: &Path) -> String {
    format!("no runs under {}\n", root.display())
}

/// Says that `log` holds no event; the code every command reading one log exits with then.
pub fn no_event(log: &Path) -> u8 {
    output::warn(&exit::no_event(&log.display().to_string()));
    exit::NO_EVENT
}
