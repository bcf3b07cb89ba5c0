use std::collections::{BTreeSet, HashMap};

use clap::Args as ClapArgs;
use loopctl_core::fold::live_runs::LiveRuns;
use loopctl_core::fold::replay::{Finding, seq_step};
use loopctl_store::read::for_each_event;

use super::Ctx;
use super::timeline::{Colors, human};
use crate::{exit, output};

/// Show a run's event timeline, one line per event.
///
/// Each line as `tail` prints it: time, seq, run, iteration and step, event, and what it says
/// (stop reason, exit code, duration, score). A log
/// holding several runs shows every run's events, each line naming its run; RUN as a run id
/// or alias, or --run-id, shows one. --json prints the normalised events as native NDJSON (any
/// dialect in, one format out); --raw prints the lines exactly as the log has them. A line
/// repeating its run's last seq is reported on stderr and not shown, as replay skips it.
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl --root examples history checkout-api  # a run's timeline, by alias\n  loopctl history merged.jsonl --run-id r1  # one run of a log holding several\n  loopctl history --json | jq .event        # normalised events, any dialect"
)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Print the events as NDJSON in loopctl's native format, one per line.
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    /// Print the lines exactly as the log has them (any dialect), one per event.
    #[arg(long)]
    raw: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let run = ctx.target(&a.target)?;
    let mut out = String::new();
    let mut bad = 0usize;
    let mut said = output::Findings::default();
    let mut events = 0usize;
    let mut runs = LiveRuns::default();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut shown = 0usize;
    let mut colors = Colors::default();
    // Per run: events and last seq, for the seq checks replay makes. An event repeating its
    // run's last seq is reported and not shown, in every format: replay does not apply it, and
    // a consumer of --json would count it twice.
    let mut seqs: HashMap<String, (u64, Option<u64>)> = HashMap::new();
    for_each_event(&run.log, ctx.read.max_line, |pos, raw, ev| {
        let finding = |kind, reason| Finding {
            line: pos.line,
            offset: pos.offset,
            kind,
            reason,
            run_id: None,
        };
        let ev = match ev {
            Ok(ev) => ev,
            Err((kind, reason)) => {
                bad += 1;
                said.warn(&run.log, &output::finding(&run.log, &finding(kind, reason)));
                return;
            }
        };
        events += 1;
        let id = ev.run_id.as_deref().unwrap_or(&run.name);
        if run.run_id.as_deref().is_some_and(|want| want != id) {
            if !seen.contains(id) {
                seen.insert(id.to_string());
            }
            return;
        }
        shown += 1;
        let (count, last) = seqs.entry(id.to_string()).or_default();
        let step = seq_step(*count, *last, ev.seq);
        if let Some((kind, reason)) = step.finding {
            bad += 1;
            said.warn(&run.log, &output::finding(&run.log, &finding(kind, reason)));
        }
        if step.duplicate {
            return;
        }
        *count += 1;
        *last = step.keep.or(ev.seq).or(*last);
        if a.raw {
            out.push_str(&String::from_utf8_lossy(raw));
            out.push('\n');
        } else if a.json {
            let mut ev = ev;
            ev.run_id.get_or_insert_with(|| run.name.clone().into());
            out.push_str(&ev.to_native_line());
            out.push('\n');
        } else {
            runs.apply(id, &ev);
            let Some(state) = runs.state(id) else { return };
            let color = colors.of(id);
            out.push_str(&human(&ev, id, state, color, true, true));
            out.push('\n');
        }
        if out.len() > 1 << 16 {
            output::print(&out);
            out.clear();
        }
    })?;
    output::print(&out);
    said.finish();
    if events == 0 {
        return Ok(super::no_event(&run.log));
    }
    if let (Some(want), 0) = (run.run_id.as_deref(), shown) {
        let held: Vec<String> = seen.into_iter().collect();
        anyhow::bail!(
            "{}: no run {want:?} in this log (it holds: {})",
            run.log.display(),
            held.join(", ")
        );
    }
    if bad > 0 && ctx.strict {
        output::error(&format!(
            "{bad} finding(s) in {} (--strict)",
            run.log.display()
        ));
        return Ok(exit::FINDINGS);
    }
    Ok(exit::OK)
}
