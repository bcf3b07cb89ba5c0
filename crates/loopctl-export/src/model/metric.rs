//! The series loopctl exports: names, types, help, labels, buckets and units.

/// Every series loopctl exports. `docs/metrics.md` documents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    Runs,
    RunsStarted,
    RunsFinished,
    RunDuration,
    RunIterations,
    PhaseDuration,
    Phases,
    PhaseRetries,
    Evaluations,
    EvaluationScore,
    StagnationVerdicts,
    Tokens,
    Cost,
    LogFindings,
    Events,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

/// Phase buckets: agent phases last from a second to hours.
const PHASE_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
];
const RUN_BUCKETS: &[f64] = &[
    10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 259200.0,
];
const ITERATION_BUCKETS: &[f64] = &[
    0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0,
];
/// aif-loop's thresholds are 0.8 (phase A) and 0.9 (phase B): finer there.
const SCORE_BUCKETS: &[f64] = &[
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0,
];

/// `bounds` times `scale`, as integers: the bucket bounds in stored units, where each is a whole
/// number of them (checked when built: a bound that is not is `i64::MIN`, never used).
const fn in_units<const N: usize>(bounds: &[f64], scale: f64) -> [i64; N] {
    let mut out = [i64::MIN; N];
    let mut i = 0;
    while i < N {
        let x = bounds[i] * scale;
        if x == (x as i64) as f64 {
            out[i] = x as i64;
        }
        i += 1;
    }
    out
}

const PHASE_UNITS: [i64; 12] = in_units(PHASE_BUCKETS, 1e3);
const RUN_UNITS: [i64; 12] = in_units(RUN_BUCKETS, 1e3);
const ITERATION_UNITS: [i64; 14] = in_units(ITERATION_BUCKETS, 1.0);

impl Metric {
    pub const ALL: [Metric; 15] = [
        Metric::Runs,
        Metric::RunsStarted,
        Metric::RunsFinished,
        Metric::RunDuration,
        Metric::RunIterations,
        Metric::PhaseDuration,
        Metric::Phases,
        Metric::PhaseRetries,
        Metric::Evaluations,
        Metric::EvaluationScore,
        Metric::StagnationVerdicts,
        Metric::Tokens,
        Metric::Cost,
        Metric::LogFindings,
        Metric::Events,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Runs => "loopctl_runs",
            Metric::RunsStarted => "loopctl_runs_started_total",
            Metric::RunsFinished => "loopctl_runs_finished_total",
            Metric::RunDuration => "loopctl_run_duration_seconds",
            Metric::RunIterations => "loopctl_run_iterations",
            Metric::PhaseDuration => "loopctl_phase_duration_seconds",
            Metric::Phases => "loopctl_phases_total",
            Metric::PhaseRetries => "loopctl_phase_retries_total",
            Metric::Evaluations => "loopctl_evaluations_total",
            Metric::EvaluationScore => "loopctl_evaluation_score",
            Metric::StagnationVerdicts => "loopctl_stagnation_verdicts_total",
            Metric::Tokens => "loopctl_tokens_total",
            Metric::Cost => "loopctl_cost_usd_total",
            Metric::LogFindings => "loopctl_log_findings_total",
            Metric::Events => "loopctl_events_total",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            Metric::Runs => "Runs by current status.",
            Metric::RunsStarted => {
                "Runs started: each run_started, or a run's first event when it has none."
            }
            Metric::RunsFinished => "Runs that ended, by status and canonical exit reason.",
            Metric::RunDuration => "Wall time from a run's first to its last event, at its end.",
            Metric::RunIterations => {
                "Iterations a run took, when it ended: the count its end states, else the iteration it ended in."
            }
            Metric::PhaseDuration => {
                "Duration of finished phase attempts (aif-loop: derived steps)."
            }
            Metric::Phases => "Finished phase attempts by stop reason.",
            Metric::PhaseRetries => "Phase retries.",
            Metric::Evaluations => "Evaluations by result (pass, fail, unknown).",
            Metric::EvaluationScore => "Evaluation scores (0..1).",
            Metric::StagnationVerdicts => "Stagnation detectors that triggered on a run.",
            Metric::Tokens => "Tokens used, by type, where the logs carry them.",
            Metric::Cost => "Cost in US dollars, where the logs carry it.",
            Metric::LogFindings => {
                "Findings about the logs: damaged lines, torn tails, seq problems."
            }
            Metric::Events => "Events read, by dialect and type (unknown types as other).",
        }
    }

    pub fn kind(self) -> Type {
        match self {
            Metric::Runs => Type::Gauge,
            Metric::RunDuration
            | Metric::RunIterations
            | Metric::PhaseDuration
            | Metric::EvaluationScore => Type::Histogram,
            _ => Type::Counter,
        }
    }

    /// Label names, `loop` first where the series has it.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Metric::Runs => &["loop", "status"],
            Metric::RunsStarted | Metric::EvaluationScore | Metric::Cost => &["loop"],
            Metric::RunsFinished => &["loop", "status", "exit_reason"],
            Metric::RunDuration | Metric::RunIterations => &["loop", "status"],
            Metric::PhaseDuration => &["loop", "phase", "kind"],
            Metric::Phases => &["loop", "phase", "stop_reason"],
            Metric::PhaseRetries => &["loop", "phase"],
            Metric::Evaluations => &["loop", "result"],
            Metric::StagnationVerdicts => &["loop", "detector"],
            Metric::Tokens => &["loop", "type"],
            Metric::LogFindings => &["kind"],
            Metric::Events => &["dialect", "event"],
        }
    }

    pub(super) fn has_loop(self) -> bool {
        self.labels().first() == Some(&"loop")
    }

    pub fn buckets(self) -> &'static [f64] {
        match self {
            Metric::RunDuration => RUN_BUCKETS,
            Metric::RunIterations => ITERATION_BUCKETS,
            Metric::PhaseDuration => PHASE_BUCKETS,
            Metric::EvaluationScore => SCORE_BUCKETS,
            _ => &[],
        }
    }

    /// The bucket bounds in stored units, for the histograms whose bounds are whole numbers of
    /// them: an observation (a whole number of units) is then placed without dividing, in the
    /// bucket `buckets` and `scale` place it in (`model::tests`).
    pub(super) fn bounds_in_units(self) -> Option<&'static [i64]> {
        match self {
            Metric::RunDuration => Some(&RUN_UNITS),
            Metric::RunIterations => Some(&ITERATION_UNITS),
            Metric::PhaseDuration => Some(&PHASE_UNITS),
            _ => None,
        }
    }

    /// Stored integer units per exported unit.
    pub fn scale(self) -> f64 {
        match self {
            Metric::RunDuration | Metric::PhaseDuration => 1e3,
            Metric::EvaluationScore => 1e6,
            Metric::Cost => 1e9,
            _ => 1.0,
        }
    }
}
