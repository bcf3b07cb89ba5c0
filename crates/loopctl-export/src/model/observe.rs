//! What a running run's trace adds to its contribution after each event: finished phases
//! (explicit attempts, or aif-loop's derived steps), evaluations, retries, stagnation
//! verdicts, and the run's end.

use std::collections::BTreeSet;
use std::sync::Arc;

use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::analysis::stagnation::{Detector, watch::Watch};
use loopctl_core::fold::trace::{Attempt, Evaluation, Name, Trace};
use loopctl_core::{Event, Kind};

use super::counts::EVALUATION_RESULTS;
use super::labels::{exit_reason_label, kind_label, stop_reason_label};
use super::{Delta, Key, Label, Live, Metric, MetricState, RunMetrics};

impl MetricState {
    /// What a running run's trace adds after an event: phases, evaluations, retries, verdicts.
    pub(super) fn observe_live(
        &mut self,
        run: &mut RunMetrics,
        l: &mut Live,
        ev: &Event<'_>,
        ending: bool,
    ) {
        self.observe_phases(run, l, ev, ending);
        while l.evaluations_seen < l.trace.evaluations.len() {
            self.evaluation_obs(run, &l.trace.evaluations[l.evaluations_seen]);
            l.evaluations_seen += 1;
        }
        while l.retries_seen < l.trace.retries.len() {
            let at = &l.trace.retries[l.retries_seen].at;
            let phase: Name = Arc::from(at.phase.as_deref().unwrap_or("unknown"));
            l.retries_seen += 1;
            let phase = self.admit_phase(&run.loop_label, run.label_number, &phase);
            self.add(run, Key::one(Metric::PhaseRetries, phase), Delta::Count(1));
        }
        self.assess(run, ev, &l.trace, &mut l.watch, &mut l.detectors);
    }

    /// An evaluation's series: its result, and its score when it has a finite one.
    pub(super) fn evaluation_obs(&mut self, run: &mut RunMetrics, e: &Evaluation) {
        let result = match e.passed {
            Some(true) => 0,
            Some(false) => 1,
            None => 2,
        };
        let micro = e
            .score
            .filter(|s| s.is_finite())
            .map(|s| (s * 1e6).round() as i64);
        if self.alone {
            self.local
                .counts
                .evaluation(run.label_number, result, micro);
            return;
        }
        let result = EVALUATION_RESULTS[result];
        self.add(
            run,
            Key::one(Metric::Evaluations, Label::Static(result)),
            Delta::Count(1),
        );
        if let Some(micro) = micro {
            self.add(
                run,
                Key::new(Metric::EvaluationScore),
                Delta::Observe(micro, 1),
            );
        }
    }

    /// The stagnation detectors that trigger on `trace`, assessed at each evaluation and at
    /// the end; each counted once per run (`detectors`).
    pub(super) fn assess(
        &mut self,
        run: &mut RunMetrics,
        ev: &Event<'_>,
        trace: &Trace,
        watch: &mut Option<Watch>,
        detectors: &mut BTreeSet<Detector>,
    ) {
        if !matches!(
            ev.kind,
            Kind::EvaluationDone | Kind::Stopped | Kind::Failed | Kind::SessionEnded
        ) {
            return;
        }
        // No clock: the stalled detector needs one, and is left to the live-run gauges.
        // Which detectors trigger, as `stagnation::triggered` finds them, learnt from what
        // the trace added since the last assessment (not a rescan of the run each time).
        let cfg = &self.options.stagnation;
        let triggered =
            watch
                .get_or_insert_with(|| Watch::new(cfg))
                .triggered(trace, None, Liveness::Unknown);
        for d in triggered {
            if detectors.insert(d) {
                let key = Key::one(Metric::StagnationVerdicts, Label::Static(d.name()));
                self.add(run, key, Delta::Count(1));
            }
        }
    }

