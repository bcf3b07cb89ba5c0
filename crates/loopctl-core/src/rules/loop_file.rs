//! Loop files: Avenor's JSON format (`pre`, `loop`, `max_iterations`, phases with `name`,
//! `prompt` | `prompt_file`, `resume_from_previous`) plus loopctl's additions (`post`, `run`,
//! `agent`). Parsing and validation are pure; reading `prompt_file`s is the runner's job.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::rules::criteria::{self, Criteria};
use crate::rules::transitions::{self, Transition, WhenRule};

/// Avenor's default, also used when a file says `0`.
pub const DEFAULT_MAX_ITERATIONS: u64 = 10;
/// The implicit pre phase that `--prompt` / `--prompt-file` adds.
pub const INITIAL: &str = "(initial)";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_file: Option<String>,
    /// A command for `sh -c` instead of an agent prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Agent argv template for this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume_from_previous: bool,
    /// The loop observes this phase: its result is evaluated and the `when` rules decide.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub evaluate: bool,
    /// Branch routing on the phase's result string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition: Option<Transition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Pre,
    Loop,
    Post,
}

impl PhaseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::Pre => "pre",
            PhaseKind::Loop => "loop",
            PhaseKind::Post => "post",
        }
    }

    pub fn parse(s: &str) -> Option<PhaseKind> {
        match s {
            "pre" => Some(PhaseKind::Pre),
            "loop" => Some(PhaseKind::Loop),
            "post" => Some(PhaseKind::Post),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LoopFile {
    #[serde(default)]
    pub pre: Vec<Phase>,
    #[serde(default, rename = "loop")]
    pub loop_: Vec<Phase>,
    #[serde(default)]
    pub post: Vec<Phase>,
    pub max_iterations: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Criteria>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<WhenRule>,
    /// Stagnation detector settings, as written (see `stagnation::Config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stagnation: Option<Value>,
    /// Cap on synthesized feedback (iteration control's `feedback_max_length`).
    #[serde(default = "feedback_max")]
    pub feedback_max_length: usize,
}

fn feedback_max() -> usize {
    criteria::FEEDBACK_MAX
}

impl LoopFile {
    /// Whether the loop takes decisions (criteria, `when` rules, observed or routed phases);
    /// a plain Avenor loop takes none and writes no decision events.
    pub fn decides(&self) -> bool {
        self.criteria.is_some()
            || !self.when.is_empty()
            || self.stagnation.is_some()
            || self
                .loop_
                .iter()
                .any(|p| p.evaluate || p.transition.is_some())
    }

    /// Whether the loop phase at `index` is observed: marked `evaluate`, or, when none is,
    /// the last loop phase of a loop with criteria or `when` rules.
    pub fn observes(&self, index: usize) -> bool {
        if self.loop_.iter().any(|p| p.evaluate) {
            return self.loop_.get(index).is_some_and(|p| p.evaluate);
        }
        (self.criteria.is_some() || !self.when.is_empty() || self.stagnation.is_some())
            && index + 1 == self.loop_.len()
    }

    /// The stagnation settings (validated at parse time; defaults when absent).
    pub fn stagnation_config(&self) -> crate::analysis::stagnation::Config {
        self.stagnation
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    pub fn loop_index(&self, name: &str) -> Option<usize> {
        self.loop_.iter().position(|p| p.name == name)
    }

    pub fn phases(&self, kind: PhaseKind) -> &[Phase] {
        match kind {
            PhaseKind::Pre => &self.pre,
            PhaseKind::Loop => &self.loop_,
            PhaseKind::Post => &self.post,
        }
    }

    /// Adds the implicit `(initial)` pre phase for `--prompt` / `--prompt-file`.
    pub fn with_initial(mut self, prompt: String) -> LoopFile {
        self.pre.insert(
            0,
            Phase {
                name: INITIAL.into(),
                prompt: Some(prompt),
                prompt_file: None,
                run: None,
                agent: None,
                resume_from_previous: false,
                evaluate: false,
                transition: None,
            },
        );
        self
    }

    /// The agent argv a prompt phase runs: its own, else the file's, else `cli`.
    pub fn agent_for<'a>(
        &'a self,
        phase: &'a Phase,
        cli: Option<&'a [String]>,
    ) -> Option<&'a [String]> {
        phase.agent.as_deref().or(self.agent.as_deref()).or(cli)
    }
}

/// One validation problem, located in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where: `loop[1] ("fix")`, `max_iterations`, or empty for the whole file.
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.at, self.message)
        }
    }
}

