//! The decision after a phase: evaluate (rule checks, the phase's own report), switch A → B,
//! route (the phase's branches, the loop's `when` rules), stop conditions and escalation.
//! The judgement itself is `loopctl_core`'s; this runs the checks and writes the events.

use std::collections::BTreeMap;

use loopctl_core::rules::criteria::{
    self, AfterEvaluation, Circumstances, Criteria, Evaluation, Level, SelfReport, Verdict,
};
use loopctl_core::rules::escalation::Escalation;
use loopctl_core::rules::markers::Directive;
use loopctl_core::rules::transitions::{self, Action, Condition, END, Observed, Route, WhenRule};
use loopctl_core::{analysis::postmortem, analysis::stagnation};

use super::*;

/// Where a check's output goes: a file name not used yet.
fn fresh(dir: &Path, stem: &str, ext: &str) -> String {
    let mut rel = format!("{stem}.{ext}");
    let mut n = 1;
    while dir.join(&rel).exists() {
        n += 1;
        rel = format!("{stem}.{n}.{ext}");
    }
    rel
}

impl Runner {
    /// The order: the stall watchdog; `blocked` (a `blocked:` rule, else the abort marker);
    /// `after N tries` rules; aif-loop's stop conditions; the phase's branches; the other
    /// `when` rules; else the loop goes on in order.
    pub(super) fn decide(&mut self, pos: Pos) -> Result<()> {
        let spec = self.phase(&pos).clone();
        let fin = self.cursor.last_finished.clone().unwrap_or(Value::Null);
        let end = self.cursor.last.as_ref().map(|l| l.1.clone());
        let clean = end.as_ref().is_some_and(|e| e.clean());
        let verdict = end.as_ref().and_then(|e| e.verdict);
        let abort = end
            .as_ref()
            .and_then(|e| e.marker.clone())
            .filter(|m| m.directive == Directive::Abort);
        let reported = fin.get("score").is_some() || fin.get("evaluation").is_some();
        // A phase that failed without a verdict is a phase failure, not something to judge.
        let settled = clean || verdict.is_some();
        let observed =
            pos.kind == PhaseKind::Loop && settled && (self.cfg.observes(pos.index) || reported);
        let step = Some((spec.name.as_str(), pos.iteration));
        let mut t = json!({"from": spec.name, "kind": pos.kind.as_str(), "index": pos.index,
                           "observed": observed});
        if end.as_ref().is_some_and(|e| e.stop_reason == STALLED) {
            // The stall watchdog ended it: a stagnation stop the loop file asked for.
            t["source"] = json!("stagnation");
            t["end"] = json!({"reason": "stagnation",
                              "detail": format!("stalled: {}", fin.get("error").and_then(Value::as_str).unwrap_or("no output"))});
            self.emit(Kind::Transition, step, t)?;
            return Ok(());
        }
        let eval = if observed {
            self.evaluate(&spec, pos, &fin, verdict)?
        } else {
            None
        };
        if self.control.interrupted().is_some() {
            // Decided again on resume: the transition event is what marks it done.
            return Ok(());
        }
        let o = observation(
            eval.as_ref(),
            verdict.unwrap_or(clean),
            abort.is_some(),
            self.cursor.tries + u64::from(observed),
        );
        let passed = o.passed;
        t["outcome"] = json!({"blocked": o.blocked, "passed": o.passed, "goal_met": o.goal_met, "tries": o.tries});
        let failure = (observed && !passed && !o.blocked).then(|| match &eval {
            Some(e) => criteria::feedback(e, self.cfg.feedback_max_length),
            None => fin
                .get("error")
                .or_else(|| fin.get("result"))
                .and_then(Value::as_str)
                .unwrap_or("the check failed")
                .to_string(),
        });
        if let Some(f) = &failure {
            t["feedback"] = json!(f);
        }
        let rule = if observed {
            transitions::pick(&self.cfg.when, &o).cloned()
        } else {
            None
        };
        let guard = rule
            .as_ref()
            .filter(|r| matches!(r.condition, Condition::Blocked | Condition::AfterTries(_)));
        let at_limit = pos.kind == PhaseKind::Loop && pos.iteration >= self.cfg.max_iterations;
        let apply = if guard.is_some() {
            // 1-2. `blocked:` and `after N tries` rules: the thrash guard always wins.
            guard
        } else if o.blocked {
            // No rule for it: the abort marker ends the run BLOCKED (Avenor's meaning).
            t["source"] = json!("marker");
            None
        } else if let Some((reason, detail)) =
            stop_condition(observed, eval.as_ref(), &o, at_limit, || {
                self.stagnation_stop()
            })
        {
            // 3. aif-loop's stop conditions.
            let stagnation = reason == criteria::StopReason::Stagnation;
            t["source"] = json!(if stagnation { "stagnation" } else { "criteria" });
            t["end"] = json!({"reason": reason.as_str()});
            if let Some(d) = detail {
                t["end"]["detail"] = json!(d);
            }
            None
        } else if route_branches(&self.cfg, &mut t, &spec, clean, observed, &fin) {
            // 4. The phase's branches.
            None
        } else {
            // 5. The other `when` rules.
            rule.as_ref()
        };
        if let Some(r) = apply {
            self.apply_rule(
                &mut t,
                r,
                &o,
                eval.as_ref(),
                failure.as_deref(),
                &abort,
                pos,
            )?;
        }
        // Iteration control: failing at the iteration limit escalates, unless the run ends another
        // way (a `stop` rule, `ask a human`, which reported already, or stagnation).
        if observed && escalates_at_limit(&t, at_limit, &o) {
            self.escalate("iteration_limit", pos, failure.as_deref(), None)?;
        }
        if t.get("source").is_none() {
            t["source"] = json!("none");
        }
        self.emit(Kind::Transition, step, t)?;
        Ok(())
    }

