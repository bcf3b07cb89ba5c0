//! The postmortem report rendered: terminal text, Markdown and JSON. The model and how it is
//! built from a run's state, trace and verdict are in `analysis::postmortem`.

use std::fmt::Write as _;

use crate::analysis::liveness::RunCondition;
use crate::analysis::measures::{duration, score};
use crate::analysis::postmortem::*;
use crate::fold::trace::{ErrorRecord, Escalation, Evaluation, Retry, Transition};
use crate::render::{usage_text, visible as v, visible};

impl Report {
    /// The report; a long timeline shows its first and last `TIMELINE_EDGE` iterations in text
    /// and Markdown.
    pub fn render(&self, format: Format) -> String {
        self.render_full(format, false)
    }

    /// `render`, with every iteration of the timeline when `full` is true.
    pub fn render_full(&self, format: Format, full: bool) -> String {
        match format {
            Format::Text => self.text(full),
            Format::Markdown => self.markdown(full),
            Format::Json => self.to_json(),
        }
    }

    /// Pretty JSON with a final newline; field names are the struct's.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }

    fn headline(&self) -> String {
        let s = &self.stop;
        if s.running {
            let what = if s.status == RunCondition::Interrupted.as_str() {
                "interrupted: no runner holds its lock"
            } else {
                "still running"
            };
            return format!(
                "{what} (last event {})",
                s.last_event_at.map_or("-".into(), |t| t.to_string())
            );
        }
        let mut t = s.status.clone();
        if !s.reason.is_empty() {
            let _ = write!(t, ": {}", s.reason);
        }
        if let Some(d) = &s.detail {
            let _ = write!(t, " ({d})");
        }
        if let Some(at) = s.at {
            let _ = write!(t, " at {at}");
        }
        t
    }

    fn iterations_text(&self) -> String {
        let i = &self.iterations;
        let mut t = match i.max {
            Some(m) => format!("{} of {m}", i.reached),
            None => i.reached.to_string(),
        };
        let _ = write!(t, ", {} completed", i.completed);
        t
    }

    /// Terminal text (no colours: the CLI adds none, so the text is the same everywhere). Text
    /// from the log is escaped (`visible`), so a name with a newline stays on its line.
    pub fn to_text(&self) -> String {
        self.text(false)
    }

