//! Exit codes of loopctl's read commands, and the rule for a log that holds no event, so that
//! every command answers the same way (README, "Exit codes"; docs/cli.md). How a *run's* end
//! maps to `run`/`resume`'s exit code is the sentinel's rule, not this one.

/// Success; for `check`, a clean log.
pub const OK: u8 = 0;
/// Findings: damaged lines, seq problems, a run.json that disagrees with the log (`check`, or
/// any command under `--strict`), and a log that holds no event (always).
pub const FINDINGS: u8 = 1;
/// Usage errors, missing runs, unreadable files.
pub const ERROR: u8 = 2;
/// `stagnation`: at least one run stagnates.
pub const STAGNATING: u8 = 3;

/// A log that holds no event (empty, or only blank or damaged lines) was read, but there is
/// no run in it to show: every command that reads one log says so (`no_event`) and exits with
/// this, findings or not, `--strict` or not. A command over several runs exits with it unless
/// a more severe code applies (`stagnation`'s 3). `tail` is the exception: it waits for the
/// first event.
pub const NO_EVENT: u8 = FINDINGS;

/// What a command says about a log that holds no event.
pub fn no_event(log: &str) -> String {
    format!("{log}: the log holds no event (it is empty, or holds only blank or damaged lines)")
}

/// The exit code of a command that read logs, given what it found: a stagnating run outranks
/// a log with no event, which outranks findings under `--strict`.
pub fn of_reading(stagnating: bool, no_event: bool, strict_findings: bool) -> u8 {
    if stagnating {
        STAGNATING
    } else if no_event {
        NO_EVENT
    } else if strict_findings {
        FINDINGS
    } else {
        OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_severe_answer_wins() {
        assert_eq!(of_reading(true, true, true), STAGNATING);
        assert_eq!(of_reading(false, true, false), NO_EVENT);
        assert_eq!(of_reading(false, false, true), FINDINGS);
        assert_eq!(of_reading(false, false, false), OK);
        assert!(no_event("a/history.jsonl").starts_with("a/history.jsonl: the log holds no event"));
    }
}
