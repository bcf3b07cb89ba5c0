//! Whether a run is still going. A log cannot tell a run in progress from one whose runner died:
//! both end in a non-terminal event. The store probes the run's lock (a live runner holds it)
//! and passes the answer in as `Liveness`, with the caller's `now`; this module turns them and
//! the log's status into the state commands report (docs/runner.md, "Run states").

use serde::Serialize;

use crate::decode::timestamp::Ts;
use crate::fold::run_state::{RunState, Status};

/// What the lock beside a log says about its writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    /// A process holds the lock: a runner is writing the log.
    Alive,
    /// The lock file is there (a loopctl runner wrote this log) and no process holds it.
    Dead,
    /// No lock file (aif-loop, Avenor streams, bare files): nothing says whether a writer lives.
    Unknown,
}

/// A run's state as commands report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunCondition {
    /// Not ended, and its runner is alive or cannot be known (a log without a lock keeps the
    /// status it logged).
    Running,
    /// Not ended, and its runner is gone (killed, crashed, the machine rebooted):
    /// `loopctl resume` continues it.
    Interrupted,
    Completed,
    Stopped,
    Failed,
}

impl RunCondition {
    pub fn of(status: Status, runner: Liveness) -> RunCondition {
        match (status, runner) {
            (Status::Running, Liveness::Dead) => RunCondition::Interrupted,
            (Status::Running, _) => RunCondition::Running,
            (Status::Completed, _) => RunCondition::Completed,
            (Status::Stopped, _) => RunCondition::Stopped,
            (Status::Failed, _) => RunCondition::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunCondition::Running => "running",
            RunCondition::Interrupted => "interrupted",
            RunCondition::Completed => "completed",
            RunCondition::Stopped => "stopped",
            RunCondition::Failed => "failed",
        }
    }
}

/// What commands report about a run: its state, and how long an interrupted run has been
/// quiet (only then: the reports of every other run stay the same from one second to the next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub condition: RunCondition,
    /// What the lock said (`Unknown` for a run that has ended: nothing was asked).
    pub runner: Liveness,
    pub idle_ms: Option<u64>,
}

impl Standing {
    pub fn of(s: &RunState, runner: Liveness, now: Ts) -> Standing {
        let condition = RunCondition::of(s.status, runner);
        Standing {
            condition,
            runner,
            idle_ms: idle_ms(s, now).filter(|_| condition == RunCondition::Interrupted),
        }
    }

    pub fn interrupted(&self) -> bool {
        self.condition == RunCondition::Interrupted
    }
}

/// Milliseconds from a run's last event to `now`, while it has not ended.
pub fn idle_ms(s: &RunState, now: Ts) -> Option<u64> {
    let last = s.updated_at.filter(|_| !s.is_terminal())?;
    Some(u64::try_from(now.0.saturating_sub(last.0)).unwrap_or(0))
}

/// The line that tells a user an interrupted run can go on: `run` names it, `resume` is the
/// command that continues it.
pub fn interrupted_note(run: &str, idle: Option<u64>, resume: &str) -> String {
    let since = idle.map_or(String::new(), |ms| {
        format!(
            ", last event {} ago",
            crate::analysis::measures::duration(ms)
        )
    });
    format!("{run} is interrupted (no runner holds its lock{since}): `{resume}` continues it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_dead_runner_interrupts_a_running_run() {
        use Liveness::*;
        for (status, runner, want) in [
            (Status::Running, Alive, "running"),
            (Status::Running, Unknown, "running"),
            (Status::Running, Dead, "interrupted"),
            (Status::Completed, Dead, "completed"),
            (Status::Stopped, Alive, "stopped"),
            (Status::Failed, Dead, "failed"),
        ] {
            assert_eq!(RunCondition::of(status, runner).as_str(), want);
        }
    }

    #[test]
    fn idle_time_is_for_runs_that_have_not_ended() {
        let mut s = RunState::new("r");
        assert_eq!(idle_ms(&s, Ts(5000)), None);
        s.updated_at = Some(Ts(1000));
        assert_eq!(idle_ms(&s, Ts(5000)), Some(4000));
        assert_eq!(idle_ms(&s, Ts(0)), Some(0));
        s.status = Status::Stopped;
        assert_eq!(idle_ms(&s, Ts(5000)), None);
        s.status = Status::Running;
        let st = |runner| Standing::of(&s, runner, Ts(5000)).idle_ms;
        assert_eq!(st(Liveness::Dead), Some(4000));
        assert_eq!((st(Liveness::Alive), st(Liveness::Unknown)), (None, None));
        assert_eq!(
            interrupted_note("r", Some(2 * 86_400_000 + 3_600_000), "loopctl resume r"),
            "r is interrupted (no runner holds its lock, last event 2d 01h ago): `loopctl resume r` continues it"
        );
    }
}
