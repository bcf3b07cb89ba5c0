//! Evaluation by rules (aif-loop's rule schema): rules with a severity, a weight and
//! a quality level; a score over the active rules; the A → B switch; the stop conditions and
//! the proceed / retry / escalate decision with synthesized feedback (iteration control).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Default thresholds of the two quality phases.
pub const THRESHOLD_A: f64 = 0.8;
pub const THRESHOLD_B: f64 = 0.9;
/// Largest rule weight: sums of weights stay finite.
pub const MAX_WEIGHT: f64 = 1e9;
/// Scores are decimals written as binary floats: compare with this tolerance.
pub const EPS: f64 = 1e-9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Fail,
    Warn,
    Info,
}

impl Severity {
    /// The weight a rule gets when it declares none.
    pub fn default_weight(self) -> f64 {
        match self {
            Severity::Fail => 2.0,
            Severity::Warn => 1.0,
            Severity::Info => 0.0,
        }
    }
}

/// A quality phase. B's active rules are A's and B's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    A,
    B,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::A => "A",
            Level::B => "B",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        match s.trim() {
            "A" | "a" => Some(Level::A),
            "B" | "b" => Some(Level::B),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    #[serde(default)]
    pub description: String,
    pub severity: Severity,
    pub weight: f64,
    pub phase: Level,
    /// A command whose exit status is the verdict (0 passes), run with `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criteria {
    pub rules: Vec<Rule>,
    pub threshold_a: f64,
    pub threshold_b: f64,
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria {
            rules: Vec::new(),
            threshold_a: THRESHOLD_A,
            threshold_b: THRESHOLD_B,
        }
    }
}

impl Criteria {
    pub fn threshold(&self, level: Level) -> f64 {
        match level {
            Level::A => self.threshold_a,
            Level::B => self.threshold_b,
        }
    }

    pub fn active(&self, level: Level) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(move |r| r.phase <= level)
    }

    /// `run.json.criteria` in aif-loop's shape.
    pub fn to_value(&self) -> Value {
        json!({
            "name": "loopctl",
            "version": 1,
            "phase": {
                "A": {"threshold": self.threshold_a, "active_levels": ["A"]},
                "B": {"threshold": self.threshold_b, "active_levels": ["A", "B"]},
            },
            "rules": self.rules,
        })
    }

    /// Parses a loop file's `criteria`: `{rules: [...], thresholds: {A, B}}`, or a bare array
    /// of rules. Every problem is returned with its place.
    pub fn parse(v: &Value) -> Result<Criteria, Vec<(String, String)>> {
        let mut errors = Vec::new();
        let mut c = Criteria::default();
        let rules = match v {
            Value::Array(a) => a.as_slice(),
            Value::Object(o) => {
                for k in o
                    .keys()
                    .filter(|k| !["rules", "thresholds"].contains(&k.as_str()))
                {
                    errors.push((format!("criteria.{k}"), "unknown key".into()));
                }
                if let Some(t) = o.get("thresholds") {
                    for (level, slot) in [("A", &mut c.threshold_a), ("B", &mut c.threshold_b)] {
                        match t.get(level).map(Value::as_f64) {
                            None => {}
                            Some(Some(x)) if (0.0..=1.0).contains(&x) => *slot = x,
                            Some(_) => errors.push((
                                format!("criteria.thresholds.{level}"),
                                "must be a number from 0 to 1".into(),
                            )),
                        }
                    }
                }
                match o.get("rules") {
                    Some(Value::Array(a)) => a.as_slice(),
                    None => &[],
                    Some(_) => {
                        errors.push(("criteria.rules".into(), "must be an array".into()));
                        &[]
                    }
                }
            }
            _ => {
                return Err(vec![(
                    "criteria".into(),
                    "must be an object {rules, thresholds} or an array of rules".into(),
                )]);
            }
        };
        for (i, r) in rules.iter().enumerate() {
            match rule(r) {
                Ok(rule) => {
                    if c.rules.iter().any(|x| x.id == rule.id) {
                        errors.push((
                            format!("criteria.rules[{i}] ({:?})", rule.id),
                            "rule ids must be unique".into(),
                        ));
                    }
                    c.rules.push(rule);
                }
                Err(m) => errors.push((format!("criteria.rules[{i}]"), m)),
            }
        }
        if errors.is_empty() {
            Ok(c)
        } else {
            Err(errors)
        }
    }
}

