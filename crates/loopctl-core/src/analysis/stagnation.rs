//! Is a loop stuck? Five detectors over a run's `Trace`, each with its evidence.
//!
//! Pure: the caller passes `now` (the CLI reads the clock; replay and tests do not).
//! `docs/postmortem.md` documents the detectors, their defaults and the reset choice.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::liveness::Liveness;
use crate::analysis::measures::{duration, score};
use crate::decode::timestamp::Ts;
use std::sync::Arc;

use crate::fold::trace::{Attempt, Evaluation, Name, Trace};

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
            if let Some(q) = e.at.seq {
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

/// The detectors `assess` would find triggered, in `Detector::ALL` order, without writing
/// their summaries and evidence: what a caller that only counts verdicts needs (the metric
/// fold asks after every evaluation of every run).
pub fn triggered(trace: &Trace, cfg: &Config, now: Option<Ts>, runner: Liveness) -> Vec<Detector> {
    let mut out = Vec::new();
    if score_streak(trace, cfg).len() as u64 >= cfg.limit.max(1) {
        out.push(Detector::Score);
    }
    let (rules, _, worst) = failure_streaks(trace, cfg);
    if rules.len() >= cfg.repeat.max(1) as usize || worst.is_some() {
        out.push(Detector::RepeatedFailure);
    }
    if no_change_streak(trace)
        .is_some_and(|(_, streak)| streak.len() >= cfg.no_change.max(1) as usize)
    {
        out.push(Detector::NoChange);
    }
    if oscillation_window(trace, cfg).is_ok_and(|o| o.triggered) {
        out.push(Detector::Oscillation);
    }
    if stalled(trace, cfg, now, runner).triggered {
        out.push(Detector::Stalled);
    }
    out
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
        let new_phase = prev_phase.is_some_and(|p| p != &*e.quality_phase);
        if progress {
            if cfg.reset == Reset::OnProgress {
                counted.clear();
            }
        } else if !e.has_blockers() && !new_phase {
            counted.push(e);
        }
        prev_phase = Some(&e.quality_phase);
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
        let last = trace.scored().last();
        let s = last.and_then(|e| e.score).unwrap_or(0.0);
        // A passing run's last score need not move (1.0 after 1.0): that is no stall.
        let flat = last
            .is_some_and(|e| e.passed != Some(true) && s - e.previous_score < cfg.min_delta - EPS);
        if flat {
            // Not counted: with fail blockers (repeated_failure judges those), or the baseline
            // of a new quality phase. "Progressing" would say the opposite of the scores.
            format!(
                "score not progressing (last {}) but not counted: the evaluations without progress had failing rules or opened a quality phase ({n} scored evaluation(s))",
                score(s)
            )
        } else {
            format!(
                "score progressing ({n} scored evaluation(s), last {})",
                score(s)
            )
        }
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

/// An evaluation's failed rule ids, sorted, once each.
fn rule_set(e: &Evaluation) -> Vec<&str> {
    let mut ids: Vec<&str> = e.failed.iter().flatten().map(String::as_str).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The trailing run of evaluations that fail the same non-empty set of rules, and that set.
/// Read from the end: only the run and the evaluation before it are looked at (the detector
/// is asked after every evaluation).
pub(crate) fn failed_rules_streak(evs: &[Evaluation]) -> (Vec<&Evaluation>, Vec<String>) {
    let Some(last) = evs.last() else {
        return (Vec::new(), Vec::new());
    };
    let set = rule_set(last);
    if set.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let same = evs.iter().rev().take_while(|e| rule_set(e) == set).count();
    let streak = evs[evs.len() - same..].iter().collect();
    (streak, set.into_iter().map(str::to_string).collect())
}

/// The trailing run of evaluations failing the same rules (and that set), and the longest
/// trailing run of one phase's failed attempts with the same error (at least `repeat`), with
/// its normalised error.
type FailureStreaks<'t> = (
    Vec<&'t Evaluation>,
    Vec<String>,
    Option<(Vec<&'t Attempt>, String)>,
);

fn failure_streaks<'t>(trace: &'t Trace, cfg: &Config) -> FailureStreaks<'t> {
    let repeat = cfg.repeat.max(1) as usize;
    let (streak, set) = failed_rules_streak(&trace.evaluations);
    // Errors: per phase, the trailing run of failed attempts with the same normalised error.
    // One pass over the attempts (a long run has hundreds of thousands), phases in order of
    // first appearance: (name, run, key).
    // A run's attempts share one `Name` per phase: compared by pointer first.
    let mut per: Vec<(&Name, Vec<&Attempt>, String)> = Vec::new();
    for a in trace.phases() {
        let same = |n: &Name| Arc::ptr_eq(n, &a.name) || **n == *a.name;
        let i = match per.iter().position(|(n, ..)| same(n)) {
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
    (streak, set, worst)
}

fn repeated_failure(trace: &Trace, cfg: &Config) -> Finding {
    let repeat = cfg.repeat.max(1) as usize;
    let (streak, set, worst) = failure_streaks(trace, cfg);
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

/// Iterations compared, and the trailing run of iterations that left the commit and work tree
/// as they found them, each with its seqs.
type NoChange = (usize, Vec<(u64, Vec<u64>)>);

/// `None` when the log has no git fingerprints.
fn no_change_streak(trace: &Trace) -> Option<NoChange> {
    let git = |a: &Attempt| {
        let x = a.explicit();
        x.commit_start.is_some()
            || x.commit_end.is_some()
            || x.worktree_start.is_some()
            || x.worktree_end.is_some()
    };
    if !trace.phases().iter().any(git) {
        return None;
    }
    // Loop iterations in order of first appearance, each with its attempts (pre and post phases
    // are not iterations); grouped in one pass, as a run can have tens of thousands.
    let mut order: Vec<(u64, Vec<&Attempt>)> = Vec::new();
    let mut index: FxHashMap<u64, usize> = FxHashMap::default();
    for a in trace.phases() {
        if matches!(a.kind(), Some("pre" | "post")) {
            continue;
        }
        if let Some(i) = a.iteration {
            let at = *index.entry(i).or_insert_with(|| {
                order.push((i, Vec::new()));
                order.len() - 1
            });
            order[at].1.push(a);
        }
    }
    let mut streak: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut compared = 0;
    for (it, of) in order {
        // An iteration still under way is not judged yet.
        if of.iter().any(|a| !a.finished) {
            continue;
        }
        let (Some(first), Some(last)) = (of.first(), of.last()) else {
            continue;
        };
        let (first_x, last_x) = (first.explicit(), last.explicit());
        let pairs = [
            (&first_x.commit_start, &last_x.commit_end),
            (&first_x.worktree_start, &last_x.worktree_end),
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
    Some((compared, streak))
}

fn no_change(trace: &Trace, cfg: &Config) -> Finding {
    let Some((compared, streak)) = no_change_streak(trace) else {
        return Finding::not_applicable(
            Detector::NoChange,
            "does not apply: the log has no git commit or work tree fingerprints on phase events"
                .into(),
        );
    };
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

/// The oscillation detector's reading of the last scores.
struct Oscillation<'t> {
    window: Vec<&'t Evaluation>,
    turns: usize,
    net: f64,
    flat: bool,
    triggered: bool,
}

/// `Err(n)`: the window holds `n` scores, fewer than the 4 the detector needs.
fn oscillation_window<'t>(trace: &'t Trace, cfg: &Config) -> Result<Oscillation<'t>, usize> {
    let mut window: Vec<&Evaluation> = trace.scored().collect();
    let w = cfg.oscillation_window.min(window.len());
    window.drain(..window.len() - w);
    if window.len() < 4 {
        return Err(window.len());
    }
    let scores: Vec<f64> = window.iter().map(|e| e.score.unwrap_or(0.0)).collect();
    let (turns, net, flat, triggered) = swings(&scores, cfg);
    Ok(Oscillation {
        window,
        turns,
        net,
        flat,
        triggered,
    })
}

/// Over at least 4 scores, oldest first: the direction changes, the net change, whether that
/// is under `min_delta`, and whether the scores oscillate.
fn swings(scores: &[f64], cfg: &Config) -> (usize, f64, bool, bool) {
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
    (turns, net, flat, triggered)
}

fn oscillation(trace: &Trace, cfg: &Config) -> Finding {
    let Oscillation {
        window,
        turns,
        net,
        flat,
        triggered,
    } = match oscillation_window(trace, cfg) {
        Ok(o) => o,
        Err(n) => {
            return Finding::not_applicable(
                Detector::Oscillation,
                format!("needs at least 4 scores in the window, has {n}"),
            );
        }
    };
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

/// `Watch`, for a caller that asks after every evaluation of a growing trace.
pub mod watch;

#[cfg(test)]
mod tests;
