//! Is a loop stuck? Five detectors over a run's `Trace`, each with its evidence.
//!
//! Pure: the caller passes `now` (the CLI reads the clock; replay and tests do not).
//! `docs/postmortem.md` documents the detectors, their defaults and the reset choice.

use serde::{Deserialize, Serialize};

use crate::analysis::liveness::Liveness;
use crate::analysis::postmortem::{duration, score};
use crate::decode::timestamp::Ts;
use crate::fold::trace::{Attempt, Evaluation, Trace};

/// Scores are decimals stored as binary floats: 0.80 -> 0.82 must count as a gain of 0.02.
const EPS: f64 = 1e-9;

/// When the score detector's count goes back to zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Reset {
    /// A gain of at least `min_delta` resets the count (what the reducer's `stagnation_count`
    /// does).
    #[default]
    OnProgress,
    /// The count only grows: every evaluation without progress in the run counts.
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    Score,
    RepeatedFailure,
    NoChange,
    Oscillation,
    Stalled,
}

impl Detector {
    pub const ALL: [Detector; 5] = [
        Detector::Score,
        Detector::RepeatedFailure,
        Detector::NoChange,
        Detector::Oscillation,
        Detector::Stalled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Detector::Score => "score",
            Detector::RepeatedFailure => "repeated_failure",
            Detector::NoChange => "no_change",
            Detector::Oscillation => "oscillation",
            Detector::Stalled => "stalled",
        }
    }
}

/// The loop file's `"stagnation"` object. Every field is optional.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// A score gain under this is no progress.
    pub min_delta: f64,
    /// Evaluations without progress (and without fail blockers) that make the score stagnate.
    pub limit: u64,
    pub reset: Reset,
    /// Consecutive evaluations with the same failed rules, or consecutive failed attempts of one
    /// phase with the same error, that count as a repeated failure.
    pub repeat: u64,
    /// Consecutive iterations that leave the git commit and work tree as they found them.
    pub no_change: u64,
    /// Scores looked at for oscillation.
    pub oscillation_window: usize,
    /// Direction changes within the window that count as oscillation.
    pub oscillation_turns: usize,
    /// A running run with no event for this long is stalled.
    pub stalled_after_ms: u64,
    /// Detectors that stop the loop (read by the runner only; every detector counts for the
    /// verdict).
    pub stop_on: Vec<Detector>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            min_delta: crate::fold::run_state::STAGNATION_MIN_DELTA,
            limit: 2,
            reset: Reset::OnProgress,
            repeat: 3,
            no_change: 1,
            oscillation_window: 6,
            oscillation_turns: 3,
            stalled_after_ms: 30 * 60 * 1000,
            stop_on: vec![Detector::Score],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub detector: Detector,
    pub triggered: bool,
    /// False when the detector cannot judge this log (no scores, no git data, not running, ...);
    /// the summary says why.
    pub applicable: bool,
    pub summary: String,
    /// Evidence: the iterations, scores, rule ids and event seqs involved.
    pub iterations: Vec<u64>,
    pub scores: Vec<f64>,
    pub rule_ids: Vec<String>,
    pub seqs: Vec<u64>,
}

impl Finding {
    fn new(detector: Detector, triggered: bool, summary: String) -> Finding {
        Finding {
            detector,
            triggered,
            applicable: true,
            summary,
            iterations: Vec::new(),
            scores: Vec::new(),
            rule_ids: Vec::new(),
            seqs: Vec::new(),
        }
    }

    fn not_applicable(detector: Detector, summary: String) -> Finding {
        Finding {
            applicable: false,
            ..Finding::new(detector, false, summary)
        }
    }

    fn evaluations<'a>(mut self, evs: impl IntoIterator<Item = &'a Evaluation>) -> Finding {
        for e in evs {
            self.iterations.push(e.iteration);
            if let Some(s) = e.score {
                self.scores.push(s);
            }
            if let Some(q) = e.seq {
                self.seqs.push(q);
            }
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Any finding triggered.
    pub stagnating: bool,
    /// One finding per detector, in `Detector::ALL` order (`detectors` in JSON: `findings`
    /// there are always a log's damaged lines and seq problems).
    #[serde(rename = "detectors")]
    pub findings: Vec<Finding>,
}

impl Verdict {
    pub fn finding(&self, d: Detector) -> Option<&Finding> {
        self.findings.iter().find(|f| f.detector == d)
    }

    pub fn triggered(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.triggered)
    }
}

