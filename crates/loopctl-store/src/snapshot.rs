//! `run.json`: rebuilt from the log, written atomically, checked against the log.
//!
//! A `run.json` written by loopctl is a snapshot: its `log` mark names the last line it
//! reflects (offset, length, fingerprint). When the log still holds that line, replay starts
//! after it; otherwise (a stale, corrupt or foreign file) the whole log is replayed. Fields the
//! log cannot supply are salvaged from whatever `run.json` is there, and the report says so.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use loopctl_core::decode::salvage::salvage_object;
use loopctl_core::fold::replay::Finding;
use loopctl_core::fold::run_state::{LogMark, fingerprint};
use loopctl_core::{Outcome, RunState};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::discover::{RunRef, state_path};
use crate::fold::replay;
use crate::read::ReadOptions;
use crate::{Result, StoreError, io_err, without_bom};

/// What was found in `run.json` before the rebuild.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Prior {
    /// No `run.json`.
    Missing,
    /// A loopctl snapshot whose mark agrees with the log; replay continued from it.
    Snapshot,
    /// A loopctl snapshot whose mark does not match the log (log rewritten, truncated, replaced).
    Mismatch,
    /// Valid JSON written by another tool (aif-loop); used only for salvage and comparison.
    Foreign,
    /// Not valid JSON; what could be read was salvaged.
    Damaged,
    /// There but not readable (permissions, a folder, a symlink loop): the state is rebuilt
    /// from the log alone, since the log is the source of truth.
    Unreadable,
}

#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    pub field: &'static str,
    /// `log`, `run.json`, `run.json (salvaged)` or `none`.
    pub source: &'static str,
}

pub struct Rebuilt {
    pub outcome: Outcome,
    /// The run `run.json` is about (`None` when the log holds no event).
    pub state: Option<RunState>,
    pub prior: Prior,
    pub prior_detail: Option<String>,
    /// Fields of the prior `run.json` that differ from the rebuilt state.
    pub differences: Vec<String>,
    pub provenance: Vec<Provenance>,
    pub repairs: Vec<String>,
    /// The chosen run's state file (`discover::state_path`): what `recover` writes.
    pub state_path: Option<PathBuf>,
}

impl Rebuilt {
    /// The bytes `recover` writes: pretty JSON and a final newline.
    pub fn run_json(&self) -> Option<String> {
        self.state.as_ref().map(render)
    }

    /// Whether run.json (if any) parses and agrees with the log (`check`'s verdict on it).
    pub fn run_json_agrees(&self) -> bool {
        !matches!(
            self.prior,
            Prior::Damaged | Prior::Mismatch | Prior::Unreadable
        ) && self.differences.is_empty()
    }

    /// Whether `recover` leaves run.json as it is although its bytes are not the ones it would
    /// write: another tool's file that agrees with the log (nothing to recover).
    pub fn run_json_kept(&self) -> bool {
        self.prior == Prior::Foreign && self.run_json_agrees()
    }

    /// Whether `recover`, replacing an existing run.json, keeps it aside (`.damaged`) first:
    /// only one that does not parse or does not agree with the log. loopctl's own snapshot
    /// is brought up to date.
    pub fn keeps_aside(&self) -> bool {
        self.prior != Prior::Snapshot && !self.run_json_agrees()
    }
}

pub fn render(state: &RunState) -> String {
    let mut s = serde_json::to_string_pretty(state).unwrap_or_default();
    s.push('\n');
    s
}

/// Reads `len` bytes at `offset`.
fn read_at(path: &Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut f = File::open(path).map_err(io_err(path))?;
    f.seek(SeekFrom::Start(offset)).map_err(io_err(path))?;
    let mut buf = vec![0; len as usize];
    f.read_exact(&mut buf).map_err(io_err(path))?;
    Ok(buf)
}

