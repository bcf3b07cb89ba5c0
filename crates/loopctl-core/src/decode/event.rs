//! One event model for three dialects: loopctl's native log, aif-loop's `history.jsonl` and
//! Avenor's `--on-event` NDJSON. `docs/events.md` is the reference for every type and payload.

use std::borrow::Cow;

use serde_json::Value;

use super::json_scanner::{JsonError, Scanner};
use super::subset::{Keys, subset};
use super::timestamp::Ts;

/// Version written in the `v` field of native events.
pub const NATIVE_VERSION: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    Native,
    AifLoop,
    Avenor,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Native => "native",
            Dialect::AifLoop => "aif-loop",
            Dialect::Avenor => "avenor",
        }
    }
}

macro_rules! kinds {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// Event types loopctl understands; anything else is `Other` and kept verbatim.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind { $($variant,)* Other }

        impl Kind {
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// Native (and, where it has one, aif-loop) name.
            pub fn name(self) -> &'static str {
                match self { $(Kind::$variant => $name,)* Kind::Other => "other" }
            }

            pub fn from_name(s: &str) -> Kind {
                match s { $($name => Kind::$variant,)* _ => Kind::Other }
            }
        }
    };
}

kinds! {
    RunStarted => "run_started",
    RunResumed => "run_resumed",
    PlanCreated => "plan_created",
    ArtifactCreated => "artifact_created",
    ChecksPrepared => "checks_prepared",
    EvaluationDone => "evaluation_done",
    CritiqueDone => "critique_done",
    RefinementDone => "refinement_done",
    PhaseSwitched => "phase_switched",
    IterationAdvanced => "iteration_advanced",
    PhaseStarted => "phase_started",
    PhaseFinished => "phase_finished",
    PhaseRetry => "phase_retry",
    PhaseError => "phase_error",
    Escalated => "escalated",
    Transition => "transition",
    Usage => "usage",
    SessionEnded => "session_ended",
    Stopped => "stopped",
    Failed => "failed",
}

impl Kind {
    /// Loop and phase boundaries, evaluations, retries, errors and stops.
    pub fn is_milestone(self) -> bool {
        !matches!(
            self,
            Kind::PlanCreated
                | Kind::ArtifactCreated
                | Kind::ChecksPrepared
                | Kind::CritiqueDone
                | Kind::RefinementDone
                | Kind::Usage
                | Kind::Other
        )
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Kind::Stopped | Kind::Failed)
    }
}

/// Payload fields the reducer needs on the hot path, pulled out while the line is scanned.
/// Rarer payloads are decoded from `Event::payload` when they are applied. Rule ids borrow
/// from the line (owned only when escaped), like the event's other text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts<'a> {
    pub score: Option<f64>,
    pub passed: Option<bool>,
    pub threshold: Option<f64>,
    /// Failed fail-severity rule ids (`failed` or `failed_rules`).
    pub failed: Option<Vec<Cow<'a, str>>>,
    /// Failed warn-severity rule ids (`warnings` or `warn_rules`).
    pub warnings: Option<Vec<Cow<'a, str>>>,
    pub fail_count: Option<u64>,
    pub reason: Option<String>,
    pub new_iteration: Option<u64>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    /// A key naming cache tokens or a cost (`USAGE_EXTRAS`) is in the payload, or in its
    /// `usage` object: only then does the metric fold decode the payload for them.
    pub usage_extras: bool,
}

/// The keys holding cache tokens and cost that `loopctl-export` reads from a payload (or its
/// `usage` object); `Facts::usage_extras` says whether one is there.
pub const USAGE_EXTRAS: [&str; 6] = [
    // Lengths 23, 17, 27, 21, 8 and 14, first bytes c and t: `is_usage_extra` relies on it.
    "cache_read_input_tokens",
    "cache_read_tokens",
    "cache_creation_input_tokens",
    "cache_creation_tokens",
    "cost_usd",
    "total_cost_usd",
];

/// Asked of every key no other fact takes: the lengths and first bytes rule out nearly all.
pub(crate) fn is_usage_extra(key: &[u8]) -> bool {
    matches!(key.len(), 8 | 14 | 17 | 21 | 23 | 27)
        && matches!(key.first(), Some(b'c' | b't'))
        && USAGE_EXTRAS.iter().any(|k| k.as_bytes() == key)
}

