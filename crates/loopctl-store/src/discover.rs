//! Finding runs: a run folder (`<root>/<alias>/history.jsonl` + `run.json`, the layout loopctl
//! shares with aif-loop's `.ai-factory/evolution/`), a bare log file, or an id under a root.

use std::path::{Path, PathBuf};

use std::io::{Read, Seek, SeekFrom};

use std::cell::OnceCell;

use loopctl_core::analysis::liveness::{Liveness, Standing};
use loopctl_core::{RunState, Ts, parse_line};
use serde::Deserialize;

use crate::fold::rows;
use crate::read::ReadOptions;
use crate::{Result, StoreError, io_err};

pub const LOG_NAME: &str = "history.jsonl";
pub const RUN_JSON: &str = "run.json";
pub const CURRENT: &str = "current.json";
/// Where aif-loop keeps its runs; recognised as a root.
pub const AIF_ROOT: &str = ".ai-factory/evolution";
pub const DEFAULT_ROOT: &str = ".loopctl";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    /// Folder or file stem: what replay calls events that name no run.
    pub name: String,
    pub dir: Option<PathBuf>,
    pub log: PathBuf,
    /// The log's state file: `run.json` beside `history.jsonl`, `<stem>.run.json` beside a
    /// bare log. It holds one run's state; see `state_path` for the others of the log.
    pub run_json: Option<PathBuf>,
    /// The run of the log this reference selects (a run id, as a RUN argument or `--run-id`
    /// named it); `None`: the log's own run (`snapshot::folder_run`).
    pub run_id: Option<String>,
}

impl RunRef {
    /// The run of the run folder `dir`.
    pub fn folder(dir: &Path) -> RunRef {
        RunRef {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: Some(dir.to_path_buf()),
            log: dir.join(LOG_NAME),
            run_json: Some(dir.join(RUN_JSON)),
            run_id: None,
        }
    }

    /// The run a log file names: its folder's when it is a run folder's `history.jsonl`.
    pub fn file(log: &Path) -> RunRef {
        if log.file_name().is_some_and(|n| n == LOG_NAME)
            && let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty())
        {
            return RunRef::folder(dir);
        }
        RunRef {
            name: log
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: None,
            log: log.to_path_buf(),
            run_json: Some(log.with_extension(RUN_JSON)),
            run_id: None,
        }
    }
}

/// Where the state of run `run_id` of a log lives, given the log's state file `shared`
/// (`run.json`, or `<stem>.run.json` beside a bare log).
///
/// A state file belongs to one run. `shared` is the state of the run it names (its `run_id`);
/// when it names none, of the log's own run. Every other run of a log holding several has its
/// own file beside it: `<run_id>.run.json` in a run folder, `<stem>.<run_id>.run.json` beside a
/// bare log. So recovering one run never writes over another's state. `owner` is the run
/// `shared` belongs to (`None` when it does not exist); `several` whether the log holds more
/// than one run.
pub fn state_path(shared: &Path, run_id: &str, owner: Option<&str>, several: bool) -> PathBuf {
    if !several || owner == Some(run_id) {
        return shared.to_path_buf();
    }
    let name = shared
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = name.strip_suffix(RUN_JSON).unwrap_or("");
    shared.with_file_name(format!(
        "{prefix}{}.{RUN_JSON}",
        loopctl_core::rules::run_id::file_name(run_id)
    ))
}

/// A run of a log under the root, as an ambiguous RUN argument lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub run_id: String,
    pub alias: String,
    pub log: PathBuf,
}

/// Why a run was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// RUN or `--run-id` named it.
    Named,
    /// No RUN: `current.json` names it.
    Current,
    /// No RUN, and a runner is running under the root that `current.json` does not name: the
    /// newest run whose runner is alive.
    Live {
        /// Why `current.json` was not used.
        current: String,
        /// When its log last changed.
        at: String,
    },
    /// No RUN, and no `current.json` naming a run under the root: the newest run.
    Newest {
        /// Why `current.json` was not used.
        current: String,
        /// When its log last changed: `last event <time>`, else `log modified <time>`.
        at: String,
    },
}