    /// Applies a `when` rule's actions to the transition being written.
    #[allow(clippy::too_many_arguments)]
    fn apply_rule(
        &mut self,
        t: &mut Value,
        rule: &WhenRule,
        o: &Observed,
        eval: Option<&Evaluation>,
        failure: Option<&str>,
        abort: &Option<loopctl_core::rules::markers::Marker>,
        pos: Pos,
    ) -> Result<()> {
        t["source"] = json!("when");
        t["rule"] = json!(rule.text);
        t["condition"] = json!(rule.condition.name());
        let reason = rule_reason(&rule.condition, eval);
        let mut goto = Vec::new();
        for a in &rule.actions {
            match a {
                Action::Goto(name) => goto.push(name.clone()),
                Action::Stop => t["end"] = json!({ "reason": reason }),
                Action::StopAndWarn => {
                    let warning = stop_warning(&rule.text, o.tries, failure);
                    t["end"] = json!({ "reason": reason, "warning": warning });
                }
                Action::AskHuman => {
                    let label = abort.as_ref().and_then(|m| m.label.clone());
                    let esc = self.escalate("ask_a_human", pos, failure, label.as_deref())?;
                    t["end"] =
                        json!({ "reason": "escalated", "blocked": true, "detail": esc.question });
                }
            }
        }
        if !goto.is_empty() {
            let route: Vec<Option<usize>> = goto.iter().map(|g| self.cfg.loop_index(g)).collect();
            t["goto"] = json!(goto);
            t["route"] = json!(route);
        }
        Ok(())
    }

    /// The evidence of a stagnation the loop stops on (`stagnation.stop_on`, default the
    /// aif-loop's score rule), if one triggered. No clock: `stalled` cannot fire inside the run.
    fn stagnation_stop(&self) -> Option<String> {
        let cfg = self.cfg.stagnation_config();
        let verdict = stagnation::assess(
            &self.trace,
            &cfg,
            None,
            loopctl_core::analysis::liveness::Liveness::Alive,
        );
        let hits: Vec<String> = verdict
            .triggered()
            .filter(|f| cfg.stop_on.contains(&f.detector))
            .map(|f| format!("{}: {}", f.detector.name(), postmortem::evidence(f)))
            .collect();
        (!hits.is_empty()).then(|| hits.join("; "))
    }

    /// Evaluates the phase's work at the current quality phase, switching to B and judging the
    /// same work again when A passes. Writes `evaluation_done` (and `phase_switched`).
    /// Evaluations already written for this phase (a resume after a crash mid-decision) are
    /// reused, not run again, so the log never holds two for one observation.
    fn evaluate(
        &mut self,
        spec: &Phase,
        pos: Pos,
        fin: &Value,
        verdict: Option<bool>,
    ) -> Result<Option<Evaluation>> {
        let criteria = self.cfg.criteria.clone().unwrap_or_default();
        let report = fin
            .get("evaluation")
            .and_then(SelfReport::from_json)
            .or_else(|| {
                fin.get("score")
                    .and_then(Value::as_f64)
                    .map(SelfReport::from_score)
            });
        let step = Some((spec.name.as_str(), pos.iteration));
        let mut level = Level::parse(&self.state.phase).unwrap_or(Level::A);
        loop {
            let written = self
                .cursor
                .pending
                .iter()
                .find(|(l, _)| l == level.as_str())
                .and_then(|(_, p)| serde_json::from_value::<Evaluation>(p.clone()).ok());
            let e = match written {
                Some(mut e) => {
                    e.level = Some(level);
                    e
                }
                None => {
                    let checks = self.run_checks(&criteria, level, pos)?;
                    if self.control.interrupted().is_some() {
                        return Ok(None);
                    }
                    let Some(mut e) =
                        criteria::evaluate(&criteria, level, &checks, report.as_ref())
                    else {
                        return Ok(None);
                    };
                    if verdict == Some(false) {
                        let error = fin.get("error").and_then(Value::as_str).map(str::to_string);
                        criteria::fail_exit_status(&mut e, error);
                    }
                    let decision = criteria::decide(
                        &e,
                        pos.iteration,
                        self.cfg.max_iterations,
                        self.cfg.feedback_max_length,
                    );
                    let mut payload = serde_json::to_value(&e).unwrap_or(Value::Null);
                    payload["decision"] = serde_json::to_value(&decision).unwrap_or(Value::Null);
                    self.emit_in(Kind::EvaluationDone, step, Some(level.as_str()), payload)?;
                    e
                }
            };
            if level == Level::A && e.passed {
                level = Level::B;
                if self.state.phase != "B" {
                    self.emit_in(
                        Kind::PhaseSwitched,
                        step,
                        Some("B"),
                        json!({"from_phase": "A", "to_phase": "B"}),
                    )?;
                }
                continue;
            }
            return Ok(Some(e));
        }
    }

