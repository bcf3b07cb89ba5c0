//! Token and cost records in an agent's stdout, summed into one [`AgentUsage`] per phase.
//!
//! Two shapes are recognised (docs/runner.md, "Agent usage", cites their sources):
//! - Claude Code `-p --output-format stream-json`: a `{"type":"system","subtype":"init",
//!   "model":...}` line first and a `{"type":"result", ..., "total_cost_usd", "num_turns",
//!   "usage": {input_tokens, output_tokens, cache_read_input_tokens,
//!   cache_creation_input_tokens}, "modelUsage": {MODEL: {...}}}` line last. A result holds
//!   its session's totals, so the results of several sessions are added. A session cut off
//!   before its result (a timeout, a stall) still counts what its `assistant` messages' `usage`
//!   says, API call by API call (no cost: only the result states one).
//! - Codex `exec --json`: `{"type":"thread.started"}`, then `{"type":"turn.completed",
//!   "usage": {input_tokens, cached_input_tokens, output_tokens}}` per turn. Codex fills that
//!   usage from the thread's running total, so within a thread the last one counts, and
//!   threads are added. Codex prints no model.
//!
//! Anything else (text, other JSON, damaged or huge lines, fields of the wrong type) is
//! skipped: a field that does not decode is left out, never guessed, never a panic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The `usage` object of a `phase_finished` payload (the contract with the analytics and
/// OTel readers). Absent fields are omitted, never null.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Claude `cache_read_input_tokens`, Codex `cached_input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Claude `cache_creation_input_tokens` (Codex `cache_write_input_tokens` where printed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_tokens: Option<u64>,
    /// Only when the agent reported it (Claude `total_cost_usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

impl AgentUsage {
    /// Adds another record: counts and cost are summed, the later model wins.
    pub fn add(&mut self, o: &AgentUsage) {
        self.input_tokens = sum(self.input_tokens, o.input_tokens);
        self.output_tokens = sum(self.output_tokens, o.output_tokens);
        self.cache_read_tokens = sum(self.cache_read_tokens, o.cache_read_tokens);
        self.cache_creation_tokens = sum(self.cache_creation_tokens, o.cache_creation_tokens);
        self.turns = sum(self.turns, o.turns);
        // Summed to the nano-dollar: sums of binary fractions otherwise print as
        // 4.999999999999998 where the records said 5.
        self.cost_usd = match (self.cost_usd, o.cost_usd) {
            (None, None) => None,
            (a, b) => Some(((a.unwrap_or(0.0) + b.unwrap_or(0.0)) * 1e9).round() / 1e9),
        };
        if o.model.is_some() {
            self.model.clone_from(&o.model);
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == AgentUsage::default()
    }

    /// An event payload's usage, read as the metrics read it (docs/metrics.md, "Agent
    /// usage"): tokens in its `usage` object, else at its top level (`input_tokens` or
    /// `tokens_in`, ...); cache tokens the larger of Claude's and loopctl's names, in `usage`
    /// when there is one; the cost at the top level (`cost_usd`, else Claude's
    /// `total_cost_usd`), else in `usage`. Fields of the wrong type are left out. `None` when
    /// nothing decodes.
    pub fn from_payload(payload: &serde_json::Value) -> Option<AgentUsage> {
        use serde_json::{Map, Value};
        let top = payload.as_object()?;
        let usage = top.get("usage").and_then(Value::as_object);
        let first = |o: Option<&Map<String, Value>>, keys: &[&str]| {
            o.and_then(|o| keys.iter().find_map(|k| o.get(*k).and_then(Value::as_u64)))
        };
        let tokens = |keys: &[&str]| first(usage, keys).or_else(|| first(Some(top), keys));
        let cache_in = usage.or(Some(top));
        let larger = |a: &str, b: &str| match (first(cache_in, &[a]), first(cache_in, &[b])) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0).max(y.unwrap_or(0))),
        };
        let cost_in = |o: Option<&Map<String, Value>>| {
            let o = o?;
            ["cost_usd", "total_cost_usd"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_f64))
        };
        let usage_obj = AgentUsage {
            input_tokens: tokens(&["input_tokens", "tokens_in"]),
            output_tokens: tokens(&["output_tokens", "tokens_out"]),
            cache_read_tokens: larger("cache_read_input_tokens", "cache_read_tokens"),
            cache_creation_tokens: larger("cache_creation_input_tokens", "cache_creation_tokens"),
            cost_usd: cost_in(Some(top))
                .or_else(|| cost_in(usage))
                .filter(|c| c.is_finite() && *c >= 0.0),
            turns: first(usage, &["turns"]),
            model: usage
                .and_then(|u| u.get("model"))
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        (!usage_obj.is_empty()).then_some(usage_obj)
    }
}

/// The fields of one agent line that matter; every value is kept raw and decoded on its own,
/// so one field of the wrong type spoils only itself. Other fields are skipped unread.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    subtype: Option<&'a RawValue>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    total_cost_usd: Option<&'a RawValue>,
    #[serde(borrow)]
    num_turns: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(rename = "modelUsage", borrow)]
    model_usage: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
}

/// A Claude `assistant` line's `message`: one API call's reply.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Tokens<'a> {
    #[serde(borrow)]
    input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    output_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cache_read_input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cache_creation_input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cached_input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    cache_write_input_tokens: Option<&'a RawValue>,
}

fn count(v: Option<&RawValue>) -> Option<u64> {
    serde_json::from_str(v?.get()).ok()
}