/// Rule ids that outlive their line.
fn own_ids(ids: Option<Vec<Cow<'_, str>>>) -> Option<Vec<Cow<'static, str>>> {
    ids.map(|v| v.into_iter().map(|s| Cow::Owned(s.into_owned())).collect())
}

impl<'a> Facts<'a> {
    pub(crate) fn take(&mut self, sc: &mut Scanner<'a>, key: &str) -> Result<(), JsonError> {
        match key {
            "score" => self.score = sc.opt_f64()?,
            "passed" => self.passed = sc.opt_bool()?,
            "threshold" => self.threshold = sc.opt_f64()?,
            "failed" | "failed_rules" => self.failed = sc.opt_string_array()?,
            "warnings" | "warn_rules" => self.warnings = sc.opt_string_array()?,
            "fail_count" => self.fail_count = sc.opt_u64()?,
            "reason" => self.reason = sc.opt_string()?.map(Cow::into_owned),
            "new_iteration" | "to" => self.new_iteration = sc.opt_u64()?,
            "tokens_in" | "input_tokens" => self.tokens_in = sc.opt_u64()?,
            "tokens_out" | "output_tokens" => self.tokens_out = sc.opt_u64()?,
            "usage" if sc.peek() == Some(b'{') => sc.object(|sc, k| self.take(sc, &k))?,
            k => {
                self.usage_extras |= is_usage_extra(k.as_bytes());
                sc.skip()?;
            }
        }
        Ok(())
    }

    pub fn into_owned(self) -> Facts<'static> {
        Facts {
            failed: own_ids(self.failed),
            warnings: own_ids(self.warnings),
            score: self.score,
            passed: self.passed,
            threshold: self.threshold,
            fail_count: self.fail_count,
            reason: self.reason,
            new_iteration: self.new_iteration,
            tokens_in: self.tokens_in,
            tokens_out: self.tokens_out,
            usage_extras: self.usage_extras,
        }
    }

    fn from_value(v: &Value) -> Facts<'static> {
        let Ok(text) = serde_json::to_string(v) else {
            return Facts::default();
        };
        let mut f = Facts::default();
        let mut sc = Scanner::new(&text);
        let _ = sc.object(|sc, k| f.take(sc, &k));
        f.into_owned()
    }
}

/// A normalised event. Borrowed from the line it was parsed from where possible.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    pub dialect: Dialect,
    pub seq: Option<u64>,
    pub ts: Option<Ts>,
    pub run_id: Option<Cow<'a, str>>,
    pub kind: Kind,
    /// The event's name as loopctl writes it: the native name for known kinds, else as written.
    pub name: Cow<'a, str>,
    pub iteration: Option<u64>,
    /// aif-loop's quality phase (`A`, `B`).
    pub phase: Option<Cow<'a, str>>,
    /// The step or phase name within an iteration (aif-loop `step`, Avenor/native phase name).
    pub step: Option<Cow<'a, str>>,
    pub status: Option<Cow<'a, str>>,
    /// The payload object as JSON text.
    pub payload: Option<Cow<'a, str>>,
    pub facts: Facts<'a>,
}

impl<'a> Event<'a> {
    pub fn new(kind: Kind) -> Event<'static> {
        Event {
            dialect: Dialect::Native,
            seq: None,
            ts: None,
            run_id: None,
            kind,
            name: Cow::Borrowed(kind.name()),
            iteration: None,
            phase: None,
            step: None,
            status: None,
            payload: None,
            facts: Facts::default(),
        }
    }

    pub fn into_owned(self) -> Event<'static> {
        let own = |c: Option<Cow<'a, str>>| c.map(|c| Cow::Owned(c.into_owned()));
        Event {
            dialect: self.dialect,
            seq: self.seq,
            ts: self.ts,
            run_id: own(self.run_id),
            kind: self.kind,
            name: Cow::Owned(self.name.into_owned()),
            iteration: self.iteration,
            phase: own(self.phase),
            step: own(self.step),
            status: own(self.status),
            payload: own(self.payload),
            facts: self.facts.into_owned(),
        }
    }

    /// Sets the payload (and the facts read from it).
    pub fn with_payload(mut self, payload: &Value) -> Event<'a> {
        self.facts = Facts::from_value(payload);
        self.payload = Some(Cow::Owned(payload.to_string()));
        self
    }

    /// The payload decoded, or `Null` when there is none.
    pub fn payload_value(&self) -> Value {
        self.payload
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null)
    }

    /// `payload_value` holding only `keys` (`subset`): `get` on them answers the same.
    pub fn payload_subset(&self, keys: Keys<'_>) -> Value {
        self.payload
            .as_deref()
            .map_or(Value::Null, |p| subset(p, keys))
    }

    /// The native NDJSON line for this event, without the trailing newline. Keys come in a
    /// fixed order so that the same event always gives the same bytes.
    pub fn to_native_line(&self) -> String {
        let mut out = String::with_capacity(160);
        let mut field = |k: &str, v: &str| {
            out.push(if out.is_empty() { '{' } else { ',' });
            out.push('"');
            out.push_str(k);
            out.push_str("\":");
            out.push_str(v);
        };
        let quoted = |s: &str| Value::String(s.to_string()).to_string();
        field("v", &NATIVE_VERSION.to_string());
        if let Some(seq) = self.seq {
            field("seq", &seq.to_string());
        }
        if let Some(ts) = self.ts {
            field("ts", &quoted(&ts.to_rfc3339()));
        }
        if let Some(r) = &self.run_id {
            field("run_id", &quoted(r));
        }
        field("event", &quoted(&self.name));
        if let Some(i) = self.iteration {
            field("iteration", &i.to_string());
        }
        for (k, v) in [
            ("phase", &self.phase),
            ("step", &self.step),
            ("status", &self.status),
        ] {
            if let Some(v) = v {
                field(k, &quoted(v));
            }
        }
        if self.payload.is_some() {
            field("payload", &self.payload_value().to_string());
        }
        out.push('}');
        out
    }
}

/// Why a line is not an event. The JSON error is part of the message, not also a `source()`
/// (a `{:#}` chain would print it twice).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("not valid JSON: {0}")]
    Json(JsonError),
    #[error("not a JSON object")]
    NotObject,
    #[error("no \"event\" field")]
    NoEvent,
    #[error("{0}")]
    Unreadable(String),
}

impl From<JsonError> for LineError {
    fn from(e: JsonError) -> LineError {
        LineError::Json(e)
    }
}