    /// Runs the check command of every active rule that has one: exit 0 passes.
    fn run_checks(
        &mut self,
        criteria: &Criteria,
        level: Level,
        pos: Pos,
    ) -> Result<BTreeMap<String, Verdict>> {
        let mut out = BTreeMap::new();
        let rules: Vec<_> = criteria
            .active(level)
            .filter_map(|r| Some((r.id.clone(), r.check.clone()?)))
            .collect();
        for (id, cmd) in rules {
            if self.control.interrupted().is_some() {
                break;
            }
            let stem = format!(
                "logs/{:06}-check-{}-{}",
                self.state.last_seq.unwrap_or(0),
                level.as_str(),
                safe_name(&id, '_')
            );
            let out_rel = fresh(&self.dir, &stem, "stdout");
            let err_rel = fresh(&self.dir, &stem, "stderr");
            let attempt = Attempt {
                program: Program::Shell(cmd),
                stdin: None,
                env: vec![
                    ("LOOPCTL_RUN_ID", self.run_id.clone()),
                    ("LOOPCTL_RUN_DIR", self.dir.display().to_string()),
                    ("LOOPCTL_RULE_ID", id.clone()),
                    ("LOOPCTL_QUALITY_PHASE", level.as_str().into()),
                    ("LOOPCTL_ITERATION", pos.iteration.to_string()),
                    ("LOOPCTL_WORKDIR", self.opts.workdir.display().to_string()),
                ],
                cwd: &self.opts.workdir,
                stdout: self.dir.join(&out_rel),
                stderr: self.dir.join(&err_rel),
                echo: self.echo(),
                stall_after: None,
            };
            let v = match phase::run(attempt, &self.control) {
                Ok(f) if f.exit_code == Some(0) => Verdict {
                    passed: true,
                    message: None,
                },
                Ok(f) => {
                    let how = match (f.exit_code, f.signal) {
                        (Some(c), _) => format!("check exited with code {c}"),
                        (_, Some(s)) => format!("check was killed by signal {s}"),
                        _ => "check failed".into(),
                    };
                    let line = f.last_error_line.or(f.last_line);
                    Verdict {
                        passed: false,
                        message: Some(match line {
                            Some(l) => format!("{how}: {l}"),
                            None => how,
                        }),
                    }
                }
                Err(e) => Verdict {
                    passed: false,
                    message: Some(format!("check could not start: {e}")),
                },
            };
            out.insert(id, v);
        }
        Ok(out)
    }

    /// Writes the escalation report: an `escalated` event and `escalation.md`.
    fn escalate(
        &mut self,
        trigger: &str,
        pos: Pos,
        failure: Option<&str>,
        question: Option<&str>,
    ) -> Result<Escalation> {
        // Written already, before a crash cut the decision short: the same report stands.
        if let Some(esc) = self
            .cursor
            .pending_escalation
            .as_ref()
            .and_then(|p| serde_json::from_value::<Escalation>(p.clone()).ok())
        {
            return Ok(esc);
        }
        let esc = Escalation::build(
            trigger,
            &self.cursor.evaluations,
            self.cursor.tries + 1,
            failure.or(self.cursor.last_failure.as_deref()),
            question,
            self.cfg.feedback_max_length,
        );
        let file = self.dir.join(ESCALATION);
        write_atomic(&file, &esc.to_markdown(&self.run_id))?;
        let mut payload = serde_json::to_value(&esc).unwrap_or(Value::Null);
        payload["report"] = json!(ESCALATION);
        let name = self.phase(&pos).name.clone();
        self.emit(Kind::Escalated, Some((&name, pos.iteration)), payload)?;
        Ok(esc)
    }
}