/// What a RUN argument (and `--run-id`) selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub run: RunRef,
    pub why: Why,
}

impl Selected {
    /// A line for the user when the run was not named: which run, and why it.
    pub fn explain(&self) -> Option<String> {
        let what = match &self.run.run_id {
            Some(id) => format!("{id} ({})", self.run.log.display()),
            None => self.run.log.display().to_string(),
        };
        match &self.why {
            Why::Named => None,
            Why::Current => Some(format!("no RUN given: using {what}, which {CURRENT} names")),
            Why::Live { current, at } => Some(format!(
                "no RUN given: using the newest run whose runner is running, {what} ({at}); {current}"
            )),
            Why::Newest { current, at } => Some(format!(
                "no RUN given: using the newest run, {what} ({at}); {current}"
            )),
        }
    }
}

/// `--root`/`LOOPCTL_ROOT` if given; else `.loopctl` if present; else aif-loop's folder if
/// present; else `.loopctl`.
pub fn default_root(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if !Path::new(DEFAULT_ROOT).exists() && Path::new(AIF_ROOT).is_dir() {
        return PathBuf::from(AIF_ROOT);
    }
    PathBuf::from(DEFAULT_ROOT)
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
pub struct Current {
    pub active_run_id: Option<String>,
    pub task_alias: Option<String>,
    pub status: Option<String>,
    pub updated_at: Option<String>,
}

/// `current.json` under `root`, if it exists and can be read.
pub fn read_current(root: &Path) -> Option<Current> {
    load_current(root).ok().flatten()
}

/// `current.json` under `root`: `None` when there is none; the error says what is wrong with
/// one that cannot be read or is not a `current.json` (a sentence for the user).
pub fn load_current(root: &Path) -> std::result::Result<Option<Current>, String> {
    let path = root.join(CURRENT);
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "{} cannot be read ({e}), so it was not used",
                path.display()
            ));
        }
    };
    serde_json::from_slice(crate::without_bom(&text))
        .map(Some)
        .map_err(|e| {
            format!(
                "{} is damaged (not a current.json: {e}), so it was not used",
                path.display()
            )
        })
}

/// Resolves a RUN argument and `--run-id` to one run. RUN is a log file, a run folder, a
/// folder under `root` by name, or a run id or alias of a run in any log under `root` (a log
/// may hold several runs). `--run-id` picks a run of the log RUN names, or with no RUN is
/// looked up under `root` like one. With neither: the run `current.json` names when it is
/// under the root, else the newest run. An alias several runs share is `Ambiguous`.
pub fn select(spec: Option<&str>, run_id: Option<&str>, root: &Path) -> Result<Selected> {
    let mut sel = match (spec, run_id) {
        (Some(spec), _) => Selected {
            run: resolve_spec(spec, root)?,
            why: Why::Named,
        },
        (None, Some(id)) => Selected {
            run: resolve_under(id, root)?,
            why: Why::Named,
        },
        (None, None) => default_run(root)?,
    };
    if let Some(id) = run_id {
        if let Some(named) = sel.run.run_id.as_deref().filter(|n| *n != id) {
            return Err(StoreError::NotFound(format!(
                "{} names run {named:?} but --run-id asks for {id:?}; give one of them",
                spec.unwrap_or(id)
            )));
        }
        sel.run.run_id = Some(id.to_string());
    }
    Ok(sel)
}

/// `select` for a RUN argument alone: the run reference.
pub fn resolve(spec: Option<&str>, root: &Path) -> Result<RunRef> {
    Ok(select(spec, None, root)?.run)
}

/// The extensions that make a bare word a log file's name.
pub const LOG_EXTENSIONS: [&str; 2] = ["jsonl", "ndjson"];

/// Whether RUN is written as a path: it holds a `/`, or ends in a log extension. A bare word
/// (`myrun`) names a run under the root first, so a same-named file in the current folder
/// (notes, a sentinel) does not hide it.
fn written_as_path(spec: &str) -> bool {
    spec.contains('/')
        || Path::new(spec)
            .extension()
            .is_some_and(|e| LOG_EXTENSIONS.iter().any(|x| e == *x))
}

