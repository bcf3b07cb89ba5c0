//! What `clean` may delete: only run folders directly under the root, and in them only the
//! files a run writes. Everything else is kept, and so is the folder that holds it.
//!
//! `plan` decides and touches nothing; `execute` deletes what a plan names, nothing more.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::discover::{LOG_NAME, RUN_JSON};
use crate::{Result, io_err};

/// Where the runner's phase and check output goes, inside the run folder.
pub const LOGS_DIR: &str = "logs";
/// Written by `loopctl stop` for a live runner to read.
pub const STOP_REQUEST: &str = "stop.request";
/// The runner's escalation report.
pub const ESCALATION: &str = "escalation.md";
/// aif-loop's artifact, beside its run.json and history.jsonl (the aif-loop run folder).
pub const ARTIFACT: &str = "artifact.md";

/// What cleaning one run folder deletes and keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The run folder, canonical.
    pub dir: PathBuf,
    /// Files a run wrote, to delete (and `logs/` when nothing else is in it).
    pub remove: Vec<PathBuf>,
    /// Entries no run writes: kept, and with them the folder.
    pub keep: Vec<PathBuf>,
}

impl Plan {
    /// Whether the folder itself goes too.
    pub fn removes_folder(&self) -> bool {
        self.keep.is_empty()
    }
}

/// Why a folder may not be cleaned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} is not a run folder under the root {1}")]
    OutsideRoot(PathBuf, PathBuf),
    #[error("{0} is the current folder or one of its parents")]
    HoldsCwd(PathBuf),
    #[error("{0} holds no {LOG_NAME}: not a run folder")]
    NoLog(PathBuf),
}

/// Plans cleaning `dir`: refused unless it is, once symlinks are resolved, a folder directly
/// under `root` holding a `history.jsonl`, and neither `cwd` nor one of its parents.
pub fn plan(root: &Path, dir: &Path, cwd: &Path) -> Result<std::result::Result<Plan, Refusal>> {
    let canon = |p: &Path| std::fs::canonicalize(p).map_err(io_err(p));
    let (root, dir_c) = (canon(root)?, canon(dir)?);
    if dir_c.parent() != Some(root.as_path()) {
        return Ok(Err(Refusal::OutsideRoot(dir.to_path_buf(), root)));
    }
    if std::fs::canonicalize(cwd).is_ok_and(|c| c.starts_with(&dir_c)) {
        return Ok(Err(Refusal::HoldsCwd(dir.to_path_buf())));
    }
    if !dir_c.join(LOG_NAME).is_file() {
        return Ok(Err(Refusal::NoLog(dir.to_path_buf())));
    }
    let (own, states) = (own_files(&dir_c), state_files(&dir_c));
    let mut plan = Plan {
        dir: dir_c.clone(),
        remove: vec![],
        keep: vec![],
    };
    for (path, name, is_dir) in entries(&dir_c)? {
        if is_dir && name == LOGS_DIR {
            let before = plan.keep.len();
            for (p, n, d) in entries(&path)? {
                if !d && is_output(&n) {
                    plan.remove.push(p);
                } else {
                    plan.keep.push(p);
                }
            }
            if plan.keep.len() == before {
                plan.remove.push(path);
            }
        } else if !is_dir && (is_run_file(&name, &states) || own.contains(&name)) {
            plan.remove.push(path);
        } else {
            plan.keep.push(path);
        }
    }
    Ok(Ok(plan))
}

/// Deletes what `plan` names: files, then `logs/` and the folder if they are empty by then
/// (never a folder with anything left in it).
pub fn execute(plan: &Plan) -> Result<()> {
    let (dirs, files): (Vec<_>, Vec<_>) = plan
        .remove
        .iter()
        .partition(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()));
    for f in files {
        match std::fs::remove_file(f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(f)(e)),
            _ => {}
        }
    }
    for d in dirs {
        std::fs::remove_dir(d).map_err(io_err(d))?;
    }
    if plan.removes_folder() {
        std::fs::remove_dir(&plan.dir).map_err(io_err(&plan.dir))?;
    }
    Ok(())
}

/// `(path, name, is a real folder)` of each entry; a symlink is never a folder here.
fn entries(dir: &Path) -> Result<Vec<(PathBuf, String, bool)>> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let is_dir = e.file_type().map_err(io_err(e.path()))?.is_dir();
        out.push((
            e.path(),
            e.file_name().to_string_lossy().into_owned(),
            is_dir,
        ));
    }
    out.sort();
    Ok(out)
}

