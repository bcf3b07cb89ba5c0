//! Escalation reports (iteration control): when the loop cannot go on by itself, a summary of the
//! attempts, the consolidated feedback, the repeated pattern if any, and the question for a
//! human. Written as an `escalated` event and as Markdown in the run folder.

use serde::{Deserialize, Serialize};

use crate::rules::criteria::cap;
use crate::rules::next_step::EvalSeen;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Escalation {
    /// Why it escalated: `ask_a_human` (a `when` rule) or `iteration_limit`.
    pub trigger: String,
    pub attempts_summary: Vec<String>,
    pub feedback: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    pub question: String,
}

/// Rule ids that failed in every failed evaluation (at least two), in first-seen order.
fn always_failing(evals: &[&EvalSeen]) -> Vec<String> {
    let Some(first) = evals.first() else {
        return Vec::new();
    };
    if evals.len() < 2 {
        return Vec::new();
    }
    first
        .failed
        .iter()
        .filter(|id| evals.iter().all(|e| e.failed.contains(id)))
        .cloned()
        .collect()
}

impl Escalation {
    /// `evals`: every evaluation so far; `failure`: the latest failure text; `blocked`: the
    /// phase's own question (an abort marker's label), if it asked one.
    pub fn build(
        trigger: &str,
        evals: &[EvalSeen],
        tries: u64,
        failure: Option<&str>,
        blocked: Option<&str>,
        max_len: usize,
    ) -> Escalation {
        let attempts_summary: Vec<String> = if evals.is_empty() {
            vec![format!(
                "{tries} observation(s), the last one {}",
                if blocked.is_some() {
                    "blocked"
                } else {
                    "failed"
                }
            )]
        } else {
            evals
                .iter()
                .map(|e| {
                    let verdict = if e.passed { "passed" } else { "failed" };
                    let rules = if e.failed.is_empty() {
                        String::new()
                    } else {
                        format!(", failing: {}", e.failed.join(", "))
                    };
                    format!(
                        "Iteration {} (phase {}): score {:.2}, {verdict}{rules}",
                        e.iteration, e.phase, e.score
                    )
                })
                .collect()
        };
        // Every distinct feedback line, latest first: what is still wrong comes first.
        let mut lines: Vec<&str> = Vec::new();
        let texts = failure
            .into_iter()
            .chain(evals.iter().rev().filter_map(|e| e.feedback.as_deref()));
        for l in texts
            .flat_map(str::lines)
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            if !lines.contains(&l) {
                lines.push(l);
            }
        }
        let feedback = cap(&lines.join("\n"), max_len);
        // A passing A evaluation followed by B's is one attempt judged twice: the pattern
        // is looked for in the failures.
        let failed: Vec<&EvalSeen> = evals.iter().filter(|e| !e.passed).collect();
        let stuck = always_failing(&failed);
        let scores: Vec<f64> = failed.iter().map(|e| e.score).collect();
        let pattern = if !stuck.is_empty() {
            Some(format!(
                "{} failed in every one of {} failed evaluations",
                stuck.join(", "),
                failed.len()
            ))
        } else if scores.len() >= 2 && scores.iter().all(|s| (s - scores[0]).abs() < 1e-9) {
            Some(format!(
                "the score stayed at {:.2} for {} evaluations",
                scores[0],
                scores.len()
            ))
        } else {
            None
        };
        let question = match blocked {
            Some(q) if !q.trim().is_empty() => q.trim().to_string(),
            _ => {
                let last = evals.last();
                let what = match last {
                    Some(e) if !e.failed.is_empty() => {
                        format!(
                            "{} still fail(s) (score {:.2})",
                            e.failed.join(", "),
                            e.score
                        )
                    }
                    Some(e) => format!("the score is still {:.2}", e.score),
                    None => "the check still fails".to_string(),
                };
                format!(
                    "After {tries} attempt(s), {what}. Should the loop change its approach, \
                     should the criteria change, or should it get more iterations?"
                )
            }
        };
        Escalation {
            trigger: trigger.into(),
            attempts_summary,
            feedback,
            pattern,
            question,
        }
    }

    pub fn to_markdown(&self, run_id: &str) -> String {
        let mut md = format!("# Escalation: {run_id}\n\n");
        md.push_str(&format!("**Question for a human:** {}\n\n", self.question));
        md.push_str(&format!("Trigger: `{}`\n\n## Attempts\n\n", self.trigger));
        for a in &self.attempts_summary {
            md.push_str(&format!("- {a}\n"));
        }
        if let Some(p) = &self.pattern {
            md.push_str(&format!("\n## Repeated pattern\n\n{p}\n"));
        }
        md.push_str("\n## Consolidated feedback\n\n");
        if self.feedback.is_empty() {
            md.push_str("(none recorded)\n");
        } else {
            md.push_str("```text\n");
            md.push_str(&self.feedback.replace("```", "'''"));
            md.push_str("\n```\n");
        }
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(it: u64, score: f64, failed: &[&str], fb: &str) -> EvalSeen {
        EvalSeen {
            iteration: it,
            phase: "A".into(),
            score,
            passed: false,
            failed: failed.iter().map(|s| s.to_string()).collect(),
            feedback: Some(fb.into()),
        }
    }

    #[test]
    fn a_report_names_attempts_pattern_feedback_and_question() {
        let evals = [
            ev(
                1,
                0.4,
                &["tests", "types"],
                "[fail] tests: 3 failing\n[fail] types: E0308",
            ),
            ev(2, 0.6, &["tests"], "[fail] tests: 1 failing"),
            ev(3, 0.6, &["tests"], "[fail] tests: 1 failing"),
        ];
        let e = Escalation::build("iteration_limit", &evals, 3, None, None, 500);
        assert_eq!(e.attempts_summary.len(), 3);
        assert_eq!(
            e.attempts_summary[0],
            "Iteration 1 (phase A): score 0.40, failed, failing: tests, types"
        );
        assert_eq!(
            e.pattern.as_deref(),
            Some("tests failed in every one of 3 failed evaluations")
        );
        assert_eq!(
            e.feedback,
            "[fail] tests: 1 failing\n[fail] tests: 3 failing\n[fail] types: E0308"
        );
        assert!(
            e.question
                .starts_with("After 3 attempt(s), tests still fail(s) (score 0.60)")
        );
        let md = e.to_markdown("run-1");
        for part in [
            "# Escalation: run-1",
            "## Attempts",
            "## Repeated pattern",
            "## Consolidated feedback",
            "**Question for a human:**",
        ] {
            assert!(md.contains(part), "{part}\n{md}");
        }
    }

    #[test]
    fn a_blocked_phase_asks_its_own_question_and_no_pattern_is_invented() {
        let evals = [ev(1, 0.4, &["a"], "x"), ev(2, 0.7, &["b"], "y")];
        let e = Escalation::build(
            "ask_a_human",
            &evals,
            2,
            Some("z"),
            Some("Which API version?"),
            3,
        );
        assert_eq!(e.question, "Which API version?");
        assert_eq!(e.pattern, None);
        assert_eq!(e.feedback.chars().count(), 3);
        let none = Escalation::build("ask_a_human", &[], 1, None, None, 500);
        assert_eq!(
            none.attempts_summary,
            ["1 observation(s), the last one failed"]
        );
    }
}