fn resolve_spec(spec: &str, root: &Path) -> Result<RunRef> {
    let p = Path::new(spec);
    if p.is_dir() && folder_log(p).is_some() {
        return Ok(RunRef::folder(p));
    }
    if written_as_path(spec) {
        if is_log(p) {
            return Ok(RunRef::file(p));
        }
        // There, but no regular file or folder (a fifo, a socket, a device): said so, not
        // looked for as a run; as is a run folder whose log is one.
        if p.exists() && !p.is_dir() {
            return Err(StoreError::NotALog(p.to_path_buf()));
        }
        if p.is_dir() && p.join(LOG_NAME).exists() {
            return Err(StoreError::NotALog(p.join(LOG_NAME)));
        }
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == LOG_NAME) {
                return Err(StoreError::NotFound(format!(
                    "{spec}: is a folder, not a log file"
                )));
            }
            return Err(StoreError::NotFound(format!(
                "{spec}: folder has no {LOG_NAME}; if it is a root, list its runs with `loopctl list {spec}`"
            )));
        }
    }
    resolve_under(spec, root).map_err(|e| match e {
        StoreError::NotFound(msg) if !written_as_path(spec) && p.exists() => {
            let what = if p.is_dir() {
                format!("./{spec} is a folder without a {LOG_NAME}")
            } else {
                format!(
                    "./{spec} is a file, but a bare word names a log file only with a .jsonl or .ndjson extension: write ./{spec} to read it as a log"
                )
            };
            StoreError::NotFound(format!("{msg}; {what}"))
        }
        StoreError::NotFound(msg) if !p.exists() => {
            let spec = if spec.is_empty() { "\"\"" } else { spec };
            StoreError::NotFound(format!("{msg}; no file or folder {spec} either"))
        }
        e => e,
    })
}

/// How `s`, a run of `run`'s log, stands at `now`: the log's status joined with a probe of the
/// log's lock (only for a run that has not ended; `probe` keeps the answer for the log's other
/// runs), and for an interrupted run the command that continues it (see `resume_command`).
pub fn standing(
    root: &Path,
    run: &RunRef,
    s: &RunState,
    now: Ts,
    probe: &OnceCell<Liveness>,
) -> (Standing, Option<String>) {
    let runner = if s.is_terminal() {
        Liveness::Unknown
    } else {
        *probe.get_or_init(|| crate::append::liveness(&run.log))
    };
    let st = Standing::of(s, runner, now);
    let resume = st.interrupted().then(|| resume_command(root, run));
    (st, resume)
}

/// The command that continues `run` (an interrupted run) when `root` is the root in use: by
/// name for a folder of that root (with `--root` unless it is the default one), else by path.
pub fn resume_command(root: &Path, run: &RunRef) -> String {
    run_command(root, run, "resume")
}

/// `loopctl <verb> RUN` for `run`, named as `resume_command` names it.
pub fn run_command(root: &Path, run: &RunRef, verb: &str) -> String {
    let Some(dir) = &run.dir else {
        return format!("loopctl {verb} {}", shell_word(&run.log.to_string_lossy()));
    };
    if dir.parent() != Some(root) {
        return format!("loopctl {verb} {}", shell_word(&dir.to_string_lossy()));
    }
    let name = shell_word(&run.name);
    if root == default_root(None) {
        format!("loopctl {verb} {name}")
    } else {
        let root = shell_word(&root.to_string_lossy());
        format!("loopctl --root {root} {verb} {name}")
    }
}