fn rule(v: &Value) -> Result<Rule, String> {
    let o = v.as_object().ok_or("a rule must be an object")?;
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let id = text("id")
        .filter(|s| !s.trim().is_empty())
        .ok_or("a rule needs a non-empty string id")?;
    let severity = match text("severity").as_deref() {
        Some("fail") | None => Severity::Fail,
        Some("warn") => Severity::Warn,
        Some("info") => Severity::Info,
        Some(s) => return Err(format!("{id}: severity {s:?} is not fail, warn or info")),
    };
    let weight = match o.get("weight") {
        None | Some(Value::Null) => severity.default_weight(),
        Some(w) => w
            .as_f64()
            .filter(|w| (0.0..=MAX_WEIGHT).contains(w))
            .ok_or(format!("{id}: weight must be a number from 0 to 1e9"))?,
    };
    let phase = match text("phase") {
        None => Level::A,
        Some(p) => Level::parse(&p).ok_or(format!("{id}: phase {p:?} is not A or B"))?,
    };
    let check = match o.get("check") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(format!("{id}: check must be a command string")),
    };
    for k in o.keys() {
        if !["id", "description", "severity", "weight", "phase", "check"].contains(&k.as_str()) {
            return Err(format!("{id}: unknown key {k:?}"));
        }
    }
    Ok(Rule {
        description: text("description").unwrap_or_default(),
        id,
        severity,
        weight,
        phase,
        check,
    })
}

/// One rule's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleResult {
    pub id: String,
    pub severity: Severity,
    pub weight: f64,
    pub phase: Level,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where an evaluation's verdicts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// loopctl ran the rules' check commands (possibly with reported verdicts for the rest).
    Checks,
    /// A `<|score: x|>` marker.
    Marker,
    /// A JSON evaluation object printed by the phase.
    Report,
}

/// What a phase reported about its own work.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfReport {
    pub score: Option<f64>,
    pub failed: Vec<String>,
    pub warnings: Vec<String>,
    pub verdicts: BTreeMap<String, Verdict>,
    /// From a JSON object (else from a score marker).
    pub json: bool,
}

impl SelfReport {
    pub fn from_score(score: f64) -> SelfReport {
        SelfReport {
            score: Some(score),
            ..SelfReport::default()
        }
    }

    /// Reads aif-loop's evaluation shape: `score`, `passed`, `failed`, `warnings`,
    /// `rule_results` as a list of `{id, passed|status, message}` or a map id → bool or object.
    pub fn from_json(v: &Value) -> Option<SelfReport> {
        let o = v.as_object()?;
        if !o.contains_key("score") && !o.contains_key("rule_results") {
            return None;
        }
        let ids = |k: &str| -> Vec<String> {
            o.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().or_else(|| x.get("id")?.as_str()))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let verdict_of = |x: &Value| -> Option<Verdict> {
            let passed = match x {
                Value::Bool(b) => *b,
                Value::Object(r) => {
                    match (r.get("passed"), r.get("status").and_then(Value::as_str)) {
                        (Some(Value::Bool(b)), _) => *b,
                        (_, Some(s)) => matches!(s, "pass" | "passed" | "ok"),
                        _ => return None,
                    }
                }
                _ => return None,
            };
            let message = x
                .get("message")
                .or_else(|| x.get("reason"))
                .and_then(Value::as_str)
                .map(str::to_string);
            Some(Verdict { passed, message })
        };
        let mut verdicts = BTreeMap::new();
        match o.get("rule_results") {
            Some(Value::Array(a)) => {
                for r in a {
                    if let (Some(id), Some(v)) =
                        (r.get("id").and_then(Value::as_str), verdict_of(r))
                    {
                        verdicts.insert(id.to_string(), v);
                    }
                }
            }
            Some(Value::Object(m)) => {
                for (id, r) in m {
                    if let Some(v) = verdict_of(r) {
                        verdicts.insert(id.clone(), v);
                    }
                }
            }
            _ => {}
        }
        Some(SelfReport {
            score: o
                .get("score")
                .and_then(Value::as_f64)
                .filter(|s| (0.0..=1.0).contains(s)),
            failed: ids("failed"),
            warnings: ids("warnings"),
            verdicts,
            json: true,
        })
    }
}

/// One evaluation: what an `evaluation_done` event records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    #[serde(skip)]
    pub level: Option<Level>,
    pub score: f64,
    pub passed: bool,
    pub threshold: f64,
    /// Failed fail-severity rule ids: the blockers.
    pub failed: Vec<String>,
    /// Failed warn-severity rule ids.
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule_results: Vec<RuleResult>,
    pub active_rule_count: u64,
    pub passed_rule_count: u64,
    pub source: Source,
}

impl Evaluation {
    /// Rules were judged one by one (else only a score is known).
    pub fn has_rules(&self) -> bool {
        !self.rule_results.is_empty()
    }
}

