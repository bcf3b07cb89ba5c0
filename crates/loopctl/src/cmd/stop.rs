//! `loopctl stop`: stop a live runner, or mark an idle run stopped.

use std::time::Duration;

use clap::Args as ClapArgs;
use loopctl_runner::manage::{self, Stopped};
use serde_json::json;

use super::Ctx;
use crate::output;

/// Stop a run. A live runner gets SIGTERM: it stops the running phase's process group, records
/// `user_stop` in the log and exits (sentinel KILLED, 130). A run with no runner (interrupted)
/// gets a `stopped` event with reason user_stop. A run that already ended is left alone.
/// Exit 1 when a live runner still holds the run after --wait seconds (it was signalled and
/// goes on stopping: `loopctl status` tells when it is done).
#[derive(ClapArgs)]
#[command(
    after_help = "Examples:\n  loopctl stop                              # the current run (current.json, else the newest)\n  loopctl stop fix-the-tests --reason 'wrong branch'\n  loopctl stop r-20261120-093000 --wait 60 --json"
)]
pub struct Args {
    #[command(flatten)]
    target: super::RunArg,
    /// Why: kept as the stop's detail in the log and run.json.
    #[arg(long)]
    reason: Option<String>,
    /// Seconds to wait for a live runner to let go of the run.
    #[arg(long, default_value_t = 30)]
    wait: u64,
    /// Print what was done as one JSON object (run_id, log_path, dir, result, message).
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> anyhow::Result<u8> {
    let run = ctx.target(&a.target)?;
    let r = manage::stop(
        &ctx.root,
        &run,
        a.reason.as_deref(),
        Duration::from_secs(a.wait),
    )?;
    // The run's id, from its log (the stop may have just added to it).
    let run_id = match &r {
        Stopped::AlreadyOver(s) => Some(s.run_id.clone()),
        _ => ctx.count(&run).ok().and_then(|b| b.state.map(|s| s.run_id)),
    };
    // Name the run; the folder (or log) too when its name is not the run's.
    let name = match &run_id {
        Some(id) if *id != run.name => {
            let holder = if run.dir.is_some() { "folder" } else { "log" };
            format!("{id} ({holder} {})", run.name)
        }
        _ => run.name.clone(),
    };
    let (what, code) = match &r {
        Stopped::Live { pid } => (format!("stopped the runner of {} (pid {pid})", name), 0),
        Stopped::StillRunning { pid } => (
            format!(
                "signalled the runner of {} (pid {pid}) but it still holds the run after {}s",
                name, a.wait
            ),
            1,
        ),
        Stopped::Idle { ended_group } => (
            format!(
                "marked {} stopped (user_stop); no runner was running{}",
                name,
                ended_group.map_or_else(String::new, |g| format!(
                    "; ended the phase it left running (process group {g})"
                ))
            ),
            0,
        ),
        Stopped::AlreadyOver(s) => (
            format!(
                "{} already ended: {} ({}); nothing to stop",
                name,
                s.status.as_str(),
                s.stop.reason
            ),
            0,
        ),
    };
    if a.json {
        let (kind, ended) = match r {
            Stopped::Live { .. } => ("live", None),
            Stopped::StillRunning { .. } => ("still_running", None),
            Stopped::Idle { ended_group } => ("idle", ended_group),
            Stopped::AlreadyOver(_) => ("already_over", None),
        };
        output::json_pretty(&json!({
            "run_id": run_id, "log_path": run.log, "dir": run.dir,
            "result": kind, "message": what, "ended_phase_group": ended,
        }));
    } else {
        output::print(&format!("{what}\n"));
    }
    Ok(code)
}