/// `s` as one shell word: as is when it is plain, else single-quoted.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A run folder under `root` named `spec`, else the run whose id (else alias) is `spec` in any
/// log under `root`.
fn resolve_under(spec: &str, root: &Path) -> Result<RunRef> {
    let dir = root.join(spec);
    if !spec.is_empty() && folder_log(&dir).is_some() {
        return Ok(RunRef::folder(&dir));
    }
    let all = candidates_under(root);
    let by_id: Vec<&Candidate> = all.iter().filter(|c| c.run_id == spec).collect();
    let hits = if by_id.is_empty() {
        all.iter().filter(|c| c.alias == spec).collect()
    } else {
        by_id
    };
    match hits.as_slice() {
        // A run folder whose log is there but no regular file (a fifo): said so.
        [] if !spec.is_empty() && dir.is_dir() && dir.join(LOG_NAME).exists() => {
            Err(StoreError::NotALog(dir.join(LOG_NAME)))
        }
        [] => Err(StoreError::NotFound(format!(
            "no run {spec:?}: no run folder {}, and no run of that id or alias under {}",
            dir.display(),
            root.display()
        ))),
        [one] => {
            let mut r = RunRef::file(&one.log);
            r.run_id = Some(one.run_id.clone());
            Ok(r)
        }
        many => Err(StoreError::Ambiguous {
            spec: spec.to_string(),
            candidates: many.iter().map(|c| (*c).clone()).collect(),
        }),
    }
}

/// Every run of every log under `root`, with its alias. Logs that cannot be read are left out.
pub fn candidates_under(root: &Path) -> Vec<Candidate> {
    let mut out = Vec::new();
    for r in list_runs(root).unwrap_or_default() {
        let opts = ReadOptions {
            default_run: r.name.clone(),
            threads: 1,
            ..ReadOptions::default()
        };
        if let Ok(rows) = rows(&r.log, &opts) {
            out.extend(rows.runs.iter().map(|s| Candidate {
                run_id: s.run_id.clone(),
                alias: s.task_alias.clone(),
                log: r.log.clone(),
            }));
        }
    }
    out
}

/// With no RUN: a run whose runner is alive first (the one `current.json` names, else the
/// newest such run), else the run `current.json` names if it is under the root, else the
/// newest run. Two runs of one root share one `current.json`: the run that started last names
/// itself in it and removes it when it ends, while the other may still be going.
fn default_run(root: &Path) -> Result<Selected> {
    let alive = |r: &RunRef| crate::append::liveness(&r.log) == Liveness::Alive;
    let mut named = None;
    let current = match load_current(root) {
        Ok(Some(cur)) => {
            let names: Vec<String> = [cur.active_run_id, cur.task_alias]
                .into_iter()
                .flatten()
                .filter(|n| !n.is_empty())
                .collect();
            named = names.iter().find_map(|n| resolve_under(n, root).ok());
            if let Some(run) = named.as_ref().filter(|r| alive(r)) {
                return Ok(Selected {
                    run: run.clone(),
                    why: Why::Current,
                });
            }
            match (&named, names.first()) {
                (Some(_), Some(n)) => format!("{CURRENT} names {n:?}, whose runner is not running"),
                (_, Some(n)) => format!("{CURRENT} names {n:?}, which is not under the root"),
                (_, None) => format!("{CURRENT} names no run"),
            }
        }
        Ok(None) => format!("{} has no {CURRENT}", root.display()),
        Err(damage) => damage,
    };
    if let Some((run, at)) = newest_where(root, alive) {
        return Ok(Selected {
            run,
            why: Why::Live {
                current,
                at: describe_change(at),
            },
        });
    }
    if let Some(run) = named {
        return Ok(Selected {
            run,
            why: Why::Current,
        });
    }
    let (run, at) = newest(root).ok_or_else(|| {
        StoreError::NotFound(format!(
            "no runs under {}: name a run, or start one with `loopctl run`",
            root.display()
        ))
    })?;
    Ok(Selected {
        run,
        why: Why::Newest {
            current,
            at: describe_change(at),
        },
    })
}

/// `last event <time>`, else `log modified <time>`.
fn describe_change((at, of_event): (Ts, bool)) -> String {
    format!(
        "{} {}",
        if of_event {
            "last event"
        } else {
            "log modified"
        },
        at.to_rfc3339()
    )
}

/// The run folder under `root` whose log changed last, with `last_change`'s answer. Ties
/// (the same last event time) go to the log written last.
pub fn newest(root: &Path) -> Option<(RunRef, (Ts, bool))> {
    newest_where(root, |_| true)
}