/// A parsed loop file, or every problem found in it. Unknown keys are returned as warnings.
pub struct Parsed {
    pub file: LoopFile,
    pub warnings: Vec<String>,
}

/// A loop file refused: every problem, and the warnings too (an unknown key is often the typo
/// behind an error: `promt` and "needs exactly one of prompt or prompt_file").
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<String>,
    /// The file as far as it could be read (the phases that parsed), when it is a JSON
    /// object: what a caller's own checks (prompt files, agents) can still look at, so that
    /// every problem is reported at once.
    pub partial: Option<Box<LoopFile>>,
}

impl From<ConfigError> for Rejected {
    fn from(e: ConfigError) -> Rejected {
        Rejected {
            errors: vec![e],
            warnings: Vec::new(),
            partial: None,
        }
    }
}

const TOP_KEYS: &[&str] = &[
    "pre",
    "loop",
    "post",
    "max_iterations",
    "agent",
    "criteria",
    "when",
    "stagnation",
    "escalation",
];
const PHASE_KEYS: &[&str] = &[
    "name",
    "prompt",
    "prompt_file",
    "run",
    "agent",
    "resume_from_previous",
    "evaluate",
    "transition",
];

/// Splits an agent given as one string the way a shell would (quotes, escapes), without
/// running a shell; an array is taken as the argv itself.
pub fn agent_argv(v: &Value) -> Result<Vec<String>, String> {
    let argv = match v {
        Value::String(s) => {
            shell_words::split(s).map_err(|e| format!("cannot split {s:?}: {e}"))?
        }
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or("must hold only strings")
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("must be a string or an array of strings".into()),
    };
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err("is empty".into());
    }
    Ok(argv)
}

/// A loop file's JSON error, its place said once: where it is, then what (serde_json's text
/// ends with the place already).
fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let place = format!(" at line {} column {}", e.line(), e.column());
    let what = text.strip_suffix(&place).unwrap_or(&text);
    if e.classify() == serde_json::error::Category::Eof {
        format!("not valid JSON: the file ends early ({what})")
    } else {
        format!(
            "not valid JSON at line {}, column {}: {what}",
            e.line(),
            e.column()
        )
    }
}