/// Score = weight of passed active rules / weight of active rules (1.0 when that weight is 0);
/// passed = score ≥ the level's threshold and no fail-severity rule failed.
///
/// Verdicts come from `checks` first, then from the phase's report. A rule judged by neither
/// fails with "no verdict": an evaluator must be strict. Failing ids the report names that
/// are not rules of the loop block too. Only a loop without rules is judged on a bare score
/// (a marker or a JSON `score`), and only when the phase reported one.
pub fn evaluate(
    criteria: &Criteria,
    level: Level,
    checks: &BTreeMap<String, Verdict>,
    report: Option<&SelfReport>,
) -> Option<Evaluation> {
    let threshold = criteria.threshold(level);
    let active: Vec<&Rule> = criteria.active(level).collect();
    let verdict = |id: &str| {
        checks
            .get(id)
            .or_else(|| report.and_then(|r| r.verdicts.get(id)))
    };
    if criteria.rules.is_empty() {
        let r = report?;
        let score = r.score?;
        let severity_of = |id: &String| {
            criteria
                .rules
                .iter()
                .find(|x| &x.id == id)
                .map(|x| x.severity)
        };
        // Reported ids of known warn/info rules are not blockers; unknown ids are.
        let failed: Vec<String> = r
            .failed
            .iter()
            .filter(|id| severity_of(id).is_none_or(|s| s == Severity::Fail))
            .cloned()
            .collect();
        let mut warnings = r.warnings.clone();
        warnings.extend(
            r.failed
                .iter()
                .filter(|id| severity_of(id) == Some(Severity::Warn))
                .cloned(),
        );
        return Some(Evaluation {
            level: Some(level),
            score,
            passed: score >= threshold - EPS && failed.is_empty(),
            threshold,
            failed,
            warnings,
            rule_results: Vec::new(),
            active_rule_count: 0,
            passed_rule_count: 0,
            source: if r.json {
                Source::Report
            } else {
                Source::Marker
            },
        });
    }
    let mut rule_results: Vec<RuleResult> = active
        .iter()
        .map(|r| {
            let v = verdict(&r.id).cloned().unwrap_or(Verdict {
                passed: false,
                message: Some("no verdict: no check command and not reported by the phase".into()),
            });
            RuleResult {
                id: r.id.clone(),
                severity: r.severity,
                weight: r.weight,
                phase: r.phase,
                passed: v.passed,
                message: v.message,
            }
        })
        .collect();
    // Failures the phase reported for ids that are not rules of this loop.
    if let Some(r) = report {
        let mut extra: Vec<(String, Option<String>)> = r
            .failed
            .iter()
            .map(|id| (id.clone(), None))
            .chain(
                r.verdicts
                    .iter()
                    .filter(|(_, v)| !v.passed)
                    .map(|(id, v)| (id.clone(), v.message.clone())),
            )
            .filter(|(id, _)| !criteria.rules.iter().any(|x| &x.id == id))
            .collect();
        extra.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.is_some().cmp(&a.1.is_some())));
        extra.dedup_by(|a, b| a.0 == b.0);
        for (id, message) in extra {
            rule_results.push(RuleResult {
                id,
                severity: Severity::Fail,
                weight: 0.0,
                phase: level,
                passed: false,
                message: message.or(Some("reported failing; not a rule of this loop".into())),
            });
        }
    }
    let total: f64 = rule_results.iter().map(|r| r.weight).sum();
    let got: f64 = rule_results
        .iter()
        .filter(|r| r.passed)
        .map(|r| r.weight)
        .sum();
    let score = if total <= 0.0 { 1.0 } else { got / total };
    let failed_of = |s: Severity| -> Vec<String> {
        rule_results
            .iter()
            .filter(|r| !r.passed && r.severity == s)
            .map(|r| r.id.clone())
            .collect()
    };
    let failed = failed_of(Severity::Fail);
    Some(Evaluation {
        level: Some(level),
        // Rounded so that the same verdicts always print the same score (and never -0).
        score: (score * 1e6).round() / 1e6 + 0.0,
        passed: score >= threshold - EPS && failed.is_empty(),
        threshold,
        warnings: failed_of(Severity::Warn),
        failed,
        active_rule_count: rule_results.len() as u64,
        passed_rule_count: rule_results.iter().filter(|r| r.passed).count() as u64,
        rule_results,
        source: if checks.is_empty() {
            Source::Report
        } else {
            Source::Checks
        },
    })
}

/// The id of the rule an observed phase's non-zero exit adds to its evaluation.
pub const EXIT_STATUS: &str = "exit-status";

/// An observed phase whose own exit status failed cannot pass, whatever the rules said: the
/// failure is added as a fail-severity rule of weight 0 (the score is unchanged).
pub fn fail_exit_status(e: &mut Evaluation, error: Option<String>) {
    e.passed = false;
    e.failed.push(EXIT_STATUS.into());
    e.rule_results.push(RuleResult {
        id: EXIT_STATUS.into(),
        severity: Severity::Fail,
        weight: 0.0,
        phase: e.level.unwrap_or(Level::A),
        passed: false,
        message: error.or(Some("the phase exited non-zero".into())),
    });
    e.active_rule_count += 1;
}