/// aif-loop's stop conditions, in its order, with the evidence of a stagnation stop.
fn stop_condition(
    observed: bool,
    eval: Option<&Evaluation>,
    o: &Observed,
    at_limit: bool,
    stagnation: impl FnOnce() -> Option<String>,
) -> Option<(criteria::StopReason, Option<String>)> {
    use criteria::StopReason::{IterationLimit, Stagnation};
    if !observed {
        return None;
    }
    // A passing evaluation is progress, whatever the score did.
    let stag = (!o.passed).then(stagnation).flatten();
    let reason = match eval {
        Some(e) => match criteria::after_evaluation(
            e,
            Circumstances {
                at_limit,
                stagnating: stag.is_some(),
                ..Circumstances::default()
            },
        ) {
            AfterEvaluation::Stop(r) => r,
            _ => return None,
        },
        None if at_limit && !o.passed => IterationLimit,
        None if stag.is_some() => Stagnation,
        None => return None,
    };
    Some((reason, stag.filter(|_| reason == Stagnation)))
}

/// Routes on the phase's `transition`; false when it has none or nothing matched.
fn route_branches(
    cfg: &LoopFile,
    t: &mut Value,
    spec: &Phase,
    clean: bool,
    observed: bool,
    fin: &Value,
) -> bool {
    let Some(tr) = &spec.transition else {
        return false;
    };
    let result = transitions::result_string(
        fin.get("result_marker").and_then(Value::as_str),
        fin.get("result").and_then(Value::as_str),
    );
    t["result"] = json!(result);
    let goto = |t: &mut Value, source: &str, to: &str| {
        t["source"] = json!(source);
        if to == END {
            t["end"] = json!({"reason": "goto_end"});
        } else {
            t["goto"] = json!([to]);
            t["route"] = json!([cfg.loop_index(to)]);
        }
    };
    match transitions::route(tr, !clean, result) {
        Route::OnFailure(to) => goto(t, "on_failure", to),
        Route::Branch(i, to) => {
            t["branch"] = json!(i);
            goto(t, "branch", to);
        }
        // An observed phase's failed verdict is for the `when` rules to judge.
        Route::Fail if observed => return false,
        Route::Fail => t["source"] = json!("on_failure"),
        Route::None => return false,
    }
    true
}

/// What an observation came to. `exit_verdict` is the phase's own verdict (its exit status,
/// or a clean end); an evaluation, when one ran, overrides it; an abort marker blocks it.
fn observation(
    eval: Option<&Evaluation>,
    exit_verdict: bool,
    blocked: bool,
    tries: u64,
) -> Observed {
    let passed = eval.map_or(exit_verdict, |e| e.passed) && !blocked;
    Observed {
        blocked,
        passed,
        // Without criteria, passing is the goal; with them, only a pass at level B is.
        goal_met: passed && eval.is_none_or(|e| e.level == Some(Level::B)),
        tries,
    }
}

/// Failing at the iteration limit escalates, unless the run already ends another way (a
/// `stop` rule, `ask a human`, which reported already, or stagnation).
fn escalates_at_limit(t: &Value, at_limit: bool, o: &Observed) -> bool {
    let ends_otherwise = t
        .pointer("/end/reason")
        .and_then(Value::as_str)
        .is_some_and(|r| r != "iteration_limit");
    at_limit && !o.passed && !o.blocked && !ends_otherwise
}

/// The stop reason a `when` rule's `stop` records, by the condition that matched.
fn rule_reason(condition: &Condition, eval: Option<&Evaluation>) -> &'static str {
    let threshold_met = eval.is_some_and(|e| e.passed && e.level == Some(Level::B));
    match condition {
        Condition::Blocked => "blocked",
        Condition::AfterTries(_) => "attempt_limit",
        Condition::PassesGoalMet | Condition::Passes if threshold_met => "threshold_reached",
        Condition::PassesGoalMet => "goal_met",
        Condition::Passes => "passed",
        Condition::Fails => "check_failed",
    }
}

/// The warning of a `stop and warn` rule: which rule, after how many observations, and the
/// first line of the last failure.
fn stop_warning(rule: &str, tries: u64, failure: Option<&str>) -> String {
    let last = failure
        .and_then(|f| f.lines().next())
        .map(|f| format!("; last failure: {f}"))
        .unwrap_or_default();
    format!("stopped by {rule:?} after {tries} observation(s){last}")
}

/// The escalation report's file name in the run folder (`clean` knows it as a run's file).
pub use loopctl_store::clean::ESCALATION;

#[cfg(test)]
mod tests;