    fn text(&self, full: bool) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "Postmortem of {} ({})",
            v(&self.run_id),
            v(&self.task_alias)
        );
        let _ = writeln!(o, "  outcome     {}", v(&self.headline()));
        let _ = writeln!(o, "  iterations  {}", self.iterations_text());
        if let Some(w) = self.stop.wall_ms {
            let _ = writeln!(
                o,
                "  wall time   {} ({})",
                duration(w),
                events(self.stop.events)
            );
        }
        if let Some(e) = &self.stop.error {
            let _ = writeln!(o, "  error       {}", clip(e, 200));
        }

        if !self.timeline.is_empty() {
            let _ = writeln!(o, "\nTimeline");
            let width = self.name_width.unwrap_or(5).clamp(5, 24);
            let (head, elided, tail) = timeline_parts(&self.timeline, self.elided, full);
            for (i, r) in head.iter().chain(tail).enumerate() {
                if i == head.len() && elided > 0 {
                    let _ = writeln!(o, "  {}", elided_line(elided));
                }
                let _ = writeln!(
                    o,
                    "  iteration {}{}",
                    r.iteration.map_or("-".into(), |i| i.to_string()),
                    r.duration_ms
                        .map_or(String::new(), |d| format!("  ({})", duration(d)))
                );
                for p in &r.phases {
                    let line = format!(
                        "    {:<width$}  #{:<2} {:>8}  {:<7}{}",
                        clip(&v(&p.name), width),
                        p.attempt,
                        p.duration_ms.map_or("-".into(), duration),
                        p.outcome,
                        p.detail
                            .as_deref()
                            .map_or(String::new(), |d| format!(" {}", clip(d, 100)))
                    );
                    let _ = writeln!(o, "{}", line.trim_end());
                }
                for e in &r.evaluations {
                    let _ = writeln!(o, "    {:<width$}  {}", "score", v(&score_line(e)));
                }
            }
        }

        if !self.time_per_phase.is_empty() {
            let _ = writeln!(o, "\nTime per phase");
            let width = self
                .time_per_phase
                .iter()
                .map(|p| p.name.chars().count())
                .max()
                .unwrap_or(5)
                .clamp(5, 24);
            for p in &self.time_per_phase {
                let _ = writeln!(
                    o,
                    "  {:<width$}  {:>8}  {:>5.1}%  {}×",
                    clip(&v(&p.name), width),
                    duration(p.total_ms),
                    p.share_pct,
                    p.count
                );
            }
        }

        let sc = &self.scores;
        if !sc.points.is_empty() {
            let _ = writeln!(o, "\nScores  {}", score_spark(sc, full));
            let line = score_items(&sc.points, full, |p| {
                let phase = match &*p.quality_phase {
                    "" => String::new(),
                    q => format!("/{}", v(q)),
                };
                format!("{}{phase} {}", p.iteration, score(p.score.unwrap_or(0.0)))
            });
            let _ = writeln!(o, "  {}", line.join("  →  "));
            if let Some(b) = sc.best {
                let _ = writeln!(o, "  best {}", score(b));
            }
        }

        if let Some(d) = &self.distance_to_success {
            let _ = writeln!(o, "\nDistance to success");
            for line in distance_lines(d) {
                let _ = writeln!(o, "  {}", v(&line));
            }
        }

        if self.retries.count > 0 || self.errors.count > 0 {
            let _ = writeln!(o, "\nRetries and errors");
            let _ = writeln!(
                o,
                "  {} retr{}, {} error(s)",
                self.retries.count,
                if self.retries.count == 1 { "y" } else { "ies" },
                self.errors.count
            );
            for r in &self.retries.items {
                let _ = writeln!(o, "  retry  {}", v(&retry_text(r)));
            }
            for e in &self.errors.items {
                let _ = writeln!(o, "  error  {}", clip(&error_text(e), 160));
            }
            if let Some(l) = &self.errors.last_phase_error {
                let _ = writeln!(o, "  last phase error: {}", clip(l, 200));
            }
        }

        if !self.escalations.is_empty() || !self.transitions.is_empty() {
            let _ = writeln!(o, "\nDecisions");
            for t in &self.transitions {
                let _ = writeln!(o, "  transition  {}", v(&transition_text(t)));
            }
            for e in &self.escalations {
                let _ = writeln!(o, "  escalated   {}", clip(&escalation_text(e), 160));
            }
        }

        let v = &self.stagnation;
        let _ = writeln!(
            o,
            "\nStagnation: {}",
            if v.stagnating {
                "STAGNATING"
            } else {
                "healthy"
            }
        );
        for f in &v.findings {
            let mark = if f.triggered {
                "[x]"
            } else if f.applicable {
                "[ ]"
            } else {
                "[-]"
            };
            let _ = writeln!(
                o,
                "  {mark} {:<16} {}",
                f.detector.name(),
                visible(&f.summary)
            );
            if f.triggered {
                let ev = evidence(f);
                if !ev.is_empty() {
                    let _ = writeln!(o, "      {:<16} {}", "", visible(&ev));
                }
            }
        }

        if let Some(t) = &self.tokens {
            let _ = writeln!(o, "\nTokens: {} in, {} out", t.input, t.output);
        }
        if let Some(u) = &self.usage {
            usage_text::text(&mut o, u);
        }
        o
    }

    /// Markdown to paste into an issue.
    pub fn to_markdown(&self) -> String {
        self.markdown(false)
    }

    fn markdown(&self, full: bool) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "## Postmortem: `{}`\n", md(&self.run_id));
        let _ = writeln!(o, "| | |\n|---|---|");
        let _ = writeln!(o, "| Alias | `{}` |", md(&self.task_alias));
        let _ = writeln!(o, "| Status | {} |", md(&self.stop.status));
        if !self.stop.reason.is_empty() {
            let _ = writeln!(o, "| Stop reason | `{}` |", md(&self.stop.reason));
        }
        if let Some(d) = &self.stop.detail {
            let _ = writeln!(o, "| Detail | {} |", md(d));
        }
        match (self.stop.running, self.stop.at) {
            (true, _) => {
                let _ = writeln!(
                    o,
                    "| Stopped | still running (last event {}) |",
                    self.stop
                        .last_event_at
                        .map_or("-".into(), |t| t.to_string())
                );
            }
            (false, Some(at)) => {
                let _ = writeln!(o, "| Stopped at | {at} |");
            }
            _ => {}
        }
        let _ = writeln!(o, "| Iterations | {} |", self.iterations_text());
        if let Some(w) = self.stop.wall_ms {
            let _ = writeln!(
                o,
                "| Wall time | {} ({}) |",
                duration(w),
                events(self.stop.events)
            );
        }
        if let Some(e) = &self.stop.error {
            let _ = writeln!(o, "| Error | {} |", md(e));
        }
        if let Some(t) = &self.tokens {
            let _ = writeln!(o, "| Tokens | {} in, {} out |", t.input, t.output);
        }

        if let Some(d) = &self.distance_to_success {
            let _ = writeln!(o, "\n### Distance to success\n");
            for line in distance_lines(d) {
                let _ = writeln!(o, "- {}", md(&line));
            }
        }

        if !self.timeline.is_empty() {
            let _ = writeln!(o, "\n### Timeline\n");
            let _ = writeln!(
                o,
                "| Iteration | Phase | Attempt | Duration | Outcome | Notes |\n|---|---|---|---|---|---|"
            );
            let (head, elided, tail) = timeline_parts(&self.timeline, self.elided, full);
            for (i, r) in head.iter().chain(tail).enumerate() {
                if i == head.len() && elided > 0 {
                    let _ = writeln!(o, "| | *{}* | | | | |", elided_line(elided));
                }
                let it = r.iteration.map_or("-".into(), |i| i.to_string());
                for p in &r.phases {
                    let _ = writeln!(
                        o,
                        "| {it} | {} | {} | {} | {} | {} |",
                        md(&p.name),
                        p.attempt,
                        p.duration_ms.map_or("-".into(), duration),
                        p.outcome,
                        md(&p.detail.clone().unwrap_or_default())
                    );
                }
                for e in &r.evaluations {
                    let _ = writeln!(
                        o,
                        "| {it} | *evaluation{}* | | | {} | score {}{} |",
                        md(&in_phase(&e.quality_phase)),
                        pass_word(e.passed),
                        score(e.score.unwrap_or(0.0)),
                        if e.failed_rules().is_empty() {
                            String::new()
                        } else {
                            format!("; failed: {}", md(&e.failed_rules().join(", ")))
                        }
                    );
                }
            }
        }

        if !self.time_per_phase.is_empty() {
            let _ = writeln!(o, "\n### Time per phase\n");
            let _ = writeln!(o, "| Phase | Total | Share | Runs |\n|---|---:|---:|---:|");
            for p in &self.time_per_phase {
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.1}% | {} |",
                    md(&p.name),
                    duration(p.total_ms),
                    p.share_pct,
                    p.count
                );
            }
        }

        let sc = &self.scores;
        if !sc.points.is_empty() {
            let _ = writeln!(o, "\n### Score trajectory\n");
            let _ = writeln!(
                o,
                "`{}` {} (best {})\n",
                score_spark(sc, full),
                score_items(&sc.points, full, |p| score(p.score.unwrap_or(0.0))).join(" → "),
                sc.best.map_or("-".into(), score)
            );
            let _ = writeln!(
                o,
                "| Iteration | Phase | Score | Passed | Failed rules |\n|---|---|---:|---|---|"
            );
            let (head, elided, tail) = score_parts(&sc.points, full);
            for (i, p) in head.iter().chain(tail).enumerate() {
                if i == head.len() && elided > 0 {
                    let _ = writeln!(o, "| | *{}* | | | |", elided_scores(elided));
                }
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} |",
                    p.iteration,
                    md(&p.quality_phase),
                    score(p.score.unwrap_or(0.0)),
                    pass_word(p.passed),
                    md(&p.failed_rules().join(", "))
                );
            }
        }

        if self.retries.count > 0 || self.errors.count > 0 {
            let _ = writeln!(o, "\n### Retries and errors\n");
            let _ = writeln!(
                o,
                "{} retries, {} errors.\n",
                self.retries.count, self.errors.count
            );
            for r in &self.retries.items {
                let _ = writeln!(o, "- retry: {}", md(&retry_text(r)));
            }
            for e in &self.errors.items {
                let _ = writeln!(o, "- error: {}", md(&error_text(e)));
            }
            if let Some(l) = &self.errors.last_phase_error {
                let _ = writeln!(
                    o,
                    "\nLast phase error:\n\n```\n{}\n```",
                    l.replace("```", "'''")
                );
            }
        }

        if !self.escalations.is_empty() || !self.transitions.is_empty() {
            let _ = writeln!(o, "\n### Decisions\n");
            for t in &self.transitions {
                let _ = writeln!(o, "- transition: {}", md(&transition_text(t)));
            }
            for e in &self.escalations {
                let _ = writeln!(o, "- escalated: {}", md(&escalation_text(e)));
            }
        }

        let v = &self.stagnation;
        let _ = writeln!(
            o,
            "\n### Stagnation\n\n**{}**\n",
            if v.stagnating {
                "Stagnating"
            } else {
                "Healthy"
            }
        );
        let _ = writeln!(
            o,
            "| Detector | Result | Summary | Evidence |\n|---|---|---|---|"
        );
        for f in &v.findings {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} |",
                f.detector.name(),
                if f.triggered {
                    "**triggered**"
                } else if f.applicable {
                    "ok"
                } else {
                    "n/a"
                },
                md(&f.summary),
                md(&evidence(f))
            );
        }
        if let Some(u) = &self.usage {
            usage_text::markdown(&mut o, u, md);
        }
        o
    }
}