/// Whether the line a snapshot's mark names is still in the log, byte for byte.
fn mark_agrees(log: &Path, s: &RunState) -> Result<bool> {
    let m = &s.log;
    let size = std::fs::metadata(log).map_err(io_err(log))?.len();
    if m.offset == 0 || m.offset > size || m.len + 1 > m.offset || m.fingerprint.is_none() {
        return Ok(false);
    }
    if m.offset == size {
        // The log ends with the run's last event, without a newline (an unterminated last line
        // that parses is applied): the mark is just past it, and nothing was added since.
        let line = read_at(log, m.offset - m.len, m.len)?;
        if line.last() != Some(&b'\n') && m.fingerprint.as_deref() == Some(&fingerprint(&line)) {
            return Ok(true);
        }
    }
    let bytes = read_at(log, m.offset - m.len - 1, m.len + 1)?;
    Ok(bytes.last() == Some(&b'\n')
        && m.fingerprint.as_deref() == Some(&fingerprint(&bytes[..bytes.len() - 1])))
}

/// Why a snapshot's log mark does not name a line of the log: most often the log was replaced
/// or cut; a log whose last line lost its newline still ends with the line, one byte short.
fn mismatch(log: &Path, m: &LogMark) -> Result<String> {
    let size = std::fs::metadata(log).map_err(io_err(log))?.len();
    if m.offset == size + 1 && m.len < m.offset && m.fingerprint.is_some() {
        let line = read_at(log, m.offset - m.len - 1, m.len)?;
        if m.fingerprint.as_deref() == Some(&fingerprint(&line)) {
            return Ok(format!(
                "its log mark names line {}, which ends the log without its newline now (the \
                 log lost its last byte): the mark is one byte past the end",
                m.line
            ));
        }
    }
    Ok(format!(
        "the line its log mark names (line {}, offset {}) is not in the log",
        m.line, m.offset
    ))
}

/// The bytes of `state`'s run.json (a run of `log`), its log mark fingerprinted: what
/// `recover` writes for it.
pub fn run_json_of(log: &Path, state: &RunState) -> Result<String> {
    let mut s = state.clone();
    stamp(log, &mut s)?;
    Ok(render(&s))
}

/// Fills in the fingerprint of the last line the state reflects.
fn stamp(log: &Path, s: &mut RunState) -> Result<()> {
    if s.log.offset == 0 {
        return Ok(());
    }
    let terminated = read_at(log, s.log.offset - 1, 1)?.first() == Some(&b'\n');
    let start = s.log.offset - s.log.len - u64::from(terminated);
    s.log.fingerprint = Some(fingerprint(&read_at(log, start, s.log.len)?));
    Ok(())
}

/// The fields of the run.json at `path` as `rebuild` reads them for salvage: all of them when
/// it is valid JSON, else what a tolerant parse recovers. `None` when it cannot be read.
pub fn prior_fields(path: &Path) -> Option<Map<String, Value>> {
    let text = String::from_utf8_lossy(without_bom(&std::fs::read(path).ok()?)).into_owned();
    Some(match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => m,
        Ok(_) => Map::new(),
        Err(_) => salvage_object(&text).fields,
    })
}

/// A state file as `rebuild` found it.
struct PriorFile {
    prior: Prior,
    detail: Option<String>,
    /// A loopctl snapshot whose mark agrees with the log.
    snapshot: Option<RunState>,
    fields: Map<String, Value>,
    repairs: Vec<String>,
    source: &'static str,
}

impl PriorFile {
    fn run_id(&self) -> Option<&str> {
        self.fields.get("run_id").and_then(Value::as_str)
    }
}

/// Reads the state file at `path` (if any) and judges it against `log`.
fn read_prior(log: &Path, path: Option<&Path>) -> Result<PriorFile> {
    let mut p = PriorFile {
        prior: Prior::Missing,
        detail: None,
        snapshot: None,
        fields: Map::new(),
        repairs: Vec::new(),
        source: "run.json",
    };
    let text = match path {
        Some(path) => match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(without_bom(&b)).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(p),
            Err(e) => {
                p.prior = Prior::Unreadable;
                p.detail = Some(format!("cannot be read: {e}"));
                return Ok(p);
            }
        },
        None => return Ok(p),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => {
            if let (Ok(s), true) = (
                serde_json::from_value::<RunState>(v.clone()),
                v.get("log").is_some(),
            ) {
                if mark_agrees(log, &s)? {
                    p.prior = Prior::Snapshot;
                    p.snapshot = Some(s);
                } else {
                    p.prior = Prior::Mismatch;
                    p.detail = Some(mismatch(log, &s.log)?);
                }
            } else {
                p.prior = Prior::Foreign;
            }
            if let Value::Object(m) = v {
                p.fields = m;
            }
        }
        Err(e) => {
            p.prior = Prior::Damaged;
            p.detail = Some(format!("not valid JSON: {e}"));
            let s = salvage_object(&text);
            p.fields = s.fields;
            p.repairs = s.repairs;
            p.source = "run.json (salvaged)";
        }
    }
    Ok(p)
}