/// Runs every detector over `trace`. `now` and `runner` (whether the run's runner is alive,
/// as its lock says) are only used by the stalled detector.
pub fn assess(trace: &Trace, cfg: &Config, now: Option<Ts>, runner: Liveness) -> Verdict {
    let findings = vec![
        score_rule(trace, cfg),
        repeated_failure(trace, cfg),
        no_change(trace, cfg),
        oscillation(trace, cfg),
        stalled(trace, cfg, now, runner),
    ];
    Verdict {
        stagnating: findings.iter().any(|f| f.triggered),
        findings,
    }
}

fn scores_text(evs: &[&Evaluation]) -> String {
    evs.iter()
        .map(|e| {
            format!(
                "{} (iteration {})",
                score(e.score.unwrap_or(0.0)),
                e.iteration
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The evaluations the score rule counts now, and whether any scored evaluation exists.
/// aif-loop's rule: delta = score - last score (0 at first); a delta under `min_delta` with no
/// fail blockers counts; the first evaluation in a new quality phase is a baseline (re-scoring
/// the same artifact against more rules), as in the reducer.
pub fn score_streak<'t>(trace: &'t Trace, cfg: &Config) -> Vec<&'t Evaluation> {
    let mut counted: Vec<&Evaluation> = Vec::new();
    let mut prev_phase: Option<&str> = None;
    for e in trace.scored() {
        let s = e.score.unwrap_or(0.0);
        let progress = s - e.previous_score >= cfg.min_delta - EPS;
        let new_phase = prev_phase.is_some_and(|p| p != e.phase);
        if progress {
            if cfg.reset == Reset::OnProgress {
                counted.clear();
            }
        } else if !e.has_blockers() && !new_phase {
            counted.push(e);
        }
        prev_phase = Some(&e.phase);
    }
    counted
}

fn score_rule(trace: &Trace, cfg: &Config) -> Finding {
    let n = trace.scored().count();
    if n == 0 {
        return Finding::not_applicable(
            Detector::Score,
            "no evaluation with a score: the score rule does not apply".into(),
        );
    }
    let limit = cfg.limit.max(1);
    let counted = score_streak(trace, cfg);
    let count = counted.len() as u64;
    let since = match cfg.reset {
        Reset::OnProgress => "in a row",
        Reset::Never => "in the run",
    };
    let summary = if count >= limit {
        format!(
            "score stagnates: {count} evaluation(s) {since} gained less than {} with no fail blockers (limit {limit}): {}",
            score(cfg.min_delta),
            scores_text(&counted)
        )
    } else if count > 0 {
        format!(
            "{count} of {limit} evaluation(s) without progress so far: {}",
            scores_text(&counted)
        )
    } else {
        let last = trace.scored().last().and_then(|e| e.score).unwrap_or(0.0);
        format!(
            "score progressing ({n} scored evaluation(s), last {})",
            score(last)
        )
    };
    Finding::new(Detector::Score, count >= limit, summary).evaluations(counted)
}

/// Lowercase; runs of digits and hex (with a digit, or 8+ long) become `#`; path-like words
/// become `<path>`; whitespace collapses. Two errors that differ only in numbers, hashes, times
/// or paths normalise to the same text.
pub fn normalise_error(text: &str) -> String {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            let core = w.trim_matches(|c: char| "\"'`()[]{},;:".contains(c));
            let pathy = core.starts_with('/')
                || core.starts_with("./")
                || core.starts_with("../")
                || core.starts_with("~/")
                || core.matches(['/', '\\']).count() >= 2;
            if pathy {
                "<path>".to_string()
            } else {
                hex_runs(&w.to_lowercase())
            }
        })
        .collect();
    words.join(" ")
}

fn hex_runs(w: &str) -> String {
    let chars: Vec<char> = w.chars().collect();
    let mut out = String::with_capacity(w.len());
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_hexdigit() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        // `0x` prefixes belong to the number.
        if chars[i] == '0'
            && chars.get(i + 1) == Some(&'x')
            && chars.get(i + 2).is_some_and(char::is_ascii_hexdigit)
        {
            i += 2;
        }
        while i < chars.len() && chars[i].is_ascii_hexdigit() {
            i += 1;
        }
        let run = &chars[start..i];
        if run.iter().any(char::is_ascii_digit) || run.len() >= 8 {
            // `3.2`, `10:00`, `1,000` are one number.
            let mut back = out.chars().rev();
            let joined = matches!(back.next(), Some('.' | ',' | ':' | '-' | '_'))
                && back.next() == Some('#');
            if joined {
                out.pop();
            } else if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.extend(run);
        }
    }
    out
}

