//! Where a loop goes after a phase: `when` transition rules and task-chain branch routing on a
//! phase's result string. Pure: the runner and after-the-fact commands share it.

use serde::{Deserialize, Serialize};

/// The condition of a `when` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Blocked,
    AfterTries(u64),
    PassesGoalMet,
    Passes,
    Fails,
}

impl Condition {
    /// The engine's fixed precedence: blocked > attempts > pass > fail, whatever the order
    /// the lines were written in. "goal met" is the narrower pass, so it is asked first.
    fn rank(self) -> u8 {
        match self {
            Condition::Blocked => 0,
            Condition::AfterTries(_) => 1,
            Condition::PassesGoalMet => 2,
            Condition::Passes => 3,
            Condition::Fails => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Condition::Blocked => "blocked",
            Condition::AfterTries(_) => "attempts",
            Condition::PassesGoalMet => "goal_met",
            Condition::Passes => "passes",
            Condition::Fails => "fails",
        }
    }

    fn holds(self, o: &Observed) -> bool {
        match self {
            Condition::Blocked => o.blocked,
            Condition::AfterTries(n) => o.tries >= n,
            Condition::PassesGoalMet => !o.blocked && o.passed && o.goal_met,
            Condition::Passes => !o.blocked && o.passed,
            Condition::Fails => !o.blocked && !o.passed,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Stop,
    StopAndWarn,
    AskHuman,
    /// Run this loop phase next (`reflect`, `plan`, `act`, `observe`, or any phase name).
    Goto(String),
}

impl Action {
    pub fn ends(&self) -> bool {
        !matches!(self, Action::Goto(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhenRule {
    /// The line as written, for reports.
    pub text: String,
    pub condition: Condition,
    pub actions: Vec<Action>,
}

/// What an observed phase came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed {
    /// The phase asked to stop (`<|workflow: abort|>`).
    pub blocked: bool,
    pub passed: bool,
    /// Passed the final bar: quality phase B, or a pass where there are no quality phases.
    pub goal_met: bool,
    /// Observations so far, this one included.
    pub tries: u64,
}

/// Parses one `when` line: `[when] <condition>: <action>[, then <action>...]`.
pub fn parse_when(line: &str) -> Result<WhenRule, String> {
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let (cond, acts) = line
        .split_once(':')
        .ok_or("expected `<condition>: <action>`")?;
    let cond = norm(cond);
    let cond = cond.strip_prefix("when ").unwrap_or(&cond);
    let condition = match cond {
        "it passes and the goal is met" | "the goal is met" => Condition::PassesGoalMet,
        "it passes" | "passes" => Condition::Passes,
        "it fails" | "fails" => Condition::Fails,
        "blocked" | "it is blocked" => Condition::Blocked,
        c => {
            let n = c
                .strip_prefix("after ")
                .and_then(|r| r.strip_suffix(" tries").or(r.strip_suffix(" attempts")))
                .or_else(|| {
                    c.strip_prefix("after ")
                        .and_then(|r| r.strip_suffix(" try"))
                })
                .and_then(|n| n.trim().parse::<u64>().ok())
                .filter(|n| *n >= 1);
            match n {
                Some(n) => Condition::AfterTries(n),
                None => {
                    return Err(format!(
                        "unknown condition {c:?} (use: it passes, it passes and the goal is met, \
                         it fails, blocked, after N tries)"
                    ));
                }
            }
        }
    };
    let mut actions = Vec::new();
    for piece in acts.split(',') {
        let p = norm(piece);
        let p = p.strip_prefix("then ").unwrap_or(&p).trim();
        if p.is_empty() {
            continue;
        }
        let action = if p == "stop and warn" || p.starts_with("stop and warn ") {
            Action::StopAndWarn
        } else if p == "stop" || p.starts_with("stop ") {
            Action::Stop
        } else if p == "ask a human" || p.starts_with("ask a human ") || p == "ask human" {
            Action::AskHuman
        } else {
            // `reflect on which layer broke`, `plan again`: the first word names the phase.
            let word = p.split(' ').next().unwrap_or(p);
            Action::Goto(word.to_string())
        };
        if actions.last().is_some_and(Action::ends) {
            return Err(format!("nothing can follow {:?}: it ends the run", p));
        }
        actions.push(action);
    }
    if actions.is_empty() {
        return Err("no action after the colon".into());
    }
    Ok(WhenRule {
        text: line.trim().to_string(),
        condition,
        actions,
    })
}

/// The rule that applies: the first by fixed precedence; among `after N tries` lines that
/// hold, the highest N (the later stage); then the first written.
pub fn pick<'a>(rules: &'a [WhenRule], o: &Observed) -> Option<&'a WhenRule> {
    let tries = |c: Condition| match c {
        Condition::AfterTries(n) => std::cmp::Reverse(n),
        _ => std::cmp::Reverse(0),
    };
    rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.condition.holds(o))
        .min_by_key(|(i, r)| (r.condition.rank(), tries(r.condition), *i))
        .map(|(_, r)| r)
}

/// Problems with a loop's `when` lines: unknown phases, and a back-edge with no ceiling.
/// `phases` are the loop's phase names in order, `observer` the index of the observed phase.
pub fn validate(
    rules: &[WhenRule],
    phases: &[&str],
    observer: usize,
    max_iterations_declared: bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut back_edge = None;
    for r in rules {
        for a in &r.actions {
            let Action::Goto(name) = a else { continue };
            match phases.iter().position(|p| p == name) {
                None => errors.push(format!(
                    "{:?}: action {name:?} needs a loop phase named {name:?}",
                    r.text
                )),
                Some(i) => {
                    if i <= observer || matches!(name.as_str(), "reflect" | "plan") {
                        back_edge.get_or_insert(r.text.clone());
                    }
                }
            }
        }
    }
    // Only an `after N tries` line that ends the run is a ceiling.
    let ceiling = rules.iter().any(|r| {
        matches!(r.condition, Condition::AfterTries(_))
            && r.actions.last().is_some_and(Action::ends)
    });
    if let Some(text) = back_edge
        && !ceiling
        && !max_iterations_declared
    {
        errors.push(format!(
            "{text:?} is a back-edge with no ceiling: reflect-and-plan-again with no \
             `after N tries` is an infinite, token-burning loop; add a line such as \
             \"after 5 tries: stop and warn\" or set max_iterations"
        ));
    }
    errors
}

/// A task-chain branch operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    Equals,
    Contains,
    StartsWith,
    EndsWith,
    #[serde(rename = ">")]
    Greater,
    #[serde(rename = "<")]
    Less,
    InRange,
    Default,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    pub operator: Operator,
    #[serde(default)]
    pub when: String,
    pub goto: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Transition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    #[serde(default)]
    pub branches: Vec<Branch>,
}

/// Where a branch sends the loop.
pub const END: &str = "end";

fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|x| x.is_finite())
}