fn string(v: Option<&RawValue>) -> Option<String> {
    serde_json::from_str::<String>(v?.get()).ok()
}

fn tokens(v: Option<&RawValue>) -> AgentUsage {
    let Some(t) = v.and_then(|v| serde_json::from_str::<Tokens<'_>>(v.get()).ok()) else {
        return AgentUsage::default();
    };
    AgentUsage {
        input_tokens: count(t.input_tokens),
        output_tokens: count(t.output_tokens),
        cache_read_tokens: count(t.cache_read_input_tokens).or(count(t.cached_input_tokens)),
        cache_creation_tokens: count(t.cache_creation_input_tokens)
            .or(count(t.cache_write_input_tokens)),
        ..AgentUsage::default()
    }
}

/// The model of a Claude result's `modelUsage` (`{MODEL: {"outputTokens": N, ...}}`): the one
/// that wrote the most, as sub-agents may run on a smaller model.
fn main_model(v: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct PerModel<'a> {
        #[serde(rename = "outputTokens", borrow)]
        output_tokens: Option<&'a RawValue>,
    }
    let models: BTreeMap<String, &RawValue> = serde_json::from_str(v?.get()).ok()?;
    models
        .into_iter()
        .map(|(name, m)| {
            let out = serde_json::from_str::<PerModel<'_>>(m.get()).ok();
            (out.and_then(|p| count(p.output_tokens)).unwrap_or(0), name)
        })
        .max_by_key(|(out, _)| *out)
        .map(|(_, name)| name)
}

/// Feeds an agent's stdout lines; [`UsageScanner::usage`] gives the phase's usage so far.
#[derive(Debug, Clone, Default)]
pub struct UsageScanner {
    /// Claude results and finished Codex threads.
    closed: AgentUsage,
    /// The current Codex thread's last `turn.completed` (its running total) and turn count.
    thread: Option<AgentUsage>,
    /// From Claude's `system`/`init` line.
    model: Option<String>,
    /// Claude API calls since the last `result`, what a session cut off before it spent.
    unfinished: AgentUsage,
    /// The latest call: the lines of one call share its message id and repeat its usage.
    call: Option<(Option<String>, AgentUsage)>,
}

/// Only lines naming one of these can be records; the rest skip the JSON parser.
const NEEDLES: [&[u8]; 4] = [
    b"result",
    b"turn.completed",
    b"thread.started",
    b"assistant",
];

impl UsageScanner {
    /// One line of stdout, without its newline (a trailing CR is tolerated).
    pub fn line(&mut self, line: &[u8]) {
        let line = line.trim_ascii();
        if !(line.starts_with(b"{") && line.ends_with(b"}")) {
            return;
        }
        let init = memchr::memmem::find(line, b"init").is_some();
        if !init
            && !NEEDLES
                .iter()
                .any(|n| memchr::memmem::find(line, n).is_some())
        {
            return;
        }
        let Ok(text) = std::str::from_utf8(line) else {
            return;
        };
        let Ok(l) = serde_json::from_str::<Line<'_>>(text) else {
            return;
        };
        match string(l.kind).as_deref() {
            Some("system") if string(l.subtype).as_deref() == Some("init") => {
                if let Some(m) = string(l.model) {
                    self.model = Some(m);
                }
            }
            Some("assistant") => self.call(l.message),
            Some("result") => {
                // The result states the whole session, its calls included.
                self.unfinished = AgentUsage::default();
                self.call = None;
                let mut u = tokens(l.usage);
                u.cost_usd = l
                    .total_cost_usd
                    .and_then(|v| serde_json::from_str::<f64>(v.get()).ok())
                    .filter(|c| c.is_finite() && *c >= 0.0);
                u.turns = count(l.num_turns);
                u.model = self.model.clone().or_else(|| main_model(l.model_usage));
                self.closed.add(&u);
            }
            Some("thread.started") => self.close_thread(),
            Some("turn.completed") => {
                let turns = self.thread.as_ref().and_then(|t| t.turns).unwrap_or(0);
                let mut u = tokens(l.usage);
                u.turns = Some(turns.saturating_add(1));
                self.thread = Some(u);
            }
            _ => {}
        }
    }

    fn call(&mut self, message: Option<&RawValue>) {
        let Some(m) = message.and_then(|m| serde_json::from_str::<Message<'_>>(m.get()).ok())
        else {
            return;
        };
        let mut u = tokens(m.usage);
        if u.is_empty() {
            return;
        }
        u.model = string(m.model);
        let id = string(m.id);
        match &mut self.call {
            Some((last, usage)) if id.is_some() && *last == id => *usage = u,
            _ => {
                if let Some((_, done)) = self.call.replace((id, u)) {
                    self.unfinished.add(&done);
                }
            }
        }
    }

    fn close_thread(&mut self) {
        if let Some(t) = self.thread.take() {
            self.closed.add(&t);
        }
    }

    /// The usage seen so far, `None` when no record was seen.
    pub fn usage(&self) -> Option<AgentUsage> {
        let mut u = self.closed.clone();
        if let Some(t) = &self.thread {
            u.add(t);
        }
        u.add(&self.unfinished);
        if let Some((_, c)) = &self.call {
            u.add(c);
        }
        if u.model.is_none() && !u.is_empty() {
            u.model.clone_from(&self.model);
        }
        (!u.is_empty()).then_some(u)
    }
}

#[cfg(test)]
mod tests;
