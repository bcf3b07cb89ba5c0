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

impl Vars {
    fn value(&self) -> Value {
        let s = |v: &str| Value::String(v.to_string());
        let m: HashMap<String, Value> = [
            ("RunID", s(&self.run_id)),
            ("Phase", s(&self.phase)),
            ("LastFailure", s(&self.last_failure)),
            ("Iteration", Value::from(self.iteration)),
            ("MaxIterations", Value::from(self.max_iterations)),
            ("WorkDir", s(&self.work_dir)),
            ("PrevPhaseCommit", s(&self.prev_phase_commit)),
            ("DiffStat", s(&self.diff_stat)),
            ("ChangedFiles", s(&self.changed_files)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Value::Object(m)
    }
}

/// Checks a template's syntax without rendering it.
pub fn check(text: &str) -> Result<(), String> {
    let mut t = gtmpl::Template::default();
    t.parse(text).map_err(|e| e.to_string())
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