impl Branch {
    /// Whether this branch takes `result`. String operators compare exactly (case-sensitive);
    /// numeric ones read both sides as decimal numbers after trimming, and a side that is not
    /// a number does not match. `in_range` is `"min,max"`, both ends included.
    pub fn matches(&self, result: &str) -> bool {
        let w = self.when.as_str();
        match self.operator {
            Operator::Equals => result == w,
            Operator::Contains => result.contains(w),
            Operator::StartsWith => result.starts_with(w),
            Operator::EndsWith => result.ends_with(w),
            Operator::Greater => matches!((number(result), number(w)), (Some(r), Some(x)) if r > x),
            Operator::Less => matches!((number(result), number(w)), (Some(r), Some(x)) if r < x),
            Operator::InRange => {
                let Some((lo, hi)) = w.split_once(',') else {
                    return false;
                };
                match (number(result), number(lo), number(hi)) {
                    (Some(r), Some(lo), Some(hi)) => lo <= r && r <= hi,
                    _ => false,
                }
            }
            Operator::Default => true,
        }
    }
}

/// What a phase's `transition` decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// `on_failure`, taken before any branch when the phase failed.
    OnFailure(&'a str),
    /// The first branch that matched: its index and target (`end` ends the run).
    Branch(usize, &'a str),
    /// The phase failed with no `on_failure`: the run ends as a failure.
    Fail,
    /// Nothing matched: the loop goes on in order.
    None,
}

pub fn route<'a>(t: &'a Transition, failed: bool, result: &str) -> Route<'a> {
    if failed {
        return match &t.on_failure {
            Some(to) => Route::OnFailure(to),
            None => Route::Fail,
        };
    }
    t.branches
        .iter()
        .enumerate()
        .find(|(_, b)| b.matches(result))
        .map_or(Route::None, |(i, b)| Route::Branch(i, &b.goto))
}