/// `newest` among the run folders `keep` keeps.
fn newest_where(root: &Path, keep: impl Fn(&RunRef) -> bool) -> Option<(RunRef, (Ts, bool))> {
    let modified = |log: &Path| std::fs::metadata(log).and_then(|m| m.modified()).ok();
    list_runs(root)
        .ok()?
        .into_iter()
        .filter(|r| keep(r))
        .filter_map(|r| last_change(&r.log).map(|t| (modified(&r.log), r, t)))
        .max_by(|(m, a, t), (n, b, u)| {
            t.0.cmp(&u.0)
                .then_with(|| m.cmp(n))
                .then_with(|| a.name.cmp(&b.name))
        })
        .map(|(_, r, t)| (r, t))
}

/// When `log` last changed: the time of its last event that has one (read from the end), with
/// `true`; else the file's modification time, with `false`.
pub fn last_change(log: &Path) -> Option<(Ts, bool)> {
    const TAIL: u64 = 64 * 1024;
    let mut f = std::fs::File::open(log).ok()?;
    let meta = f.metadata().ok()?;
    let start = meta.len().saturating_sub(TAIL);
    let mut bytes = Vec::new();
    f.seek(SeekFrom::Start(start)).ok()?;
    f.read_to_end(&mut bytes).ok()?;
    let last_event = bytes.rsplit(|&b| b == b'\n').find_map(|line| {
        let t = loopctl_core::decode::lines::decode(line).text()?;
        parse_line(t).ok()?.ts
    });
    if let Some(t) = last_event {
        return Some((t, true));
    }
    let ms = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    Some((Ts::from_millis(i64::try_from(ms).ok()?), false))
}

/// Every run folder directly under `root` (one holding `history.jsonl`), sorted by name.
pub fn list_runs(root: &Path) -> Result<Vec<RunRef>> {
    let rd = std::fs::read_dir(root).map_err(io_err(root))?;
    let mut out: Vec<RunRef> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| folder_log(p).is_some())
        .map(|p| RunRef::folder(&p))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The root's subfolders (and links) as run folders, without looking inside them: `list_runs`
/// and folders without a log. For a reader that opens every log anyway with
/// `ReadOptions::regular_only`, a folder whose log is `StoreError::NotALog` was not a run. Spares
/// `list_runs`' look at every log, made on one thread before any log is read (`serve`). In the
/// order of their logs' paths.
pub fn maybe_runs(root: &Path) -> Result<Vec<RunRef>> {
    let rd = std::fs::read_dir(root).map_err(io_err(root))?;
    let mut names: Vec<std::ffi::OsString> = rd
        .filter_map(|e| e.ok())
        // The type readdir tells (no stat): plain files are no run folders.
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_file()))
        .map(|e| e.file_name())
        .collect();
    // By the bytes of the name: the order of their paths (the one component they differ in).
    names.sort_unstable();
    Ok(names
        .iter()
        .map(|n| RunRef::folder(&root.join(n)))
        .collect())
}

/// The log of `dir` when `dir` is a run folder (holds its own log) rather than a root.
pub fn folder_log(dir: &Path) -> Option<PathBuf> {
    let log = dir.join(LOG_NAME);
    is_log(&log).then_some(log)
}

/// Whether `path` is a log to read: a file, or a symbolic link that leads nowhere (dangling, a
/// loop). Such a link is a log that cannot be read, said so when read (`io_err`), not a
/// path that names nothing: a run folder holding one is listed as unreadable.
pub fn is_log(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => m.is_file(),
        Err(_) => path.is_symlink(),
    }
}