/// Parses and validates a loop file per Avenor's rules (its "Config validation").
/// `initial` is the `--prompt` text, added as the `(initial)` pre phase after validation.
pub fn parse(text: &str, initial: Option<String>) -> Result<Parsed, Rejected> {
    let err = |at: &str, m: &str| ConfigError {
        at: at.into(),
        message: m.into(),
    };
    // A byte order mark, as some Windows editors write: not part of the JSON.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root: Value = serde_json::from_str(text).map_err(|e| err("", &json_error(&e)))?;
    let Value::Object(top) = root else {
        return Err(err("", "a loop file must be a JSON object").into());
    };
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for k in top.keys().filter(|k| !TOP_KEYS.contains(&k.as_str())) {
        warnings.push(format!("unknown key {k:?} ignored"));
    }
    let agent = match top.get("agent") {
        None | Some(Value::Null) => None,
        Some(v) => agent_argv(v)
            .map_err(|m| errors.push(err("agent", &m)))
            .ok(),
    };
    let mut lists = [Vec::new(), Vec::new(), Vec::new()];
    // Names of every phase, valid or not, so a duplicate is reported alongside other errors.
    let mut names: Vec<(String, String)> = Vec::new();
    for (slot, key) in lists.iter_mut().zip(["pre", "loop", "post"]) {
        match top.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let at = format!("{key}[{i}]");
                    if let Some(n) = item.get("name").and_then(Value::as_str) {
                        names.push((at.clone(), n.to_string()));
                    }
                    if let Some(p) = phase(item, &at, &mut errors, &mut warnings) {
                        slot.push(p);
                    }
                }
            }
            Some(_) => errors.push(err(key, "must be an array of phases")),
        }
    }
    let [pre, loop_, post] = lists;
    // As written, not as parsed: a phase with its own errors still makes the loop non-empty.
    let loop_written = top
        .get("loop")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let max_iterations = match top.get("max_iterations") {
        None | Some(Value::Null) => DEFAULT_MAX_ITERATIONS,
        Some(v) => match v.as_i64() {
            Some(0) => DEFAULT_MAX_ITERATIONS,
            Some(n) if n > 0 => n as u64,
            Some(_) if !loop_written => DEFAULT_MAX_ITERATIONS,
            Some(_) => {
                errors.push(err(
                    "max_iterations",
                    "max_iterations must be ≥ 1 when loop is non-empty",
                ));
                0
            }
            None if v.as_u64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                errors.push(err("max_iterations", "is an integer out of range"));
                0
            }
            None => {
                errors.push(err("max_iterations", "must be an integer"));
                0
            }
        },
    };
    let declared = |k: &str| {
        top.get(k)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    if !declared("pre") && !declared("loop") {
        errors.push(err("", "at least one of pre or loop must be non-empty"));
    }
    let mut seen = std::collections::HashSet::new();
    for (at, name) in &names {
        if name == INITIAL {
            errors.push(err(
                at,
                "the name (initial) is reserved and cannot be used explicitly",
            ));
        } else if !name.is_empty() && !seen.insert(name.clone()) {
            errors.push(err(
                &format!("{at} ({name:?})"),
                "phase names must be unique across pre, loop and post",
            ));
        }
    }
    let criteria = match top.get("criteria") {
        None | Some(Value::Null) => None,
        Some(v) => Criteria::parse(v)
            .map_err(|e| errors.extend(e.into_iter().map(|(at, m)| err(&at, &m))))
            .ok(),
    };
    let mut when = Vec::new();
    match top.get("when") {
        None | Some(Value::Null) => {}
        Some(Value::Array(lines)) => {
            for (i, l) in lines.iter().enumerate() {
                match l.as_str().map(transitions::parse_when) {
                    Some(Ok(r)) => when.push(r),
                    Some(Err(m)) => errors.push(err(&format!("when[{i}]"), &m)),
                    None => errors.push(err(&format!("when[{i}]"), "must be a string")),
                }
            }
        }
        Some(_) => errors.push(err(
            "when",
            "must be an array of \"<condition>: <action>\" lines",
        )),
    }
    let stagnation = match top.get("stagnation") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => {
            match serde_json::from_value::<crate::analysis::stagnation::Config>(v.clone()) {
                Ok(_) => Some(v.clone()),
                Err(e) => {
                    errors.push(err("stagnation", &e.to_string()));
                    None
                }
            }
        }
        Some(_) => {
            errors.push(err("stagnation", "must be an object"));
            None
        }
    };
    let mut feedback_max_length = criteria::FEEDBACK_MAX;
    if let Some(e) = top.get("escalation").filter(|v| !v.is_null()) {
        match e.get("feedback_max_length").map(Value::as_u64) {
            None => {}
            Some(Some(n)) if n > 0 => feedback_max_length = n as usize,
            Some(_) => errors.push(err(
                "escalation.feedback_max_length",
                "must be a positive integer",
            )),
        }
    }
    let loop_names: Vec<&str> = loop_.iter().map(|p| p.name.as_str()).collect();
    for (kind, list) in [("pre", &pre), ("loop", &loop_), ("post", &post)] {
        for (i, p) in list.iter().enumerate() {
            let at = format!("{kind}[{i}] ({:?})", p.name);
            if kind != "loop" && (p.evaluate || p.transition.is_some()) {
                errors.push(err(&at, "evaluate and transition are for loop phases"));
            }
            if let Some(t) = &p.transition {
                for m in t.validate(&loop_names) {
                    errors.push(err(&format!("{at}.transition"), &m));
                }
            }
        }
    }
    if !when.is_empty() {
        if loop_.is_empty() {
            errors.push(err("when", "when rules need loop phases"));
        } else {
            let observer = loop_
                .iter()
                .position(|p| p.evaluate)
                .unwrap_or(loop_.len() - 1);
            let declared = top.get("max_iterations").is_some_and(|v| !v.is_null());
            for m in transitions::validate(&when, &loop_names, observer, declared) {
                errors.push(err("when", &m));
            }
            for r in &when {
                if let transitions::Condition::AfterTries(n) = r.condition
                    && n > max_iterations
                {
                    warnings.push(format!(
                        "when: {:?} can never fire: the loop stops after max_iterations = {max_iterations}",
                        r.text
                    ));
                }
            }
        }
    }
    let file = LoopFile {
        pre,
        loop_,
        post,
        max_iterations,
        agent,
        criteria,
        when,
        stagnation,
        feedback_max_length,
    };
    let file = match initial {
        Some(p) => file.with_initial(p),
        None => file,
    };
    if !errors.is_empty() {
        return Err(Rejected {
            errors,
            warnings,
            partial: Some(Box::new(file)),
        });
    }
    Ok(Parsed { file, warnings })
}