impl Transition {
    /// Targets that are neither a loop phase nor `end`, and malformed `in_range` bounds.
    pub fn validate(&self, phases: &[&str]) -> Vec<String> {
        let mut errors = Vec::new();
        let known = |t: &str| t == END || phases.contains(&t);
        if let Some(t) = self.on_failure.as_deref().filter(|t| !known(t)) {
            errors.push(format!("on_failure {t:?} is not a loop phase or \"end\""));
        }
        for (i, b) in self.branches.iter().enumerate() {
            if !known(&b.goto) {
                errors.push(format!(
                    "branches[{i}].goto {:?} is not a loop phase or \"end\"",
                    b.goto
                ));
            }
            let numeric = |s: &str| number(s).is_some();
            let bad = match b.operator {
                Operator::Greater | Operator::Less => !numeric(&b.when),
                Operator::InRange => !b
                    .when
                    .split_once(',')
                    .is_some_and(|(lo, hi)| numeric(lo) && numeric(hi)),
                _ => false,
            };
            if bad {
                errors.push(format!(
                    "branches[{i}].when {:?} is not a number{} for {:?}",
                    b.when,
                    if b.operator == Operator::InRange {
                        " pair \"min,max\""
                    } else {
                        ""
                    },
                    b.operator
                ));
            }
        }
        errors
    }
}