/// Rebuilds the state of the run in `log`, using its state file as a snapshot when it agrees.
/// `run_json` is the log's state file (`discover::state_path` says which file holds the
/// state of each run of a log holding several). With `use_snapshot` false the whole log is
/// read (for full statistics). `pick` selects the run when the log holds several (else the
/// one `run_json` names, else the one whose alias is `default_run`, else the most recently
/// updated).
pub fn rebuild(
    log: &Path,
    run_json: Option<&Path>,
    opts: &ReadOptions,
    pick: Option<&str>,
    use_snapshot: bool,
) -> Result<Rebuilt> {
    let shared = read_prior(log, run_json)?;
    // A snapshot continues only its own run: used when it is the run asked for, and when every
    // line before its mark is its own event (no other run's state or finding would be lost).
    let snapshot = shared
        .snapshot
        .as_ref()
        .filter(|s| use_snapshot && pick.is_none_or(|p| p == s.run_id) && s.events >= s.log.line);
    let outcome = replay(log, opts, snapshot)?;
    let several = outcome.runs.len() > 1;
    let chosen = pick.map(str::to_string).or_else(|| {
        shared
            .run_id()
            .filter(|id| several && outcome.runs.contains_key(*id))
            .or_else(|| folder_run(&outcome, &opts.default_run).map(|s| s.run_id.as_str()))
            .map(str::to_string)
    });
    let mut state = match &chosen {
        Some(id) => Some(outcome.runs.get(id).cloned().ok_or_else(|| {
            StoreError::NotFound(format!(
                "{}: no run {id:?} in this log (it holds: {})",
                log.display(),
                outcome.runs.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?),
        None => None,
    };
    // The state file of the chosen run: the shared one, or its own beside it.
    let owner = match (shared.prior != Prior::Missing, shared.run_id()) {
        (false, _) => None,
        (true, Some(id)) => Some(id.to_string()),
        (true, None) => folder_run(&outcome, &opts.default_run).map(|s| s.run_id.clone()),
    };
    let path = match (run_json, &state) {
        (Some(shared), Some(s)) => Some(state_path(shared, &s.run_id, owner.as_deref(), several)),
        (p, _) => p.map(Path::to_path_buf),
    };
    let own = if path.as_deref() == run_json {
        shared
    } else {
        read_prior(log, path.as_deref())?
    };
    let mut provenance = Vec::new();
    let mut differences = Vec::new();
    if let Some(s) = state.as_mut() {
        stamp(log, s)?;
        let fields = &own.fields;
        let same_run = own.run_id().is_none_or(|id| id == s.run_id);
        let source = if same_run { own.source } else { "none" };
        let mut take = |field: &'static str, have: bool, slot: &mut dyn FnMut(&Value) -> bool| {
            let src = if have {
                "log"
            } else if same_run && fields.get(field).is_some_and(|v| !v.is_null() && slot(v)) {
                source
            } else {
                "none"
            };
            provenance.push(Provenance { field, source: src });
        };
        take("task", s.task.is_some(), &mut |v| {
            s.task = Some(v.clone());
            true
        });
        take("criteria", s.criteria.is_some(), &mut |v| {
            s.criteria = Some(v.clone());
            true
        });
        take("max_iterations", s.max_iterations.is_some(), &mut |v| {
            s.max_iterations = v.as_u64();
            s.max_iterations.is_some()
        });
        // aif-loop's agent's own fields: no event holds them, so the old file (or the snapshot
        // the replay continued from) is their only source; said only when taken from it.
        let agent = [
            ("plan", &mut s.plan),
            ("prepared_checks", &mut s.prepared_checks),
            ("critique", &mut s.critique),
        ];
        for (field, slot) in agent {
            let old = fields.get(field).filter(|v| !v.is_null());
            if let (None, true, Some(v)) = (&slot, same_run, old) {
                *slot = Some(Box::new(v.clone()));
                provenance.push(Provenance { field, source });
            }
        }
        if !matches!(own.prior, Prior::Missing | Prior::Unreadable) {
            differences = compare(fields, s);
        }
    }
    Ok(Rebuilt {
        outcome,
        state,
        prior: own.prior,
        prior_detail: own.detail,
        differences,
        provenance,
        repairs: own.repairs,
        state_path: path,
    })
}

/// The state file of run `run_id` of a log (`discover::state_path`), given the log's shared
/// state file and its replay.
pub fn state_file(shared: &Path, run_id: &str, outcome: &Outcome, default_run: &str) -> PathBuf {
    let owner = prior_fields(shared).and_then(|f| {
        f.get("run_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| folder_run(outcome, default_run).map(|s| s.run_id.clone()))
    });
    state_path(shared, run_id, owner.as_deref(), outcome.runs.len() > 1)
}

/// Replays a run's log in one thread: the outcome, and the state of the run selected (its
/// `run_id`, else the run the log is about).
pub fn replay_run(run: &RunRef, max_line: usize) -> Result<(Outcome, Option<RunState>)> {
    let opts = ReadOptions {
        default_run: run.name.clone(),
        threads: 1,
        max_line,
        states: true,
        regular_only: false,
    };
    let outcome = replay(&run.log, &opts, None)?;
    let state = match &run.run_id {
        Some(id) => outcome.runs.get(id).cloned(),
        None => folder_run(&outcome, &run.name).cloned(),
    };
    Ok((outcome, state))
}

/// Fills the `max_iterations` a log leaves unset (no `run_started`) from the log's state file
/// (`run.run_json`), as `rebuild` does for `replay` and `status`: for the run that file names,
/// else for the folder's run (`pick_folder_run`). `states` are the log's runs in run id order.
/// Only the shared file is read; `rebuild` also reads a run's own file (`state_path`).
pub fn salvage_max_iterations(run: &RunRef, states: &mut [&mut RunState]) {
    if states.iter().all(|s| s.max_iterations.is_some()) {
        return;
    }
    let Some(fields) = run.run_json.as_deref().and_then(prior_fields) else {
        return;
    };
    let Some(max) = fields.get("max_iterations").and_then(Value::as_u64) else {
        return;
    };
    let target = match fields.get("run_id").and_then(Value::as_str) {
        Some(id) => states.iter().position(|s| s.run_id == id),
        None => pick_folder_run(states.iter().map(|s| &**s), &run.name)
            .and_then(|p| states.iter().position(|s| std::ptr::eq(&**s, p))),
    };
    if let Some(i) = target {
        states[i].max_iterations.get_or_insert(max);
    }
}

/// The run a folder's log is about: its only run; else the one whose alias or id is the
/// folder's name; else the most recently updated.
pub fn folder_run<'o>(outcome: &'o Outcome, name: &str) -> Option<&'o RunState> {
    pick_folder_run(outcome.runs.values(), name)
}

/// Each run's findings, in the order of `runs` (a log's runs in run id order), as `list`,
/// `status` and `serve`'s `/api/runs` count them: those naming the run, and, for the run that
/// stands for the folder `name` (`pick_folder_run`), those naming none (damaged lines, a torn
/// tail).
pub fn finding_counts<'o, I>(runs: I, findings: &[Finding], name: &str) -> Vec<usize>
where
    I: Iterator<Item = &'o RunState> + Clone,
{
    let mut named: std::collections::HashMap<&str, usize> = Default::default();
    let mut unnamed = 0;
    for f in findings {
        match &f.run_id {
            Some(r) => *named.entry(r.as_str()).or_default() += 1,
            None => unnamed += 1,
        }
    }
    let folder = pick_folder_run(runs.clone(), name).map(|s| s.run_id.as_str());
    runs.map(|s| {
        let own = named.get(s.run_id.as_str()).copied().unwrap_or(0);
        own + if folder == Some(s.run_id.as_str()) {
            unnamed
        } else {
            0
        }
    })
    .collect()
}

/// `folder_run` among `runs`, given in run id order.
pub fn pick_folder_run<'o, I>(runs: I, name: &str) -> Option<&'o RunState>
where
    I: Iterator<Item = &'o RunState> + Clone,
{
    let mut two = runs.clone();
    if let (Some(only), None) = (two.next(), two.next()) {
        return Some(only);
    }
    runs.clone()
        .find(|s| s.task_alias == name || s.run_id == name)
        .or_else(|| runs.max_by_key(|s| (s.updated_at, s.events)))
}

/// Fields a user reads off `run.json` that the prior file gets wrong.
fn compare(prior: &Map<String, Value>, s: &RunState) -> Vec<String> {
    let now = serde_json::to_value(s).unwrap_or(Value::Null);
    let keys: Vec<&str> = if prior.contains_key("log") {
        now.as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    } else {
        vec![
            "run_id",
            "status",
            "iteration",
            "max_iterations",
            "phase",
            "current_step",
            "last_score",
        ]
    };
    let mut out: Vec<String> = keys
        .into_iter()
        .filter(|k| {
            let (a, b) = (prior.get(*k), now.get(*k));
            match (a.and_then(Value::as_f64), b.and_then(Value::as_f64)) {
                (Some(x), Some(y)) => x != y,
                _ => a != b && !(a.is_none() && b == Some(&Value::Null)),
            }
        })
        .map(|k| {
            let (a, b) = show_pair(prior.get(k), now.get(k));
            format!("{k}: run.json has {a}, the log says {b}")
        })
        .collect();
    let reason = |v: &Value| {
        v.get("stop")
            .and_then(|s| s.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if !prior.contains_key("log")
        && reason(&Value::Object(prior.clone())).unwrap_or_default() != s.stop.reason
    {
        out.push(format!(
            "stop.reason: run.json has {:?}, the log says {:?}",
            reason(&Value::Object(prior.clone())).unwrap_or_default(),
            s.stop.reason
        ));
    }
    out
}

/// Two values that differ, each shortened as `show` does, but from a little before the first
/// character where they differ: cut at the same place, two long values would read the same.
fn show_pair(a: Option<&Value>, b: Option<&Value>) -> (String, String) {
    let (Some(x), Some(y)) = (a, b) else {
        return (show(a), show(b));
    };
    let (x, y) = (x.to_string(), y.to_string());
    let same = x.chars().zip(y.chars()).take_while(|(p, q)| p == q).count();
    // Only when the difference would be cut off.
    if same < 50 {
        return (show(a), show(b));
    }
    let from = same - 20;
    let cut = |s: &str| {
        let tail: String = s.chars().skip(from).collect();
        match tail.chars().count() > 60 {
            true => format!("…{}…", tail.chars().take(57).collect::<String>()),
            false => format!("…{tail}"),
        }
    };
    (cut(&x), cut(&y))
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "nothing".into(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 60 {
                format!(
                    "{}…",
                    &s[..s.char_indices().nth(57).map_or(s.len(), |(i, _)| i)]
                )
            } else {
                s
            }
        }
    }
}

/// Writes `run.json` atomically (temp file in the same folder, fsync, rename, fsync folder).
/// The mode is the old file's when it is a regular file its owner can read (a state file
/// rewritten because it was unreadable must not stay so), else the default: never a symlink's
/// own 0777. The temporary file is removed on any failure (a folder in the way, a full disk).
pub fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions().mode() & 0o7777)
        .filter(|m| m & 0o400 != 0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // `.<name>.XXXXXX`: the form `clean` knows. Dropped (so removed) on any failure.
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .rand_bytes(6)
        // The default file mode (0666 less the umask), not a temporary file's 0600.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        // Said of the folder, without the random name tempfile's error gives: the folder is
        // what is missing or not writable.
        .map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no such folder".to_string(),
                kind => std::io::Error::from(kind).to_string(),
            };
            io_err(dir)(std::io::Error::new(e.kind(), why))
        })?;
    let written = (|| {
        tmp.write_all(contents.as_bytes())?;
        if let Some(mode) = mode {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        File::open(dir)?.sync_all()
    })();
    written.map_err(io_err(path))
}

