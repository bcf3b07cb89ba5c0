//! Avenor's sentinel file for a loop's ending, with loopctl's exit code. The status line and
//! code come from `run_exit`, the rule a reader of the log applies to the same ending.

use crate::fold::run_state::Status;
use crate::rules::ending::{Decided, Ending, ExitReason};
use crate::rules::run_exit::{EndFacts, RunExit};

/// Avenor's sentinel file and loopctl's exit code for an ending.
#[derive(Debug, Clone, PartialEq)]
pub struct Sentinel {
    pub status: &'static str,
    pub code: i32,
    pub session: String,
    pub stop_reason: String,
    pub reason: Option<String>,
    pub exit_code: Option<i64>,
    pub run_id: String,
}

impl Sentinel {
    /// The sentinel of an ending; its status line and code come from `RunExit`, the rule a
    /// reader of the log applies to the `stopped` event written for the same ending.
    pub fn for_ending(e: &Ending, session: &str, run_id: &str) -> Sentinel {
        let exit = RunExit::of(&EndFacts {
            exit_reason: Some(
                e.decided
                    .as_ref()
                    .map_or(e.reason, Decided::exit_reason)
                    .as_str(),
            ),
            reason: e.decided.as_ref().map_or("", |d| d.reason.as_str()),
            exit_code: e.exit_code,
            status: Status::Stopped,
        });
        let (stop_reason, reason, exit_code) = match (&e.decided, e.reason) {
            (Some(d), _) => (
                d.reason.clone(),
                d.detail.clone().or_else(|| d.warning.clone()),
                None,
            ),
            (None, ExitReason::Abort) => ("blocked".into(), e.label.clone(), None),
            (None, ExitReason::PhaseFailure) => (
                e.stop_reason.clone(),
                None,
                Some(e.exit_code.filter(|&c| c != 0).unwrap_or(1)),
            ),
            (None, ExitReason::Timeout) => ("timeout".into(), None, None),
            // loopctl's own code (130), whatever the phase's process died of (143 from SIGTERM,
            // 137 if it ignored it, 0 from a check cut short).
            (None, ExitReason::Cancelled) => {
                ("cancelled".into(), None, Some(i64::from(exit.code())))
            }
            (None, _) => (e.stop_reason.clone(), None, None),
        };
        Sentinel {
            status: exit.sentinel_status(),
            code: exit.code(),
            session: session.into(),
            stop_reason,
            reason,
            exit_code,
            run_id: run_id.into(),
        }
    }

    /// A loop file that failed validation: nothing ran.
    pub fn config_error(message: &str, run_id: &str) -> Sentinel {
        Sentinel {
            status: "FAILED",
            code: 1,
            session: String::new(),
            stop_reason: "config_error".into(),
            reason: Some(message.into()),
            exit_code: Some(1),
            run_id: run_id.into(),
        }
    }

    /// The file's text: status, `SESSION=`, `STOP_REASON=`, the optional lines, `RUN=`.
    /// Newlines and other control characters (a NUL from a template error) in values become
    /// spaces, so every value stays on its line and the file stays text.
    pub fn render(&self) -> String {
        let clean = |s: &str| s.replace(char::is_control, " ");
        let mut out = format!(
            "{}\nSESSION={}\nSTOP_REASON={}\n",
            self.status,
            clean(&self.session),
            clean(&self.stop_reason)
        );
        if let Some(r) = &self.reason {
            out.push_str(&format!("REASON={}\n", clean(r)));
        }
        if let Some(c) = self.exit_code {
            out.push_str(&format!("EXIT_CODE={c}\n"));
        }
        out.push_str(&format!("RUN={}\n", clean(&self.run_id)));
        out
    }
}