/// A phase's result string: an explicit `<|result: ...|>` marker, else its last non-empty
/// output line (both trimmed).
pub fn result_string<'a>(marker: Option<&'a str>, last_line: Option<&'a str>) -> &'a str {
    marker.or(last_line).map(str::trim).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(lines: &[&str]) -> Vec<WhenRule> {
        lines
            .iter()
            .map(|l| parse_when(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }

    fn obs(blocked: bool, passed: bool, goal_met: bool, tries: u64) -> Observed {
        Observed {
            blocked,
            passed,
            goal_met,
            tries,
        }
    }

    #[test]
    fn the_documented_when_lines_parse() {
        let r = rules(&[
            "when it passes and the goal is met: stop",
            "when it fails: reflect on which layer broke, then plan again",
            "when blocked: ask a human",
            "after 5 tries: stop and warn",
            "When  It Passes : act",
        ]);
        assert_eq!(r[0].condition, Condition::PassesGoalMet);
        assert_eq!(r[0].actions, [Action::Stop]);
        assert_eq!(
            r[1].actions,
            [Action::Goto("reflect".into()), Action::Goto("plan".into())]
        );
        assert_eq!(r[2].actions, [Action::AskHuman]);
        assert_eq!(r[3].condition, Condition::AfterTries(5));
        assert_eq!(r[3].actions, [Action::StopAndWarn]);
        assert_eq!(r[4].condition, Condition::Passes);
        assert!(parse_when("it explodes: stop").is_err());
        assert!(parse_when("it fails").is_err());
        assert!(parse_when("it fails: stop, then plan").is_err());
        assert!(parse_when("after 0 tries: stop").is_err());
    }

    /// Each precedence pair, written in both orders, picks the same rule.
    #[test]
    fn precedence_is_fixed_whatever_the_order_written() {
        let pairs = [
            (
                "blocked: ask a human",
                "after 2 tries: stop and warn",
                obs(true, false, false, 5),
            ),
            (
                "blocked: ask a human",
                "it passes: stop",
                obs(true, true, true, 1),
            ),
            (
                "blocked: ask a human",
                "it fails: plan",
                obs(true, false, false, 1),
            ),
            (
                "after 2 tries: stop and warn",
                "it passes and the goal is met: stop",
                obs(false, true, true, 2),
            ),
            (
                "after 2 tries: stop and warn",
                "it passes: stop",
                obs(false, true, false, 3),
            ),
            (
                "after 2 tries: stop and warn",
                "it fails: reflect, then plan again",
                obs(false, false, false, 2),
            ),
            (
                "it passes and the goal is met: stop",
                "it passes: act",
                obs(false, true, true, 1),
            ),
            (
                "it passes: stop",
                "it fails: plan",
                obs(false, true, false, 1),
            ),
        ];
        for (winner, loser, o) in pairs {
            for order in [[winner, loser], [loser, winner]] {
                let r = rules(&order);
                let got = pick(&r, &o).map(|r| r.text.as_str());
                assert_eq!(got, Some(winner), "{order:?} with {o:?}");
            }
        }
    }

    #[test]
    fn conditions_that_do_not_hold_are_not_picked() {
        let r = rules(&["it passes and the goal is met: stop", "after 3 tries: stop"]);
        assert_eq!(
            pick(&r, &obs(false, true, false, 1)),
            None,
            "passed, goal not met"
        );
        assert_eq!(pick(&r, &obs(false, false, false, 2)), None, "2 < 3 tries");
        let r = rules(&["it fails: plan"]);
        assert_eq!(
            pick(&r, &obs(true, false, false, 1)),
            None,
            "blocked is not a failure"
        );
    }

    #[test]
    fn a_back_edge_needs_a_ceiling() {
        let phases = ["plan", "act", "observe", "reflect"];
        let r = rules(&["it fails: reflect, then plan again"]);
        let e = validate(&r, &phases, 2, false);
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("back-edge with no ceiling"), "{e:?}");
        assert!(
            validate(&r, &phases, 2, true).is_empty(),
            "max_iterations is a ceiling"
        );
        let r = rules(&["it fails: reflect, then plan again", "after 4 tries: stop"]);
        assert!(validate(&r, &phases, 2, false).is_empty());
        let r = rules(&["it fails: act"]);
        assert_eq!(
            validate(&r, &phases, 2, false).len(),
            1,
            "act is before observe"
        );
        let r = rules(&["it fails: reflect, then plan again", "after 3 tries: plan"]);
        assert_eq!(
            validate(&r, &phases, 2, false).len(),
            1,
            "a ceiling must end the run"
        );
        let r = rules(&["it passes: stop", "it fails: debug"]);
        let e = validate(&r, &phases, 2, true);
        assert!(e[0].contains("needs a loop phase named \"debug\""), "{e:?}");
    }

    fn b(op: Operator, when: &str) -> Branch {
        Branch {
            operator: op,
            when: when.into(),
            goto: "x".into(),
        }
    }

    #[test]
    fn every_operator_with_its_edges() {
        use Operator::*;
        assert!(b(Equals, "tool-call").matches("tool-call"));
        assert!(!b(Equals, "tool-call").matches("tool-call "));
        assert!(!b(Equals, "ok").matches("OK"));
        assert!(b(Contains, "fail").matches("api_failure"));
        assert!(b(Contains, "").matches("anything"));
        assert!(b(StartsWith, "err").matches("error_timeout"));
        assert!(!b(StartsWith, "err").matches("an error"));
        assert!(b(EndsWith, "_ok").matches("write_ok"));
        assert!(!b(EndsWith, "_ok").matches("write_ok!"));
        assert!(b(Greater, "3").matches("5"));
        assert!(!b(Greater, "5").matches("5"));
        assert!(b(Greater, "3").matches(" 3.5 "));
        assert!(!b(Greater, "3").matches("five"));
        assert!(!b(Greater, "3").matches(""));
        assert!(!b(Greater, "x").matches("5"));
        assert!(!b(Greater, "3").matches("NaN"), "NaN is not a number here");
        assert!(b(Less, "10").matches("7"));
        assert!(b(Less, "0").matches("-1"));
        assert!(!b(Less, "10").matches("10"));
        assert!(!b(Less, "10").matches("7 apples"));
        assert!(b(InRange, "200,299").matches("200"));
        assert!(b(InRange, "200,299").matches("299"));
        assert!(b(InRange, "200,299").matches("201"));
        assert!(!b(InRange, "200,299").matches("300"));
        assert!(!b(InRange, "200,299").matches("199.99"));
        assert!(b(InRange, " 1 , 2 ").matches("1.5"));
        assert!(!b(InRange, "200").matches("200"), "no max");
        assert!(!b(InRange, "200,299").matches("2xx"));
        assert!(b(Default, "").matches(""));
    }

    #[test]
    fn routing_takes_on_failure_first_then_the_first_match() {
        let t: Transition = serde_json::from_value(serde_json::json!({
            "on_failure": "fix",
            "branches": [
                {"operator": "equals", "when": "tool-call", "goto": "run_tools"},
                {"operator": "contains", "when": "tool", "goto": "other"},
                {"operator": "default", "when": "", "goto": "end"}
            ]
        }))
        .unwrap();
        assert_eq!(route(&t, true, "tool-call"), Route::OnFailure("fix"));
        assert_eq!(route(&t, false, "tool-call"), Route::Branch(0, "run_tools"));
        assert_eq!(route(&t, false, "toolbox"), Route::Branch(1, "other"));
        assert_eq!(route(&t, false, "stop"), Route::Branch(2, "end"));
        let bare = Transition::default();
        assert_eq!(route(&bare, true, ""), Route::Fail);
        assert_eq!(route(&bare, false, "x"), Route::None);
        let errs = t.validate(&["fix", "run_tools"]);
        assert_eq!(
            errs,
            ["branches[1].goto \"other\" is not a loop phase or \"end\""]
        );
        let bad: Transition = serde_json::from_value(serde_json::json!({"branches": [
            {"operator": ">", "when": "x", "goto": "end"},
            {"operator": "in_range", "when": "1", "goto": "end"}]}))
        .unwrap();
        assert_eq!(bad.validate(&[]).len(), 2);
        assert_eq!(result_string(Some(" go "), Some("last")), "go");
        assert_eq!(result_string(None, Some("last")), "last");
    }

    use proptest::prelude::*;

    fn condition() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("it passes and the goal is met".to_string()),
            Just("it passes".to_string()),
            Just("it fails".to_string()),
            Just("blocked".to_string()),
            (1u64..6).prop_map(|n| format!("after {n} tries")),
        ]
    }

    proptest! {
        /// Whatever the order the lines are written in, the rule picked has the same condition,
        /// and it holds.
        #[test]
        fn the_pick_does_not_depend_on_the_order_written(
            conds in proptest::collection::vec(condition(), 1..6),
            blocked: bool, passed: bool, goal: bool, tries in 1u64..8,
            seed: u64,
        ) {
            let lines: Vec<String> = conds.iter().enumerate().map(|(i, c)| format!("{c}: p{i}")).collect();
            let written = rules(&lines.iter().map(String::as_str).collect::<Vec<_>>());
            let mut shuffled = written.clone();
            let mut rng = seed;
            for i in (1..shuffled.len()).rev() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (rng >> 33) as usize % (i + 1));
            }
            let o = obs(blocked, passed, passed && goal, tries);
            let a = pick(&written, &o).map(|r| r.condition);
            let b = pick(&shuffled, &o).map(|r| r.condition);
            prop_assert_eq!(a, b);
            if let Some(c) = a {
                prop_assert!(c.holds(&o));
                // Nothing of higher precedence held.
                prop_assert!(written.iter().all(|r| !r.condition.holds(&o) || r.condition.rank() >= c.rank()));
            }
        }

        #[test]
        fn any_line_parses_or_is_refused_without_panicking(line in "\\PC{0,60}") {
            let _ = parse_when(&line);
        }
    }
}
