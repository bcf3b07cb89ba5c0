//! Cancellation and the run's deadline: SIGINT/SIGTERM/SIGHUP and `--timeout` reach the running
//! phase's process group, then the loop.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Time a phase gets to exit after the signal before its group is killed.
const GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// Cancelled by this signal.
    Cancelled(i32),
    Timeout,
}

#[derive(Default)]
struct Ctl {
    interrupt: Option<Interrupt>,
    pgid: Option<i32>,
    done: bool,
}

#[derive(Default)]
pub struct Control {
    ctl: Mutex<Ctl>,
    cv: Condvar,
    /// Where the running phase's group is noted for whoever reopens the run after this
    /// runner dies (`orphan`).
    group_note: Option<PathBuf>,
}

fn signal_group(pgid: i32, sig: Signal) {
    let _ = killpg(Pid::from_raw(pgid), sig);
}

impl Control {
    /// A control that notes each phase's process group in `file` while it runs.
    pub fn noting_groups(file: PathBuf) -> Control {
        Control {
            group_note: Some(file),
            ..Control::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ctl> {
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the signal watcher and, with a deadline, the timer. Both end with the run.
    pub fn install(self: &Arc<Self>, deadline: Option<Instant>) -> std::io::Result<()> {
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            for sig in signals.forever() {
                let signal = Signal::try_from(sig).unwrap_or(Signal::SIGTERM);
                let repeated = me.lock().interrupt.is_some();
                // A second signal kills the phase at once.
                me.interrupt(
                    Interrupt::Cancelled(sig),
                    if repeated { Signal::SIGKILL } else { signal },
                );
            }
        });
        if let Some(deadline) = deadline {
            let me = Arc::clone(self);
            std::thread::spawn(move || {
                let mut g = me.lock();
                loop {
                    let now = Instant::now();
                    if g.done || g.interrupt.is_some() {
                        return;
                    }
                    if now >= deadline {
                        break;
                    }
                    g = me
                        .cv
                        .wait_timeout(g, deadline - now)
                        .map_or_else(|p| p.into_inner().0, |r| r.0);
                }
                drop(g);
                me.interrupt(Interrupt::Timeout, Signal::SIGTERM);
            });
        }
        Ok(())
    }

    fn interrupt(self: &Arc<Self>, why: Interrupt, sig: Signal) {
        let pgid = {
            let mut g = self.lock();
            g.interrupt.get_or_insert(why);
            g.pgid
        };
        self.cv.notify_all();
        if let Some(pgid) = pgid {
            signal_group(pgid, sig);
            if sig != Signal::SIGKILL {
                let me = Arc::clone(self);
                std::thread::spawn(move || {
                    std::thread::sleep(GRACE);
                    if me.lock().pgid == Some(pgid) {
                        signal_group(pgid, Signal::SIGKILL);
                    }
                });
            }
        }
    }

    pub fn interrupted(&self) -> Option<Interrupt> {
        self.lock().interrupt
    }

    /// Records the running phase's process group; signals it at once if the run was already
    /// interrupted (a signal that arrived while it was being spawned).
    pub fn set_group(&self, pgid: i32) {
        if let Some(file) = &self.group_note {
            crate::after_crash::note(file, pgid);
        }
        let pending = {
            let mut g = self.lock();
            g.pgid = Some(pgid);
            g.interrupt
        };
        if pending.is_some() {
            signal_group(pgid, Signal::SIGTERM);
        }
    }

    pub fn clear_group(&self) {
        self.lock().pgid = None;
        if let Some(file) = &self.group_note {
            crate::after_crash::forget(file);
        }
    }

    /// Sleeps up to `d`; false when interrupted first.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        let mut g = self.lock();
        loop {
            if g.interrupt.is_some() {
                return false;
            }
            let now = Instant::now();
            if now >= end {
                return true;
            }
            g = self
                .cv
                .wait_timeout(g, end - now)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
        }
    }

    pub fn finish(&self) {
        self.lock().done = true;
        self.cv.notify_all();
    }
}
