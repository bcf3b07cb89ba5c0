//! Prompt templates in Go `text/template` syntax (the gtmpl crate), with Avenor's variables.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use gtmpl::Value;

/// The variables a prompt sees. Git ones are empty outside a git work tree and before the
/// first phase has finished.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    pub run_id: String,
    pub phase: String,
    pub iteration: u64,
    pub max_iterations: u64,
    pub work_dir: String,
    pub prev_phase_commit: String,
    pub diff_stat: String,
    pub changed_files: String,
    /// The last failed observation's feedback (what `reflect` hands to the next plan).
    pub last_failure: String,
}

/// The variables' names, as a template reads them (`{{.RunID}}`), in `Vars::value`'s order.
const NAMES: [&str; 9] = [
    "RunID",
    "Phase",
    "LastFailure",
    "Iteration",
    "MaxIterations",
    "WorkDir",
    "PrevPhaseCommit",
    "DiffStat",
    "ChangedFiles",
];

impl Vars {
    fn value(&self) -> Value {
        let s = |v: &str| Value::String(v.to_string());
        let values = [
            s(&self.run_id),
            s(&self.phase),
            s(&self.last_failure),
            Value::from(self.iteration),
            Value::from(self.max_iterations),
            s(&self.work_dir),
            s(&self.prev_phase_commit),
            s(&self.diff_stat),
            s(&self.changed_files),
        ];
        let m: HashMap<String, Value> = NAMES.iter().map(|n| n.to_string()).zip(values).collect();
        Value::Object(m)
    }
}

/// Checks a template before anything runs: its syntax, and that every variable it reads is
/// one a prompt has (an unknown one failed only when its phase rendered, after others ran).
pub fn check(text: &str) -> Result<(), String> {
    let mut t = gtmpl::Template::default();
    t.parse(text).map_err(|e| e.to_string())?;
    let actions = text
        .split("{{")
        .skip(1)
        .filter_map(|a| a.split_once("}}").map(|(inside, _)| inside))
        .filter(|a| !a.trim_start_matches('-').trim_start().starts_with("/*"));
    for action in actions {
        if let Some(f) = fields(action).find(|f| !NAMES.contains(f)) {
            let known: Vec<String> = NAMES.iter().map(|n| format!(".{n}")).collect();
            return Err(format!(
                "unknown variable .{f} (a prompt has {})",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// The `.Name` fields an action reads: a dot not after a name, a number, `$` or `)`.
fn fields(action: &str) -> impl Iterator<Item = &str> {
    action.match_indices('.').filter_map(move |(i, _)| {
        let before = action[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | ')')) {
            return None;
        }
        let rest = &action[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        rest.starts_with(char::is_alphabetic).then(|| &rest[..end])
    })
}

pub fn render(text: &str, vars: &Vars) -> Result<String, String> {
    gtmpl::template(text, vars.value()).map_err(|e| e.to_string())
}

/// Whether a template uses the git delta variables (only then does the runner ask git).
pub fn uses_git(text: &str) -> bool {
    ["PrevPhaseCommit", "DiffStat", "ChangedFiles"]
        .iter()
        .any(|v| text.contains(v))
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// `git rev-parse HEAD` in `dir`, when it is a git work tree with a commit.
pub fn head(dir: &Path) -> Option<String> {
    git(dir, &["rev-parse", "HEAD"])
}

/// A fingerprint of the work tree's uncommitted state (status and diff against HEAD), so
/// that "nothing changed across an iteration" can be told from the log alone.
pub fn worktree(dir: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    let status = git(dir, &["status", "--porcelain=v1", "--untracked-files=all"])?;
    let diff = git(dir, &["diff", "HEAD"]).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(status.as_bytes());
    h.update([0]);
    h.update(diff.as_bytes());
    Some(
        h.finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// Fills the git delta variables: the commit the previous phase left behind, and what that
/// phase changed (from `before`, HEAD when it started, to `after`, HEAD when it ended).
pub fn git_delta(dir: &Path, before: Option<&str>, after: &str, vars: &mut Vars) {
    vars.prev_phase_commit = after.to_string();
    let Some(before) = before else { return };
    let range = format!("{before}..{after}");
    vars.diff_stat = git(dir, &["diff", "--stat", &range]).unwrap_or_default();
    vars.changed_files = git(dir, &["diff", "--name-only", &range]).unwrap_or_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_variables_no_prompt_has() {
        for ok in [
            "{{.RunID}} {{.Phase}} {{if .ChangedFiles}}{{.DiffStat}}{{else}}none{{end}}",
            "{{printf \"%d.x\" .Iteration}} of {{ .MaxIterations }}",
            "{{/* .Nope is a comment */}}{{- /* .Nor */ -}} {{.LastFailure}}",
            "no action, a .Dot and {{.WorkDir}}/x.txt",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        let e = check("hi {{.Undefined}}").unwrap_err();
        assert!(
            e.starts_with("unknown variable .Undefined (a prompt has .RunID, "),
            "{e}"
        );
        assert!(check("{{if .Iteration}}{{.Itration}}{{end}}").is_err());
        // Every name a template may read renders.
        let all: String = NAMES.iter().map(|n| format!("{{{{.{n}}}}}")).collect();
        assert_eq!(check(&all), Ok(()));
        assert!(render(&all, &Vars::default()).is_ok());
    }

    #[test]
    fn avenor_variables_and_if_else() {
        let mut v = Vars {
            run_id: "r1".into(),
            phase: "review".into(),
            iteration: 2,
            max_iterations: 5,
            work_dir: "/w".into(),
            ..Vars::default()
        };
        let t = "{{.RunID}} {{.Phase}} {{.Iteration}}/{{.MaxIterations}} {{.WorkDir}}: {{if .ChangedFiles}}changed:\n{{.ChangedFiles}}{{else}}first pass{{end}}";
        assert_eq!(render(t, &v).unwrap(), "r1 review 2/5 /w: first pass");
        v.changed_files = "a.rs\nb.rs".into();
        assert_eq!(
            render(t, &v).unwrap(),
            "r1 review 2/5 /w: changed:\na.rs\nb.rs"
        );
        assert!(check("{{if .Phase}}").is_err());
        assert!(check("plain {{.Phase}}").is_ok());
    }
}