/// The run folders under a root, as `list` and `status` see it: a root the user named
/// (`--root`, `$LOOPCTL_ROOT`) must exist, while the default root missing only means that no
/// run was made here yet (no runs, not an error).
pub fn runs_under(root: &Path, named: bool) -> Result<Vec<RunRef>> {
    if !crate::root::root_exists(root, named)? {
        return Ok(Vec::new());
    }
    list_runs(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_root_is_an_error_only_when_named() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        assert!(runs_under(&missing, false).unwrap().is_empty());
        let e = runs_under(&missing, true).unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("does not exist"), "{e}");
        assert!(runs_under(tmp.path(), true).unwrap().is_empty());
        std::fs::create_dir(tmp.path().join("r")).unwrap();
        std::fs::write(tmp.path().join("r").join(LOG_NAME), "").unwrap();
        assert_eq!(runs_under(tmp.path(), false).unwrap().len(), 1);
    }

    #[test]
    fn a_folder_named_like_a_log_is_said_to_be_a_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(LOG_NAME);
        std::fs::create_dir(&dir).unwrap();
        let e = resolve(Some(&dir.to_string_lossy()), tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("is a folder, not a log file"), "{e}");
    }

    #[test]
    fn the_resume_command_names_the_run_as_the_root_in_use_finds_it() {
        let under = |root: &str, name: &str| RunRef::folder(&Path::new(root).join(name));
        assert_eq!(
            resume_command(Path::new("/tmp/my root"), &under("/tmp/my root", "r1")),
            "loopctl --root '/tmp/my root' resume r1"
        );
        assert_eq!(
            resume_command(Path::new("elsewhere"), &under("/runs", "it's")),
            "loopctl resume '/runs/it'\\''s'"
        );
        assert_eq!(
            resume_command(Path::new("r"), &RunRef::file(Path::new("m.jsonl"))),
            "loopctl resume m.jsonl"
        );
        if default_root(None) == Path::new(DEFAULT_ROOT) {
            assert_eq!(
                resume_command(Path::new(DEFAULT_ROOT), &under(DEFAULT_ROOT, "r1")),
                "loopctl resume r1"
            );
        }
    }

    fn log(root: &Path, dir: &str, lines: &[(&str, &str)]) {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        let text: String = lines
            .iter()
            .map(|(id, ts)| {
                format!("{{\"v\":1,\"ts\":\"{ts}\",\"run_id\":\"{id}\",\"event\":\"run_started\",\"payload\":{{}}}}\n")
            })
            .collect();
        std::fs::write(d.join(LOG_NAME), text).unwrap();
    }

    #[test]
    fn state_files_belong_to_one_run() {
        let shared = Path::new("/r/merged.run.json");
        assert_eq!(state_path(shared, "a-1", None, false), shared);
        assert_eq!(state_path(shared, "a-1", Some("a-1"), true), shared);
        assert_eq!(
            state_path(shared, "b-1", Some("a-1"), true),
            Path::new("/r/merged.b-1.run.json")
        );
        assert_eq!(
            state_path(Path::new("/r/x/run.json"), "b-1", None, true),
            Path::new("/r/x/b-1.run.json")
        );
        let odd = state_path(shared, "../../etc", None, true);
        assert_eq!(odd.parent(), Some(Path::new("/r")));
    }

    #[test]
    fn ids_and_aliases_select_runs_inside_logs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        log(
            root,
            "m",
            &[
                ("a-20260101-000000", "2026-01-01T00:00:00Z"),
                ("b-20260101-000001", "2026-01-02T00:00:00Z"),
            ],
        );
        log(root, "n", &[("b-20260202-000000", "2026-01-03T00:00:00Z")]);
        let r = resolve(Some("a-20260101-000000"), root).unwrap();
        assert_eq!(
            (r.name.as_str(), r.run_id.as_deref()),
            ("m", Some("a-20260101-000000"))
        );
        let r = resolve(Some("a"), root).unwrap();
        assert_eq!(r.run_id.as_deref(), Some("a-20260101-000000"));
        match resolve(Some("b"), root) {
            Err(StoreError::Ambiguous { candidates, .. }) => assert_eq!(candidates.len(), 2),
            other => panic!("{other:?}"),
        }
        let s = select(None, None, root).unwrap();
        assert_eq!(s.run.name, "n");
        assert!(matches!(s.why, Why::Newest { .. }));
        assert!(select(Some("a-20260101-000000"), Some("b-20260101-000001"), root).is_err());
    }
}