    /// `stated`: the iterations the run's end says it completed, if it says.
    pub(super) fn finished(&mut self, run: &mut RunMetrics, stated: Option<u64>) {
        let s = &run.state;
        let status = Label::Static(s.status.as_str());
        let reason = Label::Static(exit_reason_label(s));
        // aif-loop's end states no count: a run that passed in iteration 3 took 3 (the
        // reducer's `iterations_completed`, the iterations advanced past, would say 2 or 0).
        let iterations = stated.unwrap_or(s.iteration) as i64;
        let duration = match (s.created_at, s.updated_at) {
            (Some(a), Some(b)) => Some(b.0.saturating_sub(a.0).max(0)),
            _ => None,
        };
        self.add(
            run,
            Key::two(Metric::RunsFinished, status.clone(), reason),
            Delta::Count(1),
        );
        self.add(
            run,
            Key::one(Metric::RunIterations, status.clone()),
            Delta::Observe(iterations, 1),
        );
        if let Some(ms) = duration {
            self.add(
                run,
                Key::one(Metric::RunDuration, status),
                Delta::Observe(ms, 1),
            );
        }
    }

    /// Observes finished explicit attempts once each; while the log has none, the derived
    /// aif-loop steps instead, each once it is over.
    fn observe_phases(&mut self, run: &mut RunMetrics, l: &mut Live, ev: &Event<'_>, ending: bool) {
        if l.trace.attempts.is_empty() {
            // A derived step is observed once it is over (its last event is known): a later
            // step began, or the run ended. Observing it at each event as it grows would take
            // it back and add it again every time.
            let steps = l.trace.steps.len();
            let over = if ending {
                steps
            } else {
                steps.saturating_sub(1)
            };
            for i in l.steps_seen..over {
                if let Some(o) = attempt_obs(&l.trace.steps[i]) {
                    self.phase_obs(run, &mut l.admitted, &o, 1);
                }
            }
            l.steps_seen = l.steps_seen.max(over);
            return;
        }
        // Steps observed before the first explicit attempt stay counted (`Trace::phases` drops
        // them then, but a counter never goes down); none is observed after it.
        if ev.kind != Kind::PhaseFinished {
            return;
        }
        let mut obs = Vec::new();
        for (i, a) in l.trace.attempts.iter().enumerate().skip(l.attempts_seen) {
            if a.finished && !l.finished_beyond.contains(&i) {
                obs.extend(attempt_obs(a));
                l.finished_beyond.insert(i);
            }
        }
        while l.finished_beyond.remove(&l.attempts_seen) {
            l.attempts_seen += 1;
        }
        for o in obs {
            self.phase_obs(run, &mut l.admitted, &o, 1);
        }
    }

    /// `admitted`: phases this run saw admitted under its loop label (`Live::admitted`).
    pub(super) fn phase_obs(
        &mut self,
        run: &mut RunMetrics,
        admitted: &mut Vec<Name>,
        o: &PhaseObs<'_>,
        sign: i64,
    ) {
        let known = admitted.iter().any(|p| Arc::ptr_eq(p, o.0));
        if self.alone && known {
            // A step at a time, most of them: counted in place, the name not even cloned.
            let n = run.label_number;
            self.local
                .counts
                .phase(&mut run.phase_slots, n, o.0, o.3, o.1, o.2, sign);
            return;
        }
        let phase = if known {
            Label::Name(o.0.clone())
        } else {
            let phase = self.admit_phase(&run.loop_label, run.label_number, o.0);
            if matches!(phase, Label::Name(_)) {
                admitted.push(o.0.clone());
            }
            phase
        };
        if self.alone
            && let Label::Name(name) = &phase
        {
            let n = run.label_number;
            self.local
                .counts
                .phase(&mut run.phase_slots, n, name, o.3, o.1, o.2, sign);
            return;
        }
        self.add(
            run,
            Key::two(Metric::Phases, phase.clone(), Label::Static(o.3)),
            Delta::Count(sign),
        );
        if let Some(ms) = o.2 {
            self.add(
                run,
                Key::two(Metric::PhaseDuration, phase, Label::Static(o.1)),
                Delta::Observe(ms, sign),
            );
        }
    }
}

/// (phase, kind, duration ms, stop reason) of a finished attempt or step.
pub(super) type PhaseObs<'a> = (&'a Name, &'static str, Option<i64>, &'static str);

pub(super) fn attempt_obs(a: &Attempt) -> Option<PhaseObs<'_>> {
    a.finished.then(|| {
        (
            &a.name,
            kind_label(a),
            a.duration_ms.and_then(|d| i64::try_from(d).ok()),
            stop_reason_label(a),
        )
    })
}
