use clap::Args as ClapArgs;
use loopctl_store::read::for_each_event;
use owo_colors::OwoColorize;

use super::Ctx;
use crate::{exit, output};

/// Show a run's event timeline. --json prints the normalised events as native NDJSON (any
/// dialect in, one format out); --raw prints the lines exactly as the log has them.
#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Only events of this run (for logs holding several).
    #[arg(long, value_name = "RUN_ID")]
    run_id: Option<String>,
    /// Print the events as NDJSON in loopctl's native format, one per line.
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    #[arg(long)]
    raw: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let run = ctx.resolve(a.target.run.as_deref())?;
    let mut out = String::new();
    let mut bad = 0usize;
    let mut events = 0usize;
    for_each_event(&run.log, ctx.read.max_line, |pos, raw, ev| {
        let ev = match ev {
            Ok(ev) => ev,
            Err(reason) => {
                bad += 1;
                output::warn(&format!(
                    "{}:{}: byte {}: {reason}",
                    run.log.display(),
                    pos.line,
                    pos.offset
                ));
                return;
            }
        };
        events += 1;
        let id = ev.run_id.as_deref().unwrap_or(&run.name);
        if a.run_id.as_deref().is_some_and(|want| want != id) {
            return;
        }
        if a.raw {
            out.push_str(&String::from_utf8_lossy(raw));
            out.push('\n');
        } else if a.json {
            let mut ev = ev;
            ev.run_id.get_or_insert_with(|| run.name.clone().into());
            out.push_str(&ev.to_native_line());
            out.push('\n');
        } else {
            let ts = ev
                .ts
                .map(|t| t.to_rfc3339())
                .unwrap_or_else(|| "-".repeat(24));
            let at = format!(
                "{}{}",
                ev.iteration.map_or("-".into(), |i| i.to_string()),
                ev.phase
                    .as_deref()
                    .map_or(String::new(), |p| format!("/{p}"))
            );
            let mut summary = Vec::new();
            let f = &ev.facts;
            if let Some(s) = f.score {
                summary.push(format!("score {}", output::score(s)));
            }
            if let Some(p) = f.passed {
                summary.push(if p { "passed".into() } else { "failed".into() });
            }
            if let Some(fl) = f.failed.as_ref().filter(|v| !v.is_empty()) {
                summary.push(format!("failed: {}", fl.join(",")));
            }
            if let Some(r) = &f.reason {
                summary.push(format!("reason: {r}"));
            }
            let name = if ev.kind.is_milestone() {
                ev.name.bold().to_string()
            } else {
                ev.name.to_string()
            };
            out.push_str(&format!(
                "{}  {:>5}  {:<6} {:<12} {} {}\n",
                ts.dimmed(),
                ev.seq.map_or(String::new(), |s| format!("#{s}")),
                at,
                ev.step.as_deref().unwrap_or(""),
                name,
                summary.join("  ").dimmed()
            ));
        }
        if out.len() > 1 << 16 {
            output::print(&out);
            out.clear();
        }
    })?;
    output::print(&out);
    if events == 0 {
        return Ok(super::no_event(&run.log));
    }
    Ok(if bad > 0 && ctx.strict {
        exit::FINDINGS
    } else {
        exit::OK
    })
}
