//! One row of each table, as Rust values (times in Unix milliseconds, days since 1970-01-01).

use std::sync::Arc;

use loopctl_core::decode::agent_usage::AgentUsage;

/// Agent usage as the runner records it in `phase_finished` (its `usage` object, as the trace
/// reads it), summable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_creation_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub turns: Option<u64>,
    pub model: Option<String>,
}

impl From<&AgentUsage> for Usage {
    fn from(u: &AgentUsage) -> Usage {
        Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            cost_usd: u.cost_usd,
            turns: u.turns,
            model: u.model.clone(),
        }
    }
}

fn add_u(a: &mut Option<u64>, b: Option<u64>) {
    if let Some(b) = b {
        *a = Some(a.unwrap_or(0).saturating_add(b));
    }
}

impl Usage {
    /// Sums counts and cost; the model is the last one named.
    pub fn add(&mut self, o: &Usage) {
        add_u(&mut self.input_tokens, o.input_tokens);
        add_u(&mut self.output_tokens, o.output_tokens);
        add_u(&mut self.cache_read_tokens, o.cache_read_tokens);
        add_u(&mut self.cache_creation_tokens, o.cache_creation_tokens);
        add_u(&mut self.turns, o.turns);
        if let Some(c) = o.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
        if o.model.is_some() {
            self.model.clone_from(&o.model);
        }
    }
}

/// Days since 1970-01-01 (UTC) of a Unix time in milliseconds.
pub fn day_of(ms: i64) -> i32 {
    ms.div_euclid(86_400_000) as i32
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRow {
    pub run_id: String,
    pub loop_name: String,
    pub status: &'static str,
    pub exit_reason: Option<String>,
    pub started: Option<i64>,
    pub ended: Option<i64>,
    pub duration_ms: Option<u64>,
    pub iterations: u64,
    pub max_iterations: Option<u64>,
    pub last_score: Option<f64>,
    pub passed: Option<bool>,
    pub retries: u64,
    pub phase_errors: u64,
    pub usage: Usage,
    pub first_pass_iteration: Option<u64>,
    pub first_pass_ms: Option<u64>,
    pub stagnation: Option<String>,
    pub dialect: Option<&'static str>,
    pub events: u64,
    pub source: String,
    pub day: Option<i32>,
}

/// The run's names are shared by its events (a log can hold millions).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub run_id: Arc<str>,
    pub loop_name: Arc<str>,
    pub seq: Option<u64>,
    pub ts: Option<i64>,
    pub dialect: &'static str,
    pub event: String,
    pub iteration: Option<u64>,
    pub phase: Option<String>,
    pub step: Option<String>,
    pub status: Option<String>,
    pub payload: Option<String>,
    pub line: u64,
    pub source: Arc<str>,
    pub day: Option<i32>,
}