fn repeated_failure(trace: &Trace, cfg: &Config) -> Finding {
    let repeat = cfg.repeat.max(1) as usize;
    // Failed rule sets: the trailing run of evaluations that fail the same non-empty set.
    let mut streak: Vec<&Evaluation> = Vec::new();
    let mut set: Vec<String> = Vec::new();
    for e in &trace.evaluations {
        let mut ids = e.failed.clone().unwrap_or_default();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            streak.clear();
            set.clear();
        } else if ids == set {
            streak.push(e);
        } else {
            streak = vec![e];
            set = ids;
        }
    }
    // Errors: per phase, the trailing run of failed attempts with the same normalised error.
    // One pass over the attempts (a long run has hundreds of thousands), phases in order of
    // first appearance: (name, run, key).
    let mut per: Vec<(&str, Vec<&Attempt>, String)> = Vec::new();
    for a in trace.phases() {
        let i = match per.iter().position(|(n, ..)| *n == a.name) {
            Some(i) => i,
            None => {
                per.push((&a.name, Vec::new(), String::new()));
                per.len() - 1
            }
        };
        if !a.finished {
            continue;
        }
        let (_, run, key) = &mut per[i];
        match a.error_text() {
            Some(text) => {
                let k = normalise_error(&text);
                if k == *key {
                    run.push(a);
                } else {
                    *run = vec![a];
                    *key = k;
                }
            }
            None => {
                run.clear();
                key.clear();
            }
        }
    }
    let mut worst: Option<(Vec<&Attempt>, String)> = None;
    for (_, run, key) in per {
        if run.len() >= repeat && worst.as_ref().is_none_or(|(w, _)| run.len() > w.len()) {
            worst = Some((run, key));
        }
    }
    let rules_hit = streak.len() >= repeat;
    let mut parts = Vec::new();
    let mut f = Finding::new(Detector::RepeatedFailure, false, String::new());
    if rules_hit {
        parts.push(format!(
            "the same fail-severity rules ({}) failed in {} evaluations in a row: {}",
            set.join(", "),
            streak.len(),
            scores_text(&streak)
        ));
        f = f.evaluations(streak.iter().copied());
        f.rule_ids = set.clone();
    }
    if let Some((run, _)) = &worst {
        let last = run.last().and_then(|a| a.error_text()).unwrap_or_default();
        parts.push(format!(
            "phase {:?} failed {} times in a row with the same error: {}",
            run[0].name,
            run.len(),
            last
        ));
        for a in run {
            if let Some(i) = a.iteration {
                f.iterations.push(i);
            }
            if let Some(s) = a.end_seq.or(a.start_seq) {
                f.seqs.push(s);
            }
        }
    }
    f.triggered = !parts.is_empty();
    f.summary = if f.triggered {
        parts.join("; ")
    } else if trace.evaluations.is_empty() && trace.phases().is_empty() {
        f.applicable = false;
        "no evaluations and no phase attempts: nothing to repeat".into()
    } else {
        format!("no failure repeated {repeat} times in a row")
    };
    f
}

