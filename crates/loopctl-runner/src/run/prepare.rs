//! Loop file validation before anything runs: Avenor's rules, plus what only the runner can
//! check (prompt files exist, templates parse, prompt phases have an agent); and the outputs a
//! run has outside its folder (the sentinel, the `--on-event` stream).

use std::path::{Path, PathBuf};

use loopctl_core::rules::loop_file::{self, LoopFile, PhaseKind};
use loopctl_store::discover::{self, RunRef};

use super::RunnerError;
use crate::template;

/// A validated loop file, ready to run.
#[derive(Debug)]
pub struct Prepared {
    pub file: LoopFile,
    pub warnings: Vec<String>,
}

/// A loop file refused: its errors, and its warnings (an unknown key may be the typo behind
/// an error).
#[derive(Debug)]
pub struct Refused {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

pub(super) fn prompt_path(loop_file: Option<&Path>, rel: &str) -> PathBuf {
    let p = Path::new(rel);
    match loop_file.and_then(Path::parent) {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

/// Parses and validates a loop file (Avenor's rules, plus: prompt files exist, templates
/// parse, prompt phases have an agent). Errors name the file and the phase.
pub fn prepare(
    loop_file: &Path,
    text: &str,
    initial: Option<String>,
    cli_agent: Option<&[String]>,
) -> std::result::Result<Prepared, Refused> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", loop_file.display());
    // Every problem at once: the runner's checks also run over what parsed of a file Avenor's
    // rules refuse.
    let (file, mut errors, warnings) = match loop_file::parse(text, initial) {
        Ok(p) => (p.file, Vec::new(), p.warnings),
        Err(r) => {
            let errors: Vec<String> = r.errors.iter().map(|e| at(e)).collect();
            match r.partial {
                Some(file) => (*file, errors, r.warnings),
                None => {
                    return Err(Refused {
                        errors,
                        warnings: r.warnings,
                    });
                }
            }
        }
    };
    for kind in [PhaseKind::Pre, PhaseKind::Loop, PhaseKind::Post] {
        for (i, p) in file.phases(kind).iter().enumerate() {
            let place = format!("{}[{i}] ({:?})", kind.as_str(), p.name);
            let text = match (&p.prompt, &p.prompt_file) {
                (Some(t), _) => Some(t.clone()),
                (_, Some(f)) => {
                    let path = prompt_path(Some(loop_file), f);
                    match std::fs::read_to_string(&path) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            errors
                                .push(at(&format!("{place}: prompt_file {}: {e}", path.display())));
                            None
                        }
                    }
                }
                _ => None,
            };
            if let Some(t) = text {
                if let Err(e) = template::check(&t) {
                    errors.push(at(&format!("{place}: prompt template: {e}")));
                }
                if file.agent_for(p, cli_agent).is_none() {
                    errors.push(at(&format!(
                        "{place}: a prompt phase needs an agent: pass --agent, or set \"agent\" in the loop file or the phase"
                    )));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(Prepared { file, warnings })
    } else {
        Err(Refused { errors, warnings })
    }
}

/// The sentinel file, checked before anything runs: a sentinel whose folder is missing was
/// found out only when the run had ended (the sentinel not written, the exit code 2 after a
/// completed run). It is not created: it appears when the run ends. (The `--on-event` stream
/// is opened once, before the run folder is made: `open_sink`.)
pub(super) fn check_outputs(opts: &super::RunOptions) -> Result<(), String> {
    if let Some(p) = &opts.sentinel_file {
        let parent = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if p.is_dir() {
            return Err(format!("--sentinel-file {}: is a folder", p.display()));
        }
        if !parent.is_dir() {
            return Err(format!(
                "--sentinel-file {}: folder {} does not exist",
                p.display(),
                parent.display()
            ));
        }
    }
    Ok(())
}

/// The `--on-event` stream, opened once. A FIFO is opened without waiting for a reader: with
/// none, the open fails at once (a run waiting in `open` could not be told to stop) and the
/// error says to start the reader first; once open, writes to it block as to any pipe.
pub(super) fn open_sink(
    spec: Option<&str>,
) -> Result<Option<Box<dyn std::io::Write + Send>>, RunnerError> {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(p) = spec else { return Ok(None) };
    if p == "-" {
        return Ok(Some(Box::new(std::io::stdout())));
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(p)
        .map_err(|cause| match cause.raw_os_error() {
            Some(nix::libc::ENXIO) => RunnerError::Output(format!(
                "--on-event {p}: a FIFO with no reader: start its reader first (e.g. `cat {p} &`), then the run"
            )),
            _ => RunnerError::Output(format!("--on-event {p}: {cause}")),
        })?;
    let mut flags = nix::fcntl::OFlag::from_bits_truncate(
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)
            .map_err(|e| RunnerError::Output(format!("--on-event {p}: {e}")))?,
    );
    flags.remove(nix::fcntl::OFlag::O_NONBLOCK);
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(flags))
        .map_err(|e| RunnerError::Output(format!("--on-event {p}: {e}")))?;
    Ok(Some(Box::new(file)))
}

/// What to say of a run whose log another process holds: it is running, and what to do.
pub(super) fn running(root: &Path, run: &RunRef, pid: &str) -> String {
    let holder = match pid {
        "unknown" => "a runner is taking it up (its pid is not written yet: another `resume` or `run` that has just started)".to_string(),
        pid => format!("runner pid {pid}"),
    };
    format!(
        "run {} is running ({holder}): follow it with `{}`, or stop it with `{}`",
        run.run_id.as_deref().unwrap_or(&run.name),
        discover::run_command(root, run, "tail"),
        discover::run_command(root, run, "stop")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avenors_rules_and_the_runners_checks_report_together() {
        let text = r#"{"max_iterations":-1,"loop":[{"name":"b","prompt":"y {{nope"}]}"#;
        let refused = prepare(Path::new("l.json"), text, None, None).unwrap_err();
        let all = refused.errors.join("\n");
        assert_eq!(refused.errors.len(), 3, "{all}");
        assert!(all.contains("max_iterations must be"), "{all}");
        assert!(all.contains("a prompt phase needs an agent"), "{all}");
        assert!(all.contains("prompt template"), "{all}");
    }
}
