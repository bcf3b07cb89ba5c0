//! What a run's agents spent: the `usage` of each phase attempt (`phase_finished`, see
//! `decode::agent_usage`) summed per phase name and for the run.

use serde::Serialize;

use crate::decode::agent_usage::AgentUsage;
use crate::fold::trace::Trace;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageReport {
    /// All attempts' usage added.
    pub total: AgentUsage,
    /// Per phase name, in the order the phases first ran.
    pub phases: Vec<PhaseUsage>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseUsage {
    pub name: String,
    /// Attempts of this phase that recorded usage.
    pub attempts: u64,
    pub usage: AgentUsage,
}

impl UsageReport {
    /// `None` when no attempt recorded usage: a log without any reads as it did before.
    pub fn of(trace: &Trace) -> Option<UsageReport> {
        let mut total = AgentUsage::default();
        let mut phases: Vec<PhaseUsage> = Vec::new();
        for a in &trace.attempts {
            let Some(u) = &a.explicit().usage else {
                continue;
            };
            total.add(u);
            match phases.iter_mut().find(|p| *p.name == *a.name) {
                Some(p) => {
                    p.attempts += 1;
                    p.usage.add(u);
                }
                None => phases.push(PhaseUsage {
                    name: a.name.to_string(),
                    attempts: 1,
                    usage: u.clone(),
                }),
            }
        }
        (!phases.is_empty()).then_some(UsageReport { total, phases })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::analysis::liveness::Liveness;
    use crate::analysis::postmortem::{Format, Report};
    use crate::analysis::stagnation::{Config, assess};
    use crate::fold::trace::traces_from_bytes;

    /// A native log: build (with usage), a retried review (usage on both attempts), fix (none).
    fn log(with_usage: bool) -> String {
        let claude = json!({"input_tokens": 18, "output_tokens": 208, "cache_read_tokens": 49366,
                            "cache_creation_tokens": 8421, "cost_usd": 0.25, "turns": 5,
                            "model": "claude-sonnet-4-5"});
        let codex =
            json!({"input_tokens": 100, "output_tokens": 10, "cache_read_tokens": 60, "turns": 1});
        let mut lines = vec![
            json!({"v":1,"seq":1,"ts":"2026-04-02T09:00:00.000Z","run_id":"u","event":"run_started","payload":{"max_iterations":1}}),
        ];
        let mut seq = 1;
        for (name, attempt, usage) in [
            ("build", 1, &claude),
            ("review", 1, &codex),
            ("review", 2, &codex),
            ("fix", 1, &Value::Null),
        ] {
            seq += 1;
            lines.push(json!({"v":1,"seq":seq,"ts":format!("2026-04-02T09:00:{:02}.000Z", seq),"run_id":"u","event":"phase_started","iteration":1,"step":name,"payload":{"attempt":attempt,"kind":"loop"}}));
            seq += 1;
            let mut fin = json!({"attempt":attempt,"kind":"loop","duration_ms":1000,"exit_code":0,"stop_reason":"end_turn"});
            if with_usage && !usage.is_null() {
                fin["usage"] = usage.clone();
            }
            lines.push(json!({"v":1,"seq":seq,"ts":format!("2026-04-02T09:00:{:02}.000Z", seq),"run_id":"u","event":"phase_finished","iteration":1,"step":name,"payload":fin}));
        }
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    fn report(log: &str) -> Report {
        let out = crate::replay_bytes("t", log.as_bytes());
        let state = out.runs.get("u").cloned().unwrap();
        let trace = traces_from_bytes("t", log.as_bytes())
            .get("u")
            .cloned()
            .unwrap();
        let verdict = assess(&trace, &Config::default(), None, Liveness::Alive);
        Report::build(&state, &trace, &verdict)
    }

    #[test]
    fn usage_is_summed_per_phase_and_for_the_run() {
        let text = log(true);
        let trace = traces_from_bytes("t", text.as_bytes())
            .get("u")
            .cloned()
            .unwrap();
        let r = UsageReport::of(&trace).expect("usage");
        let names: Vec<_> = r
            .phases
            .iter()
            .map(|p| (p.name.as_str(), p.attempts))
            .collect();
        assert_eq!(names, [("build", 1), ("review", 2)]);
        assert_eq!(r.phases[1].usage.input_tokens, Some(200));
        assert_eq!(r.phases[1].usage.cache_creation_tokens, None);
        assert_eq!(r.phases[1].usage.cost_usd, None);
        let t = &r.total;
        assert_eq!((t.input_tokens, t.output_tokens), (Some(218), Some(228)));
        assert_eq!(
            (t.cache_read_tokens, t.cache_creation_tokens),
            (Some(49486), Some(8421))
        );
        assert_eq!((t.cost_usd, t.turns), (Some(0.25), Some(7)));
        assert_eq!(t.model.as_deref(), Some("claude-sonnet-4-5"));
    }

    #[test]
    fn the_postmortem_shows_the_totals_in_text_markdown_and_json() {
        let r = report(&log(true));
        let text = r.render(Format::Text);
        assert!(
            text.contains("\nAgent usage: 218 in, 228 out, 49486 cache read, 8421 cache write, $0.2500, 7 turns (claude-sonnet-4-5)\n"),
            "{text}"
        );
        assert!(
            text.contains("\n  review  200 in, 20 out, 120 cache read, 2 turns (2 attempts)\n"),
            "{text}"
        );
        let md = r.render(Format::Markdown);
        assert!(md.contains("\n### Agent usage\n"), "{md}");
        assert!(
            md.contains(
                "| **total** | 3 | 218 | 228 | 49486 | 8421 | $0.2500 | 7 | claude-sonnet-4-5 |"
            ),
            "{md}"
        );
        let j: Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
        assert_eq!(j["usage"]["total"]["cost_usd"], json!(0.25));
        assert_eq!(j["usage"]["phases"][0]["name"], json!("build"));
        assert_eq!(j["timeline"][0]["phases"][0]["usage"]["turns"], json!(5));
        assert!(j["timeline"][0]["phases"][3].get("usage").is_none());
    }

    #[test]
    fn a_log_without_usage_reports_as_before() {
        let r = report(&log(false));
        assert_eq!(r.usage, None);
        let j: Value = serde_json::from_str(&r.render(Format::Json)).unwrap();
        assert!(j.get("usage").is_none());
        assert!(j["timeline"][0]["phases"][0].get("usage").is_none());
        assert!(!r.render(Format::Text).contains("Agent usage"));
        assert!(!r.render(Format::Markdown).contains("Agent usage"));
    }
}