fn no_change(trace: &Trace, cfg: &Config) -> Finding {
    let git = |a: &Attempt| {
        a.commit_start.is_some()
            || a.commit_end.is_some()
            || a.worktree_start.is_some()
            || a.worktree_end.is_some()
    };
    if !trace.phases().iter().any(git) {
        return Finding::not_applicable(
            Detector::NoChange,
            "does not apply: the log has no git commit or work tree fingerprints on phase events"
                .into(),
        );
    }
    // Loop iterations in order of first appearance (pre and post phases are not iterations).
    let mut order: Vec<u64> = Vec::new();
    for a in trace.phases() {
        if matches!(a.kind.as_deref(), Some("pre" | "post")) {
            continue;
        }
        if let Some(i) = a.iteration
            && !order.contains(&i)
        {
            order.push(i);
        }
    }
    let mut streak: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut compared = 0;
    for it in order {
        let of: Vec<&Attempt> = trace
            .phases()
            .iter()
            .filter(|a| {
                a.iteration == Some(it) && !matches!(a.kind.as_deref(), Some("pre" | "post"))
            })
            .collect();
        // An iteration still under way is not judged yet.
        if of.iter().any(|a| !a.finished) {
            continue;
        }
        let (Some(first), Some(last)) = (of.first(), of.last()) else {
            continue;
        };
        let pairs = [
            (&first.commit_start, &last.commit_end),
            (&first.worktree_start, &last.worktree_end),
        ];
        let known: Vec<_> = pairs
            .iter()
            .filter(|(a, b)| a.is_some() && b.is_some())
            .collect();
        if known.is_empty() {
            streak.clear();
            continue;
        }
        compared += 1;
        if known.iter().all(|(a, b)| a == b) {
            let seqs = [first.start_seq, last.end_seq]
                .into_iter()
                .flatten()
                .collect();
            streak.push((it, seqs));
        } else {
            streak.clear();
        }
    }
    let need = cfg.no_change.max(1) as usize;
    let triggered = streak.len() >= need;
    let summary = if triggered {
        format!(
            "{} iteration(s) in a row left the commit and work tree as they found them (limit {need}): iterations {}",
            streak.len(),
            streak
                .iter()
                .map(|s| s.0.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!(
            "{compared} iteration(s) compared; the last {} left no change (limit {need})",
            streak.len()
        )
    };
    let mut f = Finding::new(Detector::NoChange, triggered, summary);
    for (it, seqs) in streak {
        f.iterations.push(it);
        f.seqs.extend(seqs);
    }
    f
}

fn oscillation(trace: &Trace, cfg: &Config) -> Finding {
    let all: Vec<&Evaluation> = trace.scored().collect();
    let w = cfg.oscillation_window.min(all.len());
    let window = &all[all.len() - w..];
    if window.len() < 4 {
        return Finding::not_applicable(
            Detector::Oscillation,
            format!(
                "needs at least 4 scores in the window, has {}",
                window.len()
            ),
        );
    }
    let scores: Vec<f64> = window.iter().map(|e| e.score.unwrap_or(0.0)).collect();
    let mut turns = 0;
    let mut dir = 0i8;
    for p in scores.windows(2) {
        let d = p[1] - p[0];
        let s = if d > EPS {
            1
        } else if d < -EPS {
            -1
        } else {
            0
        };
        if s != 0 {
            if dir != 0 && s != dir {
                turns += 1;
            }
            dir = s;
        }
    }
    let net = scores[scores.len() - 1] - scores[0];
    let flat = net.abs() < cfg.min_delta - EPS;
    let triggered = turns >= cfg.oscillation_turns.max(1) && flat;
    let summary = format!(
        "{} over the last {} scores: {turns} direction change(s) (limit {}), net change {}{}",
        if triggered {
            "oscillating"
        } else {
            "not oscillating"
        },
        window.len(),
        cfg.oscillation_turns.max(1),
        score(net),
        if flat { " (no net progress)" } else { "" }
    );
    Finding::new(Detector::Oscillation, triggered, summary).evaluations(window.iter().copied())
}

/// Stalled is a live runner making no progress: a run whose runner is gone is interrupted,
/// and one whose runner cannot be known (no lock: aif-loop, Avenor, bare files) is not judged.
fn stalled(trace: &Trace, cfg: &Config, now: Option<Ts>, runner: Liveness) -> Finding {
    if !trace.is_running() {
        return Finding::not_applicable(
            Detector::Stalled,
            "does not apply: the run has stopped".into(),
        );
    }
    let (Some(now), Some(last)) = (now, trace.last_ts) else {
        return Finding::not_applicable(
            Detector::Stalled,
            "does not apply: no clock or no timestamped event".into(),
        );
    };
    let idle = u64::try_from(now.0.saturating_sub(last.0)).unwrap_or(0);
    let why = match runner {
        Liveness::Alive => None,
        Liveness::Dead => Some("the run is interrupted (no runner holds its lock)"),
        Liveness::Unknown => {
            Some("nothing tells whether a process still writes this log (it has no runner lock)")
        }
    };
    if let Some(why) = why {
        return Finding::not_applicable(
            Detector::Stalled,
            format!(
                "does not apply: {why}; no event for {} (since {last})",
                duration(idle)
            ),
        );
    }
    let triggered = idle > cfg.stalled_after_ms;
    let summary = format!(
        "{} no event for {} (since {last}; limit {})",
        if triggered { "stalled:" } else { "running;" },
        duration(idle),
        duration(cfg.stalled_after_ms)
    );
    let mut f = Finding::new(Detector::Stalled, triggered, summary);
    f.iterations.push(trace.iteration);
    f.seqs.extend(trace.last_seq);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::trace::traces_from_bytes;

    /// A one-run trace from NDJSON lines (any dialect), through the real parser.
    fn trace(lines: &[&str]) -> Trace {
        let text = lines.join("\n") + "\n";
        let mut runs = traces_from_bytes("t", text.as_bytes());
        assert_eq!(runs.len(), 1);
        runs.pop_first().map(|r| r.1).unwrap_or_default()
    }

    fn eval(i: u64, score: f64, extra: &str) -> String {
        format!(
            r#"{{"ts":"2026-01-01T00:0{i}:00Z","run_id":"r","iteration":{i},"phase":"A","step":"EVALUATE","event":"evaluation_done","payload":{{"score":{score},"passed":false{extra}}}}}"#
        )
    }

    fn evals(scores: &[f64], extra: &str) -> Trace {
        let lines: Vec<String> = scores
            .iter()
            .enumerate()
            .map(|(i, s)| eval(i as u64 + 1, *s, extra))
            .collect();
        trace(&lines.iter().map(String::as_str).collect::<Vec<_>>())
    }

    fn run(t: &Trace, cfg: &Config, d: Detector) -> Finding {
        assess(t, cfg, None, Liveness::Alive)
            .finding(d)
            .cloned()
            .unwrap_or_else(|| Finding::not_applicable(d, "missing".into()))
    }

    #[test]
    fn score_rule_triggers_on_two_small_gains() {
        let t = evals(&[0.5, 0.51, 0.515], "");
        let f = run(&t, &Config::default(), Detector::Score);
        assert!(f.triggered, "{f:?}");
        assert_eq!(f.iterations, vec![2, 3]);
        assert_eq!(f.scores, vec![0.51, 0.515]);
        assert!(assess(&t, &Config::default(), None, Liveness::Alive).stagnating);
    }

    #[test]
    fn score_rule_counts_a_gain_of_exactly_min_delta_as_progress() {
        let t = evals(&[0.8, 0.82, 0.84, 0.86], "");
        let f = run(&t, &Config::default(), Detector::Score);
        assert!(!f.triggered, "{f:?}");
        assert!(f.iterations.is_empty());
    }

    #[test]
    fn fail_blockers_do_not_count() {
        let t = evals(&[0.5, 0.51, 0.515], r#","failed":["R1"]"#);
        assert!(!run(&t, &Config::default(), Detector::Score).triggered);
        let t = evals(&[0.5, 0.51, 0.515], r#","fail_count":1"#);
        assert!(!run(&t, &Config::default(), Detector::Score).triggered);
        let t = evals(&[0.5, 0.51, 0.515], r#","warnings":["W1"]"#);
        assert!(run(&t, &Config::default(), Detector::Score).triggered);
    }

    #[test]
    fn reset_policies_differ_after_progress() {
        // 0.5 -> 0.51 (1) -> 0.6 (progress) -> 0.605 (1 or 2).
        let t = evals(&[0.5, 0.51, 0.6, 0.605], "");
        let on = run(&t, &Config::default(), Detector::Score);
        assert!(!on.triggered);
        assert_eq!(on.iterations, vec![4]);
        let never = Config {
            reset: Reset::Never,
            ..Config::default()
        };
        let f = run(&t, &never, Detector::Score);
        assert!(f.triggered);
        assert_eq!(f.iterations, vec![2, 4]);
        assert_eq!(f.scores, vec![0.51, 0.605]);
    }

    #[test]
    fn first_evaluation_after_a_switch_is_a_baseline() {
        let t = trace(&[
            &eval(1, 0.9, ""),
            r#"{"run_id":"r","iteration":1,"phase":"A_B","step":"SWITCH","event":"phase_switched","payload":{"from_phase":"A","to_phase":"B"}}"#,
            r#"{"run_id":"r","iteration":1,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.85,"passed":false}}"#,
            r#"{"run_id":"r","iteration":2,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.86,"passed":false}}"#,
        ]);
        let f = run(&t, &Config::default(), Detector::Score);
        assert_eq!(f.iterations, vec![2], "the B baseline is not counted");
        assert!(!f.triggered);
        let state = crate::replay_bytes("t", {
            let l = [
                eval(1, 0.9, ""),
                r#"{"run_id":"r","iteration":1,"phase":"A_B","step":"SWITCH","event":"phase_switched","payload":{"from_phase":"A","to_phase":"B"}}"#.into(),
                r#"{"run_id":"r","iteration":1,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.85,"passed":false}}"#.into(),
                r#"{"run_id":"r","iteration":2,"phase":"B","step":"EVALUATE","event":"evaluation_done","payload":{"score":0.86,"passed":false}}"#.into(),
            ];
            (l.join("\n") + "\n").into_bytes()
        }.as_slice());
        assert_eq!(state.runs["r"].stagnation_count, 1);
    }

    #[test]
    fn score_rule_without_scores_does_not_apply() {
        let t = trace(&[r#"{"event":"stopped","run_id":"r","payload":{"reason":"user_stop"}}"#]);
        let f = run(&t, &Config::default(), Detector::Score);
        assert!(!f.triggered && !f.applicable);
    }

    #[test]
    fn repeated_failed_rules_trigger() {
        let t = evals(&[0.4, 0.6, 0.8], r#","failed":["R2","R1"]"#);
        let f = run(&t, &Config::default(), Detector::RepeatedFailure);
        assert!(f.triggered, "{f:?}");
        assert_eq!(f.rule_ids, vec!["R1", "R2"]);
        assert_eq!(f.iterations, vec![1, 2, 3]);
        // Rising scores: the score rule is quiet, the verdict is not.
        assert!(!run(&t, &Config::default(), Detector::Score).triggered);
        assert!(assess(&t, &Config::default(), None, Liveness::Alive).stagnating);
    }

    #[test]
    fn changing_failed_rules_do_not_trigger() {
        let t = trace(&[
            &eval(1, 0.4, r#","failed":["R1"]"#),
            &eval(2, 0.6, r#","failed":["R1","R2"]"#),
            &eval(3, 0.8, r#","failed":["R1"]"#),
            &eval(4, 0.85, r#","failed":["R1"]"#),
        ]);
        let f = run(&t, &Config::default(), Detector::RepeatedFailure);
        assert!(!f.triggered, "{f:?}");
    }

    fn attempt(seq: u64, it: u64, err: Option<&str>) -> [String; 2] {
        let fin = match err {
            Some(e) => format!(
                r#""exit_code":1,"stop_reason":"error","error":{}"#,
                serde_json::Value::String(e.into())
            ),
            None => r#""exit_code":0,"stop_reason":"end_turn""#.into(),
        };
        [
            format!(
                r#"{{"v":1,"seq":{},"run_id":"n","event":"phase_started","iteration":{it},"step":"test","payload":{{"kind":"loop","attempt":1}}}}"#,
                seq * 2 - 1
            ),
            format!(
                r#"{{"v":1,"seq":{},"run_id":"n","event":"phase_finished","iteration":{it},"step":"test","payload":{{"kind":"loop","attempt":1,{fin}}}}}"#,
                seq * 2
            ),
        ]
    }

    fn attempts(errs: &[Option<&str>]) -> Trace {
        let lines: Vec<String> = errs
            .iter()
            .enumerate()
            .flat_map(|(i, e)| attempt(i as u64 + 1, i as u64 + 1, *e))
            .collect();
        trace(&lines.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn the_same_error_three_times_triggers() {
        let t = attempts(&[
            Some("cargo test failed at /tmp/a1/src/lib.rs:12 after 3.2s (pid 4411)"),
            Some("cargo test failed at /tmp/b7/src/lib.rs:40 after 9.0s (pid 12)"),
            Some("Cargo test  failed at /work/x/src/lib.rs:7 after 1s (pid 0xdeadbeef)"),
        ]);
        let f = run(&t, &Config::default(), Detector::RepeatedFailure);
        assert!(f.triggered, "{f:?}");
        assert_eq!(f.iterations, vec![1, 2, 3]);
        assert_eq!(f.seqs, vec![2, 4, 6]);
        assert!(f.summary.contains("\"test\" failed 3 times"));
    }

    #[test]
    fn different_or_interrupted_errors_do_not_trigger() {
        let t = attempts(&[Some("timeout"), Some("timeout"), None, Some("timeout")]);
        assert!(!run(&t, &Config::default(), Detector::RepeatedFailure).triggered);
        let t = attempts(&[Some("timeout"), Some("panic"), Some("timeout")]);
        assert!(!run(&t, &Config::default(), Detector::RepeatedFailure).triggered);
    }

    #[test]
    fn normalisation_ignores_numbers_hashes_paths_and_spacing() {
        assert_eq!(
            normalise_error("Error at 2026-01-01T10:00:00Z in  /tmp/x/y.rs: commit 3fa9c0d"),
            normalise_error("error at 2027-12-31T23:59:59Z in /home/u/z.rs: commit 8b01e2a")
        );
        assert_ne!(
            normalise_error("add failed"),
            normalise_error("bead failed")
        );
    }

    fn git_iteration(seq: u64, it: u64, before: (&str, &str), after: (&str, &str)) -> [String; 2] {
        [
            format!(
                r#"{{"v":1,"seq":{seq},"run_id":"g","event":"phase_started","iteration":{it},"step":"fix","payload":{{"kind":"loop","commit":"{}","worktree":"{}"}}}}"#,
                before.0, before.1
            ),
            format!(
                r#"{{"v":1,"seq":{},"run_id":"g","event":"phase_finished","iteration":{it},"step":"fix","payload":{{"kind":"loop","exit_code":0,"stop_reason":"end_turn","commit":"{}","worktree":"{}"}}}}"#,
                seq + 1,
                after.0,
                after.1
            ),
        ]
    }

    #[test]
    fn an_iteration_that_changes_nothing_triggers_no_change() {
        let mut lines: Vec<String> = git_iteration(1, 1, ("c1", "w1"), ("c2", "w2")).into();
        lines.extend(git_iteration(3, 2, ("c2", "w2"), ("c2", "w2")));
        let t = trace(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let f = run(&t, &Config::default(), Detector::NoChange);
        assert!(f.triggered, "{f:?}");
        assert_eq!(
            (f.iterations.clone(), f.seqs.clone()),
            (vec![2], vec![3, 4])
        );
        let two = Config {
            no_change: 2,
            ..Config::default()
        };
        assert!(!run(&t, &two, Detector::NoChange).triggered);
    }

    #[test]
    fn a_dirty_work_tree_is_a_change() {
        let lines: Vec<String> = git_iteration(1, 1, ("c1", "w1"), ("c1", "w9")).into();
        let t = trace(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let f = run(&t, &Config::default(), Detector::NoChange);
        assert!(!f.triggered && f.applicable, "{f:?}");
    }

    #[test]
    fn no_change_does_not_apply_without_git_data() {
        let t = attempts(&[None, None]);
        let f = run(&t, &Config::default(), Detector::NoChange);
        assert!(!f.triggered && !f.applicable);
        assert!(f.summary.contains("does not apply"));
    }

    #[test]
    fn oscillating_scores_trigger() {
        let t = evals(&[0.6, 0.7, 0.6, 0.7, 0.6, 0.61], r#","failed":["R"]"#);
        let f = run(&t, &Config::default(), Detector::Oscillation);
        assert!(f.triggered, "{f:?}");
        assert_eq!(f.scores.len(), 6);
    }

    #[test]
    fn zigzag_with_net_progress_is_not_oscillation() {
        let t = evals(&[0.5, 0.7, 0.6, 0.8, 0.7, 0.9], "");
        assert!(!run(&t, &Config::default(), Detector::Oscillation).triggered);
        let short = evals(&[0.6, 0.7, 0.6], "");
        let f = run(&short, &Config::default(), Detector::Oscillation);
        assert!(!f.triggered && !f.applicable);
    }

    #[test]
    fn a_quiet_running_run_is_stalled() {
        let t = evals(&[0.5], "");
        let later = t.last_ts.map(|t| Ts(t.0 + 31 * 60 * 1000));
        let f = assess(&t, &Config::default(), later, Liveness::Alive);
        assert!(f.finding(Detector::Stalled).is_some_and(|f| f.triggered));
        let soon = t.last_ts.map(|t| Ts(t.0 + 60 * 1000));
        let f = assess(&t, &Config::default(), soon, Liveness::Alive);
        assert!(
            f.finding(Detector::Stalled)
                .is_some_and(|f| !f.triggered && f.applicable)
        );
        let f = assess(&t, &Config::default(), None, Liveness::Alive);
        assert!(f.finding(Detector::Stalled).is_some_and(|f| !f.applicable));
    }

    /// Only a live runner can stall: quiet for a day, a run whose runner is gone (or cannot be
    /// known) is not stalled, and the finding says why.
    #[test]
    fn a_quiet_run_without_a_live_runner_is_not_stalled() {
        let t = evals(&[0.5], "");
        let later = t.last_ts.map(|t| Ts(t.0 + 24 * 3_600_000));
        for (runner, why) in [
            (Liveness::Dead, "interrupted"),
            (Liveness::Unknown, "no runner lock"),
        ] {
            let v = assess(&t, &Config::default(), later, runner);
            let f = v.finding(Detector::Stalled).unwrap();
            assert!(!f.triggered && !f.applicable && !v.stagnating, "{f:?}");
            assert!(
                f.summary.contains(why) && f.summary.contains("1d 00h"),
                "{f:?}"
            );
        }
    }

    #[test]
    fn a_stopped_run_is_not_stalled() {
        let t = trace(&[
            &eval(1, 0.5, ""),
            r#"{"ts":"2026-01-01T00:09:00Z","run_id":"r","event":"stopped","payload":{"reason":"user_stop"}}"#,
        ]);
        let f = assess(&t, &Config::default(), Some(Ts(i64::MAX)), Liveness::Alive);
        assert!(f.finding(Detector::Stalled).is_some_and(|f| !f.triggered));
        assert!(!f.stagnating);
    }

    #[test]
    fn config_reads_the_loop_file_object() {
        let c: Config =
            serde_json::from_str(r#"{"limit":3,"reset":"never","stop_on":["score","no_change"]}"#)
                .unwrap_or_default();
        assert_eq!(c.limit, 3);
        assert_eq!(c.reset, Reset::Never);
        assert_eq!(c.stop_on, vec![Detector::Score, Detector::NoChange]);
        assert_eq!(c.min_delta, 0.02);
        assert!(serde_json::from_str::<Config>(r#"{"limt":3}"#).is_err());
        assert_eq!(
            serde_json::to_value(Reset::OnProgress).ok(),
            Some(serde_json::json!("on_progress"))
        );
    }

    /// One line of a random aif-loop or native run: steps, scores, failed rules, errors.
    fn random_line(k: u8, step: u8, it: u8, x: u8, seq: usize) -> String {
        let step = ["PLAN", "EVALUATE", "REFINE"][usize::from(step % 3)];
        let err = ["timeout after 3s", "timeout after 9s", "panic"][usize::from(x % 3)];
        let head = format!(
            r#""ts":"2026-01-01T00:{:02}:{:02}Z","run_id":"r","iteration":{it},"phase":"{}","step":"{step}""#,
            seq / 60 % 60,
            seq % 60,
            if x.is_multiple_of(7) { "B" } else { "A" }
        );
        match k % 8 {
            0 | 1 => format!(
                r#"{{{head},"event":"evaluation_done","payload":{{"score":0.{:02},"failed_rules":{}}}}}"#,
                x % 20,
                if x.is_multiple_of(2) {
                    r#"["R1"]"#
                } else {
                    "[]"
                }
            ),
            2 => format!(r#"{{{head},"event":"phase_error","payload":{{"error":"{err}"}}}}"#),
            3 if x.is_multiple_of(5) => format!(
                r#"{{"v":1,"seq":{seq},"run_id":"r","event":"phase_finished","iteration":{it},"step":"{step}","payload":{{"exit_code":{},"error":"{err}","commit":"c{}"}}}}"#,
                x % 2,
                x % 3
            ),
            4 => format!(r#"{{{head},"event":"failed","payload":{{"reason":"{err}"}}}}"#),
            _ => format!(r#"{{{head},"event":"plan_created"}}"#),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// A lean trace (what `stagnation` folds) gets the verdict of the full trace.
        #[test]
        fn a_lean_trace_gets_the_full_traces_verdict(
            lines in proptest::collection::vec((0u8..8, 0u8..3, 0u8..6, 0u8..30), 1..120),
            repeat in 1u64..4,
        ) {
            let mut log = String::new();
            for (n, &(k, step, it, x)) in lines.iter().enumerate() {
                log += &random_line(k, step, it, x, n);
                log.push('\n');
            }
            let full = traces_from_bytes("t", log.as_bytes());
            let mut lean = crate::fold::trace::Traces::lean("t");
            crate::fold::fold_bytes(&mut lean, log.as_bytes(), crate::decode::lines::DEFAULT_MAX_LINE);
            let lean = lean.into_runs();
            proptest::prop_assert_eq!(full.len(), lean.len());
            let cfg = Config { repeat, ..Config::default() };
            for (id, t) in &full {
                let v = assess(t, &cfg, Some(Ts(0)), Liveness::Alive);
                let w = assess(&lean[id], &cfg, Some(Ts(0)), Liveness::Alive);
                proptest::prop_assert_eq!(&v, &w, "run {}", id);
            }
        }
    }

    #[test]
    fn zero_limits_do_not_panic() {
        let cfg = Config {
            limit: 0,
            repeat: 0,
            no_change: 0,
            oscillation_window: 0,
            oscillation_turns: 0,
            stalled_after_ms: 0,
            min_delta: f64::NAN,
            ..Config::default()
        };
        let t = evals(&[0.1, 0.2], "");
        let _ = assess(&t, &cfg, Some(Ts(i64::MIN)), Liveness::Alive);
        let _ = assess(&Trace::default(), &cfg, Some(Ts(i64::MAX)), Liveness::Alive);
    }
}
