//! One line per event, as `tail` and `history` print them: time, run, iteration and step,
//! event, and what the event says (stop reason, exit code, duration, score, ...).

use std::collections::HashMap;

use loopctl_core::decode::event::{Event, Kind};
use loopctl_core::render::visible as v;
use loopctl_core::{RunState, Status};
use owo_colors::{AnsiColors, OwoColorize};
use serde_json::Value;

use crate::output;

pub const PALETTE: [AnsiColors; 6] = [
    AnsiColors::Cyan,
    AnsiColors::Magenta,
    AnsiColors::Yellow,
    AnsiColors::Green,
    AnsiColors::Blue,
    AnsiColors::BrightRed,
];

/// A colour per run, in the order runs appear.
#[derive(Default)]
pub struct Colors(HashMap<String, AnsiColors>);

impl Colors {
    pub fn of(&mut self, run: &str) -> AnsiColors {
        let n = self.0.len();
        *self
            .0
            .entry(run.to_string())
            .or_insert(PALETTE[n % PALETTE.len()])
    }
}

pub fn iteration_header(run: &str, s: &RunState, color: AnsiColors) -> String {
    let max = s
        .max_iterations
        .map(|m| format!("/{m}"))
        .unwrap_or_default();
    let mut h = format!("── {} | Iteration {}{max}", v(run), s.iteration);
    if let Some(p) = s.quality_phase() {
        h.push_str(&format!(" | Phase {}", v(p)));
    }
    if !s.score_history.is_empty() {
        let passed = s.score_history.last().and_then(|p| p.passed);
        h.push_str(&format!(" | Score: {}", output::score(s.last_score)));
        if let Some(p) = passed {
            h.push_str(if p { " | PASS" } else { " | FAIL" });
        }
    }
    h.push_str(" ──");
    h.color(color).bold().to_string()
}

/// The event's line. `full_time` prints the whole RFC 3339 time (else the time of day),
/// `seq` the event's `#seq`. Text from the log is escaped (`visible`): one event, one line.
pub fn human(
    ev: &Event<'_>,
    run: &str,
    s: &RunState,
    color: AnsiColors,
    full_time: bool,
    seq: bool,
) -> String {
    let time = match (ev.ts, full_time) {
        (Some(t), true) => t.to_rfc3339(),
        (Some(t), false) => t.to_rfc3339()[11..23].to_string(),
        (None, true) => "-".repeat(24),
        (None, false) => "--:--:--.---".into(),
    };
    let time = match ev.seq.filter(|_| seq) {
        Some(n) => format!("{time} {:>5}", format!("#{n}")),
        None if seq => format!("{time} {:>5}", ""),
        None => time,
    };
    let at = match (ev.iteration, ev.step.as_deref()) {
        (Some(i), Some(step)) if i > 0 => format!("{i} {}", v(step)),
        (_, Some(step)) => v(step).into_owned(),
        (Some(i), None) => format!("it {i}"),
        _ => String::new(),
    };
    let p = ev.payload_value();
    let get = |k: &str| p.get(k).filter(|v| !v.is_null());
    let mut detail = Vec::new();
    match ev.kind {
        Kind::PhaseFinished => {
            let reason = get("stop_reason")
                .and_then(Value::as_str)
                .unwrap_or("end_turn");
            detail.push(if reason == "end_turn" {
                "ok".green().to_string()
            } else {
                v(reason).red().to_string()
            });
            if let Some(c) = get("exit_code") {
                detail.push(format!("exit {c}"));
            }
            if let Some(ms) = get("duration_ms").and_then(Value::as_u64) {
                detail.push(format!("{:.1}s", ms as f64 / 1000.0));
            }
            if let Some(m) = get("marker") {
                let d = v(m.get("directive").and_then(Value::as_str).unwrap_or(""));
                let l = m
                    .get("label")
                    .and_then(Value::as_str)
                    .map(|l| format!(" | {}", v(l)))
                    .unwrap_or_default();
                detail.push(format!("<|workflow: {d}{l}|>").bold().to_string());
            }
        }
        Kind::EvaluationDone => {
            if let Some(sc) = ev.facts.score {
                detail.push(format!("score {}", output::score(sc)));
            }
            match ev.facts.passed {
                Some(true) => detail.push("PASS".green().to_string()),
                Some(false) => detail.push("FAIL".red().to_string()),
                None => {}
            }
            if let Some(f) = ev.facts.failed.as_ref().filter(|f| !f.is_empty()) {
                detail.push(format!("failed: {}", v(&f.join(","))));
            }
        }
        Kind::Stopped | Kind::Failed => {
            detail.push(
                format!("{} ({})", s.status.as_str(), v(&s.stop.reason))
                    .bold()
                    .to_string(),
            );
            if let Some(l) = &s.exit_label {
                detail.push(v(l).into_owned());
            }
            if let Some(e) = s.last_error.as_ref().filter(|_| s.status == Status::Failed) {
                detail.push(v(e).red().to_string());
            }
        }
        Kind::PhaseRetry => {
            for k in ["retry", "delay_ms", "exit_code"] {
                if let Some(v) = get(k) {
                    detail.push(format!("{k} {v}"));
                }
            }
        }
        Kind::PhaseError => {
            if let Some(e) = &s.last_error {
                detail.push(v(e).red().to_string());
            }
        }
        Kind::PhaseSwitched => {
            if let Some(t) = get("to_phase").and_then(Value::as_str) {
                detail.push(format!("→ {}", v(t)));
            }
        }
        _ => {
            if let Some(st) = ev.status.as_deref() {
                detail.push(v(st).into_owned());
            }
        }
    }
    let name = v(&ev.name);
    let name = if ev.kind.is_milestone() {
        name.bold().to_string()
    } else {
        name.into_owned()
    };
    format!(
        "{} {} {:<14} {:<18} {}",
        time.dimmed(),
        v(run).color(color),
        at,
        name,
        detail.join("  ")
    )
}