/// Keeps a prior `run.json` aside as `run.json.damaged` (`.damaged.2`, ... when taken), never
/// over an earlier copy: a copy, or the file itself moved there when it cannot be read.
pub fn keep_aside(path: &Path) -> Result<PathBuf> {
    let base = path.with_extension("json.damaged");
    let mut target = base.clone();
    let mut n = 1;
    while target.exists() {
        n += 1;
        target = PathBuf::from(format!("{}.{n}", base.display()));
    }
    if std::fs::copy(path, &target).is_err() {
        // Unreadable (mode 000, another owner, a symlink loop): moved aside instead, which needs
        // no read access. Never lost: the caller writes the new state after this returns.
        let _ = std::fs::remove_file(&target);
        std::fs::rename(path, &target).map_err(io_err(path))?;
        return Ok(target);
    }
    File::open(&target)
        .and_then(|f| f.sync_all())
        .map_err(io_err(&target))?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(json: &str) -> (tempfile::TempDir, RunRef) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run.json"), json).unwrap();
        let run = RunRef::file(&dir.path().join("history.jsonl"));
        (dir, run)
    }

    fn state(id: &str, max: Option<u64>) -> RunState {
        let mut s = RunState::new(id);
        s.max_iterations = max;
        s
    }

    /// The files in `dir` other than `keep`.
    fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !keep.contains(&n.as_str()))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn write_atomic_takes_the_mode_of_a_regular_file_only() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        // What a new file gets here (the umask applies).
        let fresh = d.path().join("fresh.json");
        write_atomic(&fresh, "{}").unwrap();
        let default = mode(&fresh);
        // A regular file keeps its mode.
        let kept = d.path().join("kept.json");
        std::fs::write(&kept, "x").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&kept, "{}").unwrap();
        assert_eq!(mode(&kept), 0o640);
        // A symlink (0777 itself), dangling or to a folder: the default, never 0777.
        for (link, to) in [("dangling.json", "nowhere"), ("to-dir.json", ".")] {
            let p = d.path().join(link);
            std::os::unix::fs::symlink(to, &p).unwrap();
            write_atomic(&p, "{}").unwrap();
            let m = std::fs::symlink_metadata(&p).unwrap();
            assert!(m.is_file(), "{link}");
            assert_eq!(mode(&p), default, "{link}");
        }
        assert_ne!(default, 0o777);
    }

    #[test]
    fn write_atomic_leaves_no_temporary_file_when_it_fails() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("run.json");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("inside"), "x").unwrap();
        let err = write_atomic(&target, "{}").unwrap_err();
        assert!(err.to_string().contains("run.json"), "{err}");
        assert_eq!(others(d.path(), &[]), ["run.json"]);
    }

    /// A missing folder is named, not the random name of a temporary file never made.
    #[test]
    fn write_atomic_into_a_missing_folder_names_the_folder() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("missing");
        let err = write_atomic(&dir.join("x.prom"), "x")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("{}: no such folder", dir.display())),
            "{err}"
        );
        assert!(!err.contains(".x.prom."), "{err}");
    }

    #[test]
    fn max_iterations_is_salvaged_for_the_run_the_state_file_names() {
        let (_d, run) = run_with(r#"{"run_id":"b","max_iterations":7}"#);
        let (mut a, mut b) = (state("a", None), state("b", None));
        salvage_max_iterations(&run, &mut [&mut a, &mut b]);
        assert_eq!((a.max_iterations, b.max_iterations), (None, Some(7)));
    }

    #[test]
    fn a_state_file_naming_no_run_fills_the_folders_run_and_never_overrides_the_log() {
        let (_d, run) = run_with(r#"{"max_iterations":7,"#);
        let mut only = state("x", None);
        salvage_max_iterations(&run, &mut [&mut only]);
        assert_eq!(only.max_iterations, Some(7));
        let mut logged = state("x", Some(3));
        salvage_max_iterations(&run, &mut [&mut logged]);
        assert_eq!(logged.max_iterations, Some(3));
    }
}
