//! Finding runs: a run folder (`<root>/<alias>/history.jsonl` + `run.json`, the layout loopctl
//! shares with aif-loop's `.ai-factory/evolution/`), a bare log file, or an id under a root.

use std::path::{Path, PathBuf};

use serde::Deserialize;

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
    /// Where this run's `run.json` lives (beside `history.jsonl`); `None` for a bare log file.
    pub run_json: Option<PathBuf>,
}

impl RunRef {
    fn folder(dir: &Path) -> RunRef {
        RunRef {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: Some(dir.to_path_buf()),
            log: dir.join(LOG_NAME),
            run_json: Some(dir.join(RUN_JSON)),
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
            run_json: None,
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
    let text = std::fs::read_to_string(root.join(CURRENT)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Resolves a RUN argument: a run folder, a log file, or a run id / alias under `root`. With no
/// argument, the run `current.json` points at.
pub fn resolve(spec: Option<&str>, root: &Path) -> Result<RunRef> {
    let Some(spec) = spec else {
        let cur = read_current(root).ok_or_else(|| {
            StoreError::NotFound(format!(
                "no active run: {} has no readable {CURRENT}; name a run (see `loopctl list`)",
                root.display()
            ))
        })?;
        let name = cur.task_alias.or(cur.active_run_id).unwrap_or_default();
        return resolve(Some(&name), root);
    };
    let p = Path::new(spec);
    if p.is_file() {
        return Ok(RunRef::file(p));
    }
    if p.is_dir() {
        if p.join(LOG_NAME).is_file() {
            return Ok(RunRef::folder(p));
        }
        return Err(StoreError::NotFound(format!(
            "{spec}: folder has no {LOG_NAME}; if it is a root, list its runs with `loopctl list {spec}`"
        )));
    }
    let dir = root.join(spec);
    if dir.join(LOG_NAME).is_file() {
        return Ok(RunRef::folder(&dir));
    }
    // A full run id whose folder is named by alias.
    for r in list_runs(root).unwrap_or_default() {
        if first_run_id(&r.log).as_deref() == Some(spec) {
            return Ok(r);
        }
    }
    Err(StoreError::NotFound(format!(
        "no run {spec:?}: not a file, not a folder, and no run of that id or alias under {}",
        root.display()
    )))
}

/// The command that continues `run` (an interrupted run) when `root` is the root in use: by
/// name for a folder of that root (with `--root` unless it is the default one), else by path.
pub fn resume_command(root: &Path, run: &RunRef) -> String {
    let Some(dir) = &run.dir else {
        return format!("loopctl resume {}", shell_word(&run.log.to_string_lossy()));
    };
    if dir.parent() != Some(root) {
        return format!("loopctl resume {}", shell_word(&dir.to_string_lossy()));
    }
    let name = shell_word(&run.name);
    if root == default_root(None) {
        format!("loopctl resume {name}")
    } else {
        let root = shell_word(&root.to_string_lossy());
        format!("loopctl --root {root} resume {name}")
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

/// The `run_id` of the first event of a log that has one.
fn first_run_id(log: &Path) -> Option<String> {
    let text = std::fs::read(log).ok()?;
    text.split(|&b| b == b'\n').take(50).find_map(|l| {
        let t = std::str::from_utf8(l).ok()?;
        loopctl_core::event::run_key(t)
            .ok()
            .flatten()
            .map(|k| k.into_owned())
    })
}

/// Every run folder directly under `root` (one holding `history.jsonl`), sorted by name.
pub fn list_runs(root: &Path) -> Result<Vec<RunRef>> {
    let rd = std::fs::read_dir(root).map_err(io_err(root))?;
    let mut out: Vec<RunRef> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join(LOG_NAME).is_file())
        .map(|p| RunRef::folder(&p))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The run folders under a root, as `list` and `status` see it: a root the user named
/// (`--root`, `$LOOPCTL_ROOT`) must exist, while the default root missing only means that no
/// run was made here yet (no runs, not an error).
pub fn runs_under(root: &Path, named: bool) -> Result<Vec<RunRef>> {
    match list_runs(root) {
        Err(StoreError::Io { cause, .. })
            if !named && cause.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(Vec::new())
        }
        Err(StoreError::Io { path, cause }) if cause.kind() == std::io::ErrorKind::NotFound => {
            Err(StoreError::NotFound(format!(
                "no root folder {}: it does not exist",
                path.display()
            )))
        }
        other => other,
    }
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
}