/// aif-loop's stop reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    ThresholdReached,
    NoMajorIssues,
    IterationLimit,
    UserStop,
    Stagnation,
    BudgetExceeded,
    PhaseError,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::ThresholdReached => "threshold_reached",
            StopReason::NoMajorIssues => "no_major_issues",
            StopReason::IterationLimit => "iteration_limit",
            StopReason::UserStop => "user_stop",
            StopReason::Stagnation => "stagnation",
            StopReason::BudgetExceeded => "budget_exceeded",
            StopReason::PhaseError => "phase_error",
        }
    }

    /// The run status aif-loop gives each reason.
    pub fn status(self) -> crate::fold::run_state::Status {
        use crate::fold::run_state::Status;
        match self {
            StopReason::ThresholdReached | StopReason::NoMajorIssues => Status::Completed,
            StopReason::PhaseError => Status::Failed,
            _ => Status::Stopped,
        }
    }
}

/// What happens after an evaluation, before any transition rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEvaluation {
    /// Phase A passed: switch to B and evaluate the same artifact again.
    SwitchToB,
    Stop(StopReason),
    Continue,
}

/// What else is true when an evaluation is judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Circumstances {
    /// The evaluation came in the last allowed iteration.
    pub at_limit: bool,
    pub user_stop: bool,
    /// A stagnation detector the loop stops on has triggered.
    pub stagnating: bool,
    pub over_budget: bool,
}

/// aif-loop's stop conditions in its order: threshold_reached, no_major_issues,
/// iteration_limit, user_stop, stagnation (then budget_exceeded). A phase-A pass is a switch,
/// not a stop. `no_major_issues` needs rule verdicts: a bare score knows of no issues at all.
pub fn after_evaluation(e: &Evaluation, c: Circumstances) -> AfterEvaluation {
    let level = e.level.unwrap_or(Level::B);
    if e.passed {
        return match level {
            Level::A => AfterEvaluation::SwitchToB,
            Level::B => AfterEvaluation::Stop(StopReason::ThresholdReached),
        };
    }
    let reason = if e.has_rules() && e.failed.is_empty() {
        Some(StopReason::NoMajorIssues)
    } else if c.at_limit {
        Some(StopReason::IterationLimit)
    } else if c.user_stop {
        Some(StopReason::UserStop)
    } else if c.stagnating {
        Some(StopReason::Stagnation)
    } else if c.over_budget {
        Some(StopReason::BudgetExceeded)
    } else {
        None
    };
    reason.map_or(AfterEvaluation::Continue, AfterEvaluation::Stop)
}

/// Iteration control's decision after each evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum Decision {
    Proceed,
    Retry { feedback: String },
    Escalate { feedback: String },
}

/// Default cap on synthesized feedback (iteration control's `feedback_max_length`).
pub const FEEDBACK_MAX: usize = 500;

pub fn decide(e: &Evaluation, iteration: u64, max_iterations: u64, max_len: usize) -> Decision {
    if e.passed {
        return Decision::Proceed;
    }
    let feedback = feedback(e, max_len);
    if iteration >= max_iterations {
        Decision::Escalate { feedback }
    } else {
        Decision::Retry { feedback }
    }
}

/// Failed rules, most severe first (then heaviest, then as declared), one per line as
/// `[severity] id: message`, capped at `max_len` characters.
pub fn feedback(e: &Evaluation, max_len: usize) -> String {
    let mut failed: Vec<&RuleResult> = e.rule_results.iter().filter(|r| !r.passed).collect();
    failed.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(b.weight.total_cmp(&a.weight))
    });
    let lines: Vec<String> = if failed.is_empty() {
        let mut v: Vec<String> = e.failed.iter().map(|id| format!("[fail] {id}")).collect();
        v.extend(e.warnings.iter().map(|id| format!("[warn] {id}")));
        if v.is_empty() {
            v.push(format!(
                "score {:.2} is below the threshold {:.2}",
                e.score, e.threshold
            ));
        }
        v
    } else {
        failed
            .iter()
            .map(|r| {
                let sev = match r.severity {
                    Severity::Fail => "fail",
                    Severity::Warn => "warn",
                    Severity::Info => "info",
                };
                match r
                    .message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                {
                    Some(m) => format!("[{sev}] {}: {}", r.id, m.replace('\n', " ")),
                    None => format!("[{sev}] {}", r.id),
                }
            })
            .collect()
    };
    cap(&lines.join("\n"), max_len)
}

/// Cuts `s` to `max` characters, marking the cut with `…`.
pub fn cap(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
