//! Explicit phase attempts (`phase_started` / `phase_finished`): the rules `Trace` and leaner
//! folds of a run (analytics' `Lean`) share, so they number and close attempts alike.

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::payload::{gap, i, marker_text, s, u};
use super::records::{Attempt, Explicit, Name};
use crate::decode::agent_usage::AgentUsage;
use crate::decode::event::Event;
use crate::decode::timestamp::Ts;

/// How many attempts each (phase name, iteration) has had: the next one's number without a
/// scan of them all (a run can have hundreds of thousands).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptNumbers(FxHashMap<(Name, Option<u64>), u64>);

impl AttemptNumbers {
    /// A new attempt of `name` (its payload's `attempt`, else one more than its name and
    /// iteration had) for a `phase_started`.
    fn next(&mut self, name: &Name, iteration: Option<u64>, p: &Value) -> u64 {
        let seen = self.0.entry((name.clone(), iteration)).or_insert(0);
        *seen += 1;
        u(p, "attempt").unwrap_or(*seen)
    }

    /// `phase_started`: opens an attempt of `name`.
    pub fn start(&mut self, attempts: &mut Vec<Attempt>, name: Name, ev: &Event<'_>, p: &Value) {
        let attempt = self.next(&name, ev.iteration, p);
        attempts.push(Attempt {
            attempt,
            start_seq: ev.seq,
            started: ev.ts,
            explicit: Some(Box::new(Explicit {
                kind: s(p, "kind"),
                commit_start: s(p, "commit"),
                worktree_start: s(p, "worktree"),
                ..Explicit::default()
            })),
            ..Attempt::new(name, ev.iteration)
        });
    }

    /// `phase_finished`: closes the latest open attempt of `name` (of the same iteration when
    /// both say one), or records one that never started. Gives its index in `attempts`.
    pub fn finish(
        &mut self,
        attempts: &mut Vec<Attempt>,
        name: Name,
        ev: &Event<'_>,
        p: &Value,
    ) -> usize {
        let open = attempts.iter().rposition(|a| {
            !a.finished
                && a.name == name
                && (a.iteration.is_none() || ev.iteration.is_none() || a.iteration == ev.iteration)
        });
        let idx = match open {
            Some(i) => i,
            None => {
                let attempt = self.next(&name, ev.iteration, p);
                attempts.push(Attempt {
                    attempt,
                    ..Attempt::new(name, ev.iteration)
                });
                attempts.len() - 1
            }
        };
        let a = &mut attempts[idx];
        a.finished = true;
        a.end_seq = ev.seq;
        a.ended = ev.ts;
        a.duration_ms = u(p, "duration_ms").or_else(|| gap(a.started, a.ended));
        if a.started.is_none()
            && let (Some(end), Some(d)) = (a.ended, a.duration_ms)
        {
            a.started = i64::try_from(d).ok().map(|d| Ts(end.0.saturating_sub(d)));
        }
        a.error = s(p, "error");
        let x = a.explicit.get_or_insert_with(Box::default);
        x.exit_code = i(p, "exit_code");
        x.stop_reason = s(p, "stop_reason");
        x.verdict = s(p, "verdict");
        x.marker = marker_text(p);
        x.commit_end = s(p, "commit");
        x.worktree_end = s(p, "worktree");
        x.usage = AgentUsage::from_payload(p);
        if x.kind.is_none() {
            x.kind = s(p, "kind");
        }
        idx
    }
}