/// The line that stands for the elided middle of a timeline.
/// The scores a text or Markdown report lists: all, or like the timeline, the first and last
/// `TIMELINE_EDGE` of a long run (a run of 26,000 evaluations is not one 500 KB line).
fn score_parts(points: &[Evaluation], full: bool) -> (&[Evaluation], usize, &[Evaluation]) {
    let n = points.len();
    if full || n <= 2 * TIMELINE_EDGE {
        return (points, 0, &[]);
    }
    let (head, rest) = points.split_at(TIMELINE_EDGE);
    (
        head,
        n - 2 * TIMELINE_EDGE,
        &rest[rest.len() - TIMELINE_EDGE..],
    )
}

/// `score_parts` rendered item by item, with the elided count in between.
fn score_items(
    points: &[Evaluation],
    full: bool,
    item: impl Fn(&Evaluation) -> String,
) -> Vec<String> {
    let (head, elided, tail) = score_parts(points, full);
    let mut v: Vec<String> = head.iter().map(&item).collect();
    if elided > 0 {
        v.push(elided_scores(elided));
    }
    v.extend(tail.iter().map(&item));
    v
}

fn elided_scores(n: usize) -> String {
    format!("... {n} score(s) elided (--full-timeline shows all) ...")
}

/// Columns of a text sparkline: a longer trajectory shows the mean of each of `SPARK_WIDTH`
/// equal runs of scores, and says so.
const SPARK_WIDTH: usize = 80;

