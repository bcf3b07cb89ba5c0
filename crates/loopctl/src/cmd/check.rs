use clap::Args as ClapArgs;
use loopctl_store::snapshot::Prior;
use serde_json::json;

use super::Ctx;
use crate::{exit, output};

/// Report the integrity of a log: events by dialect and type, torn tail, damaged lines, seq
/// gaps/duplicates/reordering, and whether run.json agrees with the log.
///
/// The whole report, every finding included, goes to stdout in order (`check RUN > report.txt`
/// keeps it all).
///
/// Exit code: 0 clean; 1 findings (anything in the log, a log that holds no event, or a
/// run.json that is damaged, unreadable or disagrees with the log); 2 the log could not be read.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl check                             # the newest run under the root\n  loopctl check runs/a/history.jsonl --json  # every finding, with line and byte"
)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Print the report as one JSON object: counts by dialect and type, every finding (line,
    /// byte offset, kind, reason) and whether run.json agrees with the log.
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let run = ctx.target(&a.target)?;
    // With no state file to compare against, the run states themselves are not needed: the
    // replay only counts and checks (same statistics and findings, less work per event).
    // Anything there counts, even what cannot be read (a symlink loop), to be reported.
    let compare = run.run_id.is_some()
        || run
            .run_json
            .as_deref()
            .is_some_and(|p| p.symlink_metadata().is_ok());
    let rebuilt = if compare {
        ctx.rebuild(&run, false)?
    } else {
        ctx.count(&run)?
    };
    // The run whose state file is compared, named as status names it; counting alone
    // compares none (its states hold no times to choose one by).
    if let Some(s) = rebuilt.state.as_ref().filter(|_| compare) {
        ctx.note_one_of(&run, rebuilt.outcome.runs.len(), &s.run_id);
    }
    let o = &rebuilt.outcome;
    let run_json_bad = !rebuilt.run_json_agrees();
    let no_event = o.stats.events == 0;
    let clean = o.findings.is_empty() && !run_json_bad && !no_event;
    if a.json {
        if no_event {
            super::no_event(&run.log);
        }
        output::json_pretty(&json!({
            "log_path": run.log,
            "clean": clean,
            "no_event": no_event,
            "run_count": o.runs.len(),
            "stats": o.stats,
            "findings": o.findings,
            "run_json": {
                "path": rebuilt.state_path.as_ref().or(run.run_json.as_ref()),
                "prior": rebuilt.prior,
                "prior_detail": rebuilt.prior_detail,
                "agrees": !run_json_bad,
                "differences": rebuilt.differences,
            },
        }));
    } else {
        let s = &o.stats;
        let mut text = format!(
            "{}\n  {} lines: {} events in {} run(s), {} blank, {} skipped\n",
            run.log.display(),
            s.lines,
            s.events,
            o.runs.len(),
            s.blank,
            s.skipped
        );
        let dialects: Vec<String> = s
            .by_dialect
            .iter()
            .map(|(d, n)| format!("{d} {n}"))
            .collect();
        text += &format!(
            "  dialects: {}\n",
            if dialects.is_empty() {
                "-".into()
            } else {
                dialects.join(", ")
            }
        );
        let mut by: Vec<_> = s.by_event.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        text += &format!(
            "  events: {}\n",
            by.iter()
                .map(|(e, n)| format!("{} {n}", loopctl_core::render::visible(e)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if s.unknown > 0 {
            text += &format!(
                "  {} event(s) of types loopctl does not know (kept)\n",
                s.unknown
            );
        }
        if !o.findings.is_empty() {
            text += &format!("  findings ({}):\n", o.findings.len());
            for f in &o.findings {
                text += &format!("    {}\n", output::finding(&run.log, f));
            }
        }
        let rj = match rebuilt.prior {
            Prior::Missing => "none".to_string(),
            Prior::Snapshot if rebuilt.differences.is_empty() => "agrees with the log".into(),
            Prior::Snapshot => "a loopctl snapshot behind the log".into(),
            Prior::Mismatch => format!(
                "a snapshot that does not match the log: {}",
                rebuilt.prior_detail.clone().unwrap_or_default()
            ),
            Prior::Foreign if rebuilt.differences.is_empty() => "agrees with the log".into(),
            Prior::Foreign => "disagrees with the log".into(),
            Prior::Damaged => format!(
                "damaged ({})",
                rebuilt.prior_detail.clone().unwrap_or_default()
            ),
            Prior::Unreadable => format!(
                "{}; the log was read alone",
                rebuilt.prior_detail.clone().unwrap_or_default()
            ),
        };
        let file = rebuilt
            .state_path
            .as_deref()
            .and_then(std::path::Path::file_name)
            .map_or("run.json".into(), |n| n.to_string_lossy());
        text += &format!("  {file}: {rj}\n");
        for d in &rebuilt.differences {
            text += &format!("    {}\n", loopctl_core::render::visible(d));
        }
        let mut verdict = Vec::new();
        if no_event {
            verdict.push("the log holds no event".to_string());
        }
        if !o.findings.is_empty() {
            verdict.push(format!("{} finding(s) in the log", o.findings.len()));
        }
        if run_json_bad {
            verdict.push(
                "run.json does not agree with the log: `loopctl recover` rewrites it from the log"
                    .to_string(),
            );
        }
        if clean {
            text += "  clean\n";
        } else {
            text += &format!("  not clean: {}\n", verdict.join("; "));
        }
        output::print(&text);
    }
    super::free_at_exit(rebuilt);
    Ok(if clean { exit::OK } else { exit::FINDINGS })
}