fn phase(
    v: &Value,
    at: &str,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Option<Phase> {
    let Value::Object(o) = v else {
        errors.push(ConfigError {
            at: at.into(),
            message: "a phase must be a JSON object".into(),
        });
        return None;
    };
    let name = o
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let at = if name.is_empty() {
        at.to_string()
    } else {
        format!("{at} ({name:?})")
    };
    let before = errors.len();
    let mut fail = |m: String| {
        errors.push(ConfigError {
            at: at.clone(),
            message: m,
        })
    };
    if name.trim().is_empty() {
        fail("every phase must have a non-empty name".into());
    }
    let text = |o: &Map<String, Value>, k: &str, fail: &mut dyn FnMut(String)| match o.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            fail(format!("{k} must be a string"));
            None
        }
    };
    let prompt = text(o, "prompt", &mut fail);
    let prompt_file = text(o, "prompt_file", &mut fail);
    let run = text(o, "run", &mut fail);
    let given = [&prompt, &prompt_file, &run]
        .iter()
        .filter(|x| x.is_some())
        .count();
    if given != 1 {
        fail(
            "every phase must have exactly one of prompt or prompt_file (or run, for a command)"
                .into(),
        );
    }
    let agent = match o.get("agent") {
        None | Some(Value::Null) => None,
        Some(a) => agent_argv(a).map_err(|m| fail(format!("agent {m}"))).ok(),
    };
    let resume_from_previous = match o.get("resume_from_previous") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            fail("resume_from_previous must be true or false".into());
            false
        }
    };
    let evaluate = match o.get("evaluate") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            fail("evaluate must be true or false".into());
            false
        }
    };
    let transition = match o.get("transition") {
        None | Some(Value::Null) => None,
        Some(t) => serde_json::from_value::<Transition>(t.clone())
            .map_err(|e| fail(format!("transition: {e}")))
            .ok(),
    };
    for k in o.keys().filter(|k| !PHASE_KEYS.contains(&k.as_str())) {
        warnings.push(format!("{at}: unknown key {k:?} ignored"));
    }
    (errors.len() == before).then_some(Phase {
        name,
        prompt,
        prompt_file,
        run,
        agent,
        resume_from_previous,
        evaluate,
        transition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(text: &str) -> Vec<String> {
        match parse(text, None) {
            Ok(_) => vec![],
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn avenor_quick_start_parses_with_defaults() {
        let p = parse(
            r#"{"pre":[{"name":"build","prompt":"Build."}],
                "loop":[{"name":"test","prompt":"T"},{"name":"fix","resume_from_previous":true,"prompt":"F"}]}"#,
            Some("go".into()),
        )
        .map_err(|e| format!("{e:?}"))
        .unwrap();
        assert_eq!(p.file.max_iterations, 10);
        assert_eq!(p.file.pre[0].name, INITIAL);
        assert_eq!(p.file.pre[1].name, "build");
        assert!(p.file.loop_[1].resume_from_previous);
        assert!(p.warnings.is_empty());
        let zero = parse(
            r#"{"loop":[{"name":"a","run":"true"}],"max_iterations":0}"#,
            None,
        );
        assert_eq!(zero.ok().map(|p| p.file.max_iterations), Some(10));
    }

    #[test]
    fn a_byte_order_mark_before_the_json_is_skipped() {
        let p = parse(
            "\u{feff}{\"loop\": [{\"name\": \"a\", \"run\": \"true\"}]}",
            None,
        );
        assert_eq!(p.ok().map(|p| p.file.loop_.len()), Some(1));
    }

    #[test]
    fn a_json_error_names_its_place_once() {
        assert_eq!(
            errs("{\"loop\": [{\"name\": \"a\", \"run\": \"true\",}]}"),
            ["not valid JSON at line 1, column 39: trailing comma"]
        );
        assert_eq!(
            errs("{\"loop\": [\n"),
            ["not valid JSON: the file ends early (EOF while parsing a list)"]
        );
    }

    #[test]
    fn every_rule_is_reported_with_its_place() {
        assert_eq!(
            errs("{}"),
            ["at least one of pre or loop must be non-empty"]
        );
        assert_eq!(
            errs(r#"{"pre":[],"loop":[]}"#),
            ["at least one of pre or loop must be non-empty"]
        );
        assert_eq!(
            errs(r#"{"loop":[{"name":"a","prompt":"x"}],"max_iterations":-1}"#),
            ["max_iterations: max_iterations must be ≥ 1 when loop is non-empty"]
        );
        assert_eq!(
            errs(r#"{"loop":[{"name":"","prompt":"x"}]}"#),
            ["loop[0]: every phase must have a non-empty name"]
        );
        // Every problem at once: a phase's own errors do not hide the file's.
        assert_eq!(
            errs(r#"{"max_iterations":-1,"loop":[{"run":"true"}]}"#),
            [
                "loop[0]: every phase must have a non-empty name",
                "max_iterations: max_iterations must be ≥ 1 when loop is non-empty"
            ]
        );
        assert_eq!(
            errs(r#"{"max_iterations":99999999999999999999,"loop":[{"name":"a","run":"true"}]}"#),
            ["max_iterations: is an integer out of range"]
        );
        assert_eq!(
            errs(r#"{"max_iterations":1.5,"loop":[{"name":"a","run":"true"}]}"#),
            ["max_iterations: must be an integer"]
        );
        assert_eq!(
            errs(r#"{"loop":[{"name":"a","prompt":"x","prompt_file":"y"}]}"#),
            [
                "loop[0] (\"a\"): every phase must have exactly one of prompt or prompt_file (or run, for a command)"
            ]
        );
        assert_eq!(errs(r#"{"loop":[{"name":"a"}]}"#).len(), 1);
        assert_eq!(
            errs(r#"{"pre":[{"name":"a","prompt":"x"}],"loop":[{"name":"a","prompt":"y"}]}"#),
            ["loop[0] (\"a\"): phase names must be unique across pre, loop and post"]
        );
        assert_eq!(
            errs(r#"{"loop":[{"name":"(initial)","prompt":"x"}]}"#),
            ["loop[0]: the name (initial) is reserved and cannot be used explicitly"]
        );
        assert!(errs("{not json").len() == 1 && errs("{not json")[0].contains("line 1"));
        assert_eq!(errs(r#"{"loop":{}}"#).len(), 2);
        assert_eq!(
            errs(r#"{"loop":[{"name":"a","run":"x","agent":[]}]}"#),
            ["loop[0] (\"a\"): agent is empty"]
        );
    }

    #[test]
    fn agents_split_like_a_shell_and_unknown_keys_warn() {
        let p = parse(
            r#"{"agent":"my-agent --model 'big one' {prompt}","loop":[{"name":"a","prompt":"x","colour":1}],"extra":true}"#,
            None,
        )
        .ok()
        .unwrap();
        assert_eq!(
            p.file.agent.as_deref(),
            Some(
                &[
                    "my-agent".to_string(),
                    "--model".into(),
                    "big one".into(),
                    "{prompt}".into()
                ][..]
            )
        );
        assert_eq!(p.warnings.len(), 2);
    }

    #[test]
    fn decision_keys_parse_and_their_problems_are_located() {
        let p = parse(
            r#"{"max_iterations": 3,
                "criteria": {"thresholds": {"B": 0.95}, "rules": [{"id": "t", "check": "true"}]},
                "when": ["it fails: reflect, then plan again", "blocked: ask a human"],
                "stagnation": {"limit": 3},
                "escalation": {"feedback_max_length": 80},
                "loop": [{"name": "plan", "run": "a"}, {"name": "observe", "run": "b", "evaluate": true},
                         {"name": "reflect", "run": "c",
                          "transition": {"branches": [{"operator": "default", "when": "", "goto": "plan"}]}}]}"#,
            None,
        )
        .map_err(|e| format!("{e:?}"))
        .unwrap();
        let f = &p.file;
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(f.criteria.as_ref().map(|c| c.threshold_b), Some(0.95));
        assert_eq!(f.when.len(), 2);
        assert_eq!(f.feedback_max_length, 80);
        assert!(f.decides());
        assert!(!f.observes(0) && f.observes(1) && !f.observes(2));
        assert_eq!(f.loop_index("reflect"), Some(2));
        // Resume reads the loop back from the run_started payload: it must round-trip.
        let back: LoopFile = serde_json::from_value(serde_json::to_value(f).unwrap()).unwrap();
        assert_eq!(&back, f);
        // Without an `evaluate` phase, the last loop phase is observed.
        let q = parse(
            r#"{"when": ["it passes: stop"], "loop": [{"name": "a", "run": "x"}, {"name": "b", "run": "y"}]}"#,
            None,
        )
        .ok()
        .unwrap();
        assert!(!q.file.observes(0) && q.file.observes(1));
        let plain = parse(r#"{"loop": [{"name": "a", "run": "x"}]}"#, None)
            .ok()
            .unwrap();
        assert!(!plain.file.decides() && !plain.file.observes(0));

        assert_eq!(
            errs(
                r#"{"when": ["it fails: debug", "sometimes: stop"], "max_iterations": 2,
                     "criteria": {"rules": [{"id": "x", "severity": "bad"}]},
                     "pre": [{"name": "p", "run": "x", "evaluate": true}],
                     "loop": [{"name": "a", "run": "x", "transition": {"on_failure": "nowhere"}}]}"#
            ),
            [
                "criteria.rules[0]: x: severity \"bad\" is not fail, warn or info",
                "when[1]: unknown condition \"sometimes\" (use: it passes, it passes and the goal is met, it fails, blocked, after N tries)",
                "pre[0] (\"p\"): evaluate and transition are for loop phases",
                "loop[0] (\"a\").transition: on_failure \"nowhere\" is not a loop phase or \"end\"",
                "when: \"it fails: debug\": action \"debug\" needs a loop phase named \"debug\"",
            ]
        );
        assert_eq!(
            errs(r#"{"loop": [{"name": "a", "run": "x", "transition": {"branches": [{"operator": "like", "goto": "end"}]}}]}"#).len(),
            1
        );
    }
}