fn score_spark(sc: &Scores, full: bool) -> String {
    let n = sc.points.len();
    if full || n <= SPARK_WIDTH {
        return sc.sparkline.clone();
    }
    let means: Vec<f64> = (0..SPARK_WIDTH)
        .map(|b| {
            let run = &sc.points[b * n / SPARK_WIDTH..(b + 1) * n / SPARK_WIDTH];
            run.iter().map(|p| p.score.unwrap_or(0.0)).sum::<f64>() / run.len().max(1) as f64
        })
        .collect();
    format!(
        "{} (each bar the mean of about {} scores)",
        sparkline(&means),
        n / SPARK_WIDTH
    )
}

fn elided_line(n: usize) -> String {
    format!("... {n} iteration(s) elided (--full-timeline shows all) ...")
}

fn distance_lines(d: &Distance) -> Vec<String> {
    let mut v = vec![
        format!(
            "{}threshold {} ({}), final score {} at iteration {}",
            d.phase
                .as_ref()
                .map_or(String::new(), |p| format!("phase {p} ")),
            score(d.threshold),
            if d.threshold_source == "default" {
                "aif-loop default"
            } else {
                "from the evaluation"
            },
            score(d.score),
            d.iteration
        ),
        format!("gap to threshold: {}", score(d.gap)),
        if d.blocking_rules.is_empty() {
            format!("blocking fail-severity rules: {}", d.blocking)
        } else {
            format!(
                "blocking fail-severity rules: {} ({})",
                d.blocking,
                d.blocking_rules.join(", ")
            )
        },
    ];
    if let (Some(p), Some(t)) = (d.rules_passed, d.rules_total) {
        v.push(format!("rules passed: {p}/{t}"));
    }
    if d.iteration_limit {
        v.push("stopped at the iteration limit short of the threshold".into());
    }
    v
}

