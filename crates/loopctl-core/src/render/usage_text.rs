//! The agent usage part of a postmortem, as terminal text and as Markdown.

use std::fmt::Write as _;

use crate::analysis::usage::UsageReport;
use crate::decode::agent_usage::AgentUsage;
use crate::render::visible;

/// `1234 in, 56 out, 7 cache read, 8 cache write, $0.0123, 3 turns`: what is known.
pub(crate) fn summary(u: &AgentUsage) -> String {
    let mut parts = Vec::new();
    let mut n = |v: Option<u64>, what: &str| {
        if let Some(v) = v {
            parts.push(format!("{v} {what}"));
        }
    };
    n(u.input_tokens, "in");
    n(u.output_tokens, "out");
    n(u.cache_read_tokens, "cache read");
    n(u.cache_creation_tokens, "cache write");
    if let Some(c) = u.cost_usd {
        parts.push(cost(c));
    }
    if let Some(t) = u.turns {
        parts.push(format!("{t} turn{}", if t == 1 { "" } else { "s" }));
    }
    parts.join(", ")
}

fn cost(c: f64) -> String {
    format!("${c:.4}")
}

fn model(u: &AgentUsage) -> String {
    u.model
        .as_deref()
        .map_or(String::new(), |m| format!(" ({})", visible(m)))
}

pub(crate) fn text(o: &mut String, r: &UsageReport) {
    let _ = writeln!(o, "\nAgent usage: {}{}", summary(&r.total), model(&r.total));
    let width = r.phases.iter().map(|p| p.name.chars().count()).max();
    for p in &r.phases {
        let _ = writeln!(
            o,
            "  {:<w$}  {}{} ({} attempt{})",
            visible(&p.name),
            summary(&p.usage),
            model(&p.usage),
            p.attempts,
            if p.attempts == 1 { "" } else { "s" },
            w = width.unwrap_or(0)
        );
    }
}

/// `md` makes a text safe in a table cell (the postmortem's own, passed in so that this module
/// does not import the postmortem's).
pub(crate) fn markdown(o: &mut String, r: &UsageReport, md: fn(&str) -> String) {
    let _ = writeln!(o, "\n### Agent usage\n");
    let _ = writeln!(
        o,
        "| Phase | Attempts | Input | Output | Cache read | Cache write | Cost | Turns | Model |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let row = |o: &mut String, name: &str, attempts: String, u: &AgentUsage| {
        let n = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        let _ = writeln!(
            o,
            "| {name} | {attempts} | {} | {} | {} | {} | {} | {} | {} |",
            n(u.input_tokens),
            n(u.output_tokens),
            n(u.cache_read_tokens),
            n(u.cache_creation_tokens),
            u.cost_usd.map_or("-".into(), cost),
            n(u.turns),
            u.model.as_deref().map_or("-".into(), md),
        );
    };
    for p in &r.phases {
        row(o, &md(&p.name), p.attempts.to_string(), &p.usage);
    }
    let attempts: u64 = r.phases.iter().map(|p| p.attempts).sum();
    row(o, "**total**", attempts.to_string(), &r.total);
}