/// The names a run (loopctl's runner, or aif-loop) writes in its folder; `states` are the
/// state files of its log's other runs (`<run_id>.run.json`, beside `run.json`).
fn is_run_file(name: &str, states: &[String]) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // A state file, its damaged copies, an interrupted atomic write of it (`write_atomic`'s
    // temporary: `.<name>.` and six letters or digits).
    let state_copy = |state: &str| {
        name == state
            || name
                .strip_prefix(state)
                .and_then(|r| r.strip_prefix(".damaged"))
                .is_some_and(|r| r.is_empty() || r.strip_prefix('.').is_some_and(digits))
            || name
                .strip_prefix('.')
                .and_then(|r| r.strip_prefix(state))
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|r| r.len() == 6 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
    };
    matches!(
        name,
        LOG_NAME
            | STOP_REQUEST
            | ESCALATION
            | ARTIFACT
            | ".history.jsonl.lock"
            | ".history.jsonl.phase-group"
    ) || name.strip_prefix("history.jsonl.torn-").is_some_and(digits)
        || std::iter::once(RUN_JSON)
            .chain(states.iter().map(String::as_str))
            .any(state_copy)
}

/// The state files the runs of the folder's log may have beside `run.json`
/// (`discover::state_path`).
fn state_files(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read(dir.join(LOG_NAME)) else {
        return vec![];
    };
    let mut names: Vec<String> = text
        .split(|&b| b == b'\n')
        .filter_map(|l| loopctl_core::decode::lines::decode(l).text())
        .filter_map(|l| {
            loopctl_core::decode::reference_parser::run_key(l)
                .ok()
                .flatten()
        })
        .map(|id| format!("{}.{RUN_JSON}", loopctl_core::rules::run_id::file_name(&id)))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A phase's or check's output in `logs/`: `<seq>-<name>[.<n>].stdout|stderr|prompt`.
fn is_output(name: &str) -> bool {
    let Some((seq, _)) = name.split_once('-') else {
        return false;
    };
    !seq.is_empty()
        && seq.bytes().all(|b| b.is_ascii_digit())
        && [".stdout", ".stderr", ".prompt"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

/// The sentinel and `--on-event` files the run's `run_started` names, when they are in the
/// run folder itself.
fn own_files(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read(dir.join(LOG_NAME)) else {
        return vec![];
    };
    let Some(started) = text
        .split(|&b| b == b'\n')
        .take(50)
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .find(|v| v["event"] == "run_started")
    else {
        return vec![];
    };
    let opts = &started["payload"]["options"];
    let workdir = opts["workdir"].as_str().map(Path::new);
    ["sentinel_file", "on_event"]
        .iter()
        .filter_map(|k| opts[k].as_str())
        .filter_map(|f| {
            let p = Path::new(f);
            let p = match workdir {
                Some(w) if p.is_relative() => w.join(p),
                _ => p.to_path_buf(),
            };
            let parent = std::fs::canonicalize(p.parent()?).ok()?;
            let name = p.file_name()?.to_string_lossy().into_owned();
            (parent == dir).then_some(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_run_files() {
        for n in [
            "history.jsonl",
            "run.json",
            "run.json.damaged.3",
            "history.jsonl.torn-812",
            ".history.jsonl.phase-group",
            ".run.json.aZ09xy",
            "artifact.md",
            "r-1.run.json",
            "r-1.run.json.damaged.2",
            ".r-1.run.json.Ab12Cd",
        ] {
            assert!(is_run_file(n, &["r-1.run.json".into()]), "{n}");
        }
        for n in [
            "history.jsonl.bak",
            "run.json.damaged.x",
            ".run.json.abc",
            "notes.md",
            "other.run.json",
        ] {
            assert!(!is_run_file(n, &["r-1.run.json".into()]), "{n}");
        }
        assert!(is_output("000002-build.stdout"));
        assert!(is_output("000007-check-A-r.2.stderr"));
        assert!(!is_output("build.stdout"));
        assert!(!is_output("notes.txt"));
    }

    #[test]
    fn refusals_touch_nothing() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("empty")).unwrap();
        let out = t.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join(LOG_NAME), "").unwrap();
        assert!(matches!(
            plan(&root, &out, t.path()).unwrap(),
            Err(Refusal::OutsideRoot(..))
        ));
        assert!(matches!(
            plan(&root, &root.join("empty"), t.path()).unwrap(),
            Err(Refusal::NoLog(_))
        ));
        assert!(matches!(
            plan(&root, &root, t.path()).unwrap(),
            Err(Refusal::OutsideRoot(..))
        ));
    }
}