/// ` (A)` after an evaluation, nothing for a run without phases.
fn in_phase(quality_phase: &str) -> String {
    match quality_phase {
        "" => String::new(),
        p => format!(" ({p})"),
    }
}

fn pass_word(p: Option<bool>) -> &'static str {
    match p {
        Some(true) => "pass",
        Some(false) => "fail",
        None => "-",
    }
}

fn score_line(e: &Evaluation) -> String {
    let mut t = format!(
        "{}{} {}",
        score(e.score.unwrap_or(0.0)),
        in_phase(&e.quality_phase),
        pass_word(e.passed)
    );
    if !e.failed_rules().is_empty() {
        let _ = write!(t, "; failed: {}", e.failed_rules().join(", "));
    }
    t
}

fn retry_text(r: &Retry) -> String {
    let mut t = r.at.phase.clone().unwrap_or_else(|| "?".into());
    if let Some(i) = r.at.iteration {
        let _ = write!(t, " iteration {i}");
    }
    if let (Some(a), Some(n)) = (r.attempt, r.next_attempt) {
        let _ = write!(t, " attempt {a} → {n}");
    }
    if let Some(c) = r.exit_code {
        let _ = write!(t, ", exit code {c}");
    }
    if let Some(d) = r.delay_ms {
        let _ = write!(t, ", after {}", duration(d));
    }
    t
}

fn error_text(e: &ErrorRecord) -> String {
    let mut t = String::new();
    if let Some(p) = &e.at.phase {
        let _ = write!(t, "{p} ");
    }
    if let Some(i) = e.at.iteration {
        let _ = write!(t, "(iteration {i}) ");
    }
    let _ = write!(t, "[{}] {}", e.source, e.text);
    t
}

fn transition_text(t: &Transition) -> String {
    let mut s = format!(
        "{} via {}",
        t.from.as_deref().unwrap_or("?"),
        t.source.as_deref().unwrap_or("?")
    );
    if let Some(r) = &t.rule {
        let _ = write!(s, " rule {r}");
    }
    if let Some(c) = &t.condition {
        let _ = write!(s, " ({c})");
    }
    if !t.goto.is_empty() {
        let _ = write!(s, " → {}", t.goto.join(", "));
    }
    if let Some(r) = &t.end_reason {
        let _ = write!(s, " → end: {r}");
    }
    if let Some(w) = &t.end_warning {
        let _ = write!(s, " (warning: {w})");
    }
    s
}

fn escalation_text(e: &Escalation) -> String {
    let mut s = e.question.clone().unwrap_or_else(|| "(no question)".into());
    if let Some(p) = &e.pattern {
        let _ = write!(s, "; pattern: {p}");
    }
    if let Some(n) = e.attempts {
        let _ = write!(s, "; {n} attempt(s)");
    }
    s
}

/// At most `n` characters, with `…` when cut; newlines become spaces.
/// `s` on one line (a line break as a space, other control characters escaped), at most `n`
/// characters.
pub(crate) fn clip(s: &str, n: usize) -> String {
    let one: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let one = v(&one).into_owned();
    if one.chars().count() <= n {
        return one;
    }
    let mut t: String = one.chars().take(n.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Safe inside a Markdown table cell (other control characters escaped).
pub(crate) fn md(s: &str) -> String {
    let s = s
        .replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ");
    v(&s).into_owned()
}

/// "1 event", "30 events".
fn events(n: u64) -> String {
    if n == 1 {
        "1 event".into()
    } else {
        format!("{n} events")
    }
}
