//! `RunState` as compact JSON, written by hand: the bytes `serde_json::to_writer` gives (a
//! property test holds them equal), at a fraction of the cost. `replay --json` writes one state
//! per run of a merged log, and the derived serializer escaped every key byte by byte.

use serde_json::Value;

use crate::decode::json_scanner::find_special;
use crate::decode::timestamp::Ts;
use crate::fold::run_state::{LogMark, RunState, ScorePoint, Stop, Tokens};

impl RunState {
    /// Appends the state as compact JSON (no newline): `serde_json::to_writer`'s bytes.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Every field, by name: a field added to `RunState` does not compile until it is
        // written here too.
        let RunState {
            run_id,
            task_alias,
            status,
            iteration,
            max_iterations,
            phase,
            current_step,
            task,
            criteria,
            plan,
            prepared_checks,
            evaluation,
            critique,
            stop,
            last_score,
            stagnation_count,
            created_at,
            updated_at,
            last_seq,
            events,
            score_history,
            iterations_completed,
            exit_reason,
            exit_label,
            tokens,
            retries,
            phase_errors,
            last_error,
            unknown_events,
            loop_started,
            log,
        } = self;
        let mut w = Writer { out, first: true };
        w.open();
        w.key("run_id").string(run_id);
        w.key("task_alias").string(task_alias);
        w.key("status").string(status.as_str());
        w.key("iteration").u64(*iteration);
        w.key("max_iterations").opt_u64(*max_iterations);
        w.key("phase").string(phase);
        w.key("current_step").opt_string(current_step.as_deref());
        w.key("task").value(task.as_ref());
        w.key("criteria").value(criteria.as_ref());
        for (k, v) in [("plan", plan), ("prepared_checks", prepared_checks)] {
            if v.is_some() {
                w.key(k).value(v.as_deref());
            }
        }
        w.key("evaluation").value(evaluation.as_ref());
        if critique.is_some() {
            w.key("critique").value(critique.as_deref());
        }
        w.key("stop").stop(stop);
        w.key("last_score").f64(*last_score);
        w.key("stagnation_count").u64(*stagnation_count);
        w.key("created_at").ts(*created_at);
        w.key("updated_at").ts(*updated_at);
        w.key("last_seq").opt_u64(*last_seq);
        w.key("events").u64(*events);
        w.key("score_history").raw(b"[");
        for (k, p) in score_history.iter().enumerate() {
            if k > 0 {
                w.raw(b",");
            }
            w.score_point(p);
        }
        w.raw(b"]");
        w.key("iterations_completed").u64(*iterations_completed);
        w.key("exit_reason").opt_string(exit_reason.as_deref());
        w.key("exit_label").opt_string(exit_label.as_deref());
        w.key("tokens").tokens(tokens);
        w.key("retries").u64(*retries);
        w.key("phase_errors").u64(*phase_errors);
        w.key("last_error").opt_string(last_error.as_deref());
        w.key("unknown_events").u64(*unknown_events);
        w.key("loop_started").bool(*loop_started);
        w.key("log").log(log);
        w.close();
    }
}

/// Writes the members of one JSON object, compact, with the bytes serde_json would write
/// (keys are taken as plain ASCII, never escaped); `first` is true until its first key.
pub struct Writer<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> Writer<'o> {
    /// Opens an object at the end of `out`; `close` ends it.
    pub fn object_in(out: &'o mut Vec<u8>) -> Writer<'o> {
        let mut w = Writer { out, first: true };
        w.open();
        w
    }
}

impl Writer<'_> {
    fn open(&mut self) {
        self.out.push(b'{');
        self.first = true;
    }

    /// A nested object, opened: its members go through the returned writer.
    fn object(&mut self) -> Writer<'_> {
        let mut w = Writer {
            out: self.out,
            first: true,
        };
        w.open();
        w
    }

    pub fn bool(&mut self, b: bool) {
        self.raw(if b { b"true" } else { b"false" });
    }

    pub fn close(&mut self) {
        self.out.push(b'}');
        self.first = false;
    }

    /// A key: plain ASCII, never escaped.
    pub fn key(&mut self, k: &str) -> &mut Self {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(k.as_bytes());
        self.out.extend_from_slice(b"\":");
        self
    }

    fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.out.extend_from_slice(b);
        self
    }

    pub fn u64(&mut self, n: u64) {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    pub fn opt_u64(&mut self, n: Option<u64>) {
        match n {
            Some(n) => self.u64(n),
            None => self.null(),
        }
    }

    pub fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    /// serde_json's float: shortest round-trip text, `null` when not finite.
    pub fn f64(&mut self, x: f64) {
        if serde_json::to_writer(&mut *self.out, &x).is_err() {
            self.null();
        }
    }

    pub fn string(&mut self, s: &str) {
        escape_into(self.out, s);
    }

    pub fn opt_f64(&mut self, x: Option<f64>) {
        match x {
            Some(x) => self.f64(x),
            None => self.null(),
        }
    }

    pub fn opt_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.null(),
        }
    }

    fn value(&mut self, v: Option<&Value>) {
        match v {
            // A `Value` always serializes (its map keys are strings).
            Some(v) => {
                let _ = serde_json::to_writer(&mut *self.out, v);
            }
            None => self.null(),
        }
    }

    pub fn ts(&mut self, t: Option<Ts>) {
        let mut buf = [0; 24];
        match t {
            Some(t) => match t.write_rfc3339(&mut buf) {
                Some(text) => self.string(text),
                None => self.string(&t.to_rfc3339()),
            },
            None => self.null(),
        }
    }

    /// run.json's `stop` object.
    pub fn stop(&mut self, s: &Stop) {
        let Stop {
            passed,
            reason,
            detail,
        } = s;
        let mut w = self.object();
        w.key("passed").bool(*passed);
        w.key("reason").string(reason);
        if let Some(d) = detail {
            w.key("detail").string(d);
        }
        w.close();
    }

    fn score_point(&mut self, p: &ScorePoint) {
        let ScorePoint {
            iteration,
            phase,
            score,
            passed,
            seq,
        } = p;
        let mut w = self.object();
        w.key("iteration").u64(*iteration);
        w.key("phase").string(phase);
        w.key("score").f64(*score);
        if let Some(p) = passed {
            w.key("passed").bool(*p);
        }
        if let Some(s) = seq {
            w.key("seq").u64(*s);
        }
        w.close();
    }

    fn tokens(&mut self, t: &Tokens) {
        let Tokens { input, output } = t;
        let mut w = self.object();
        w.key("input").u64(*input);
        w.key("output").u64(*output);
        w.close();
    }

    fn log(&mut self, l: &LogMark) {
        let LogMark {
            offset,
            line,
            len,
            fingerprint,
        } = l;
        let mut w = self.object();
        w.key("offset").u64(*offset);
        w.key("line").u64(*line);
        w.key("len").u64(*len);
        if let Some(f) = fingerprint {
            w.key("fingerprint").string(f);
        }
        w.close();
    }
}

/// `s` as a JSON string, escaped as serde_json escapes it: `\"`, `\\`, the five short forms
/// and `\u00XX` for the other control bytes; everything else as is.
fn escape_into(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    out.push(b'"');
    let mut start = 0;
    loop {
        let i = find_special(b, start);
        out.extend_from_slice(&b[start..i]);
        let Some(&c) = b.get(i) else { break };
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 0xf)]);
            }
        }
        start = i + 1;
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::run_state::Status;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_]{0,12}",
            "[\\x00-\\x1f\"\\\\/\\x7f a\u{e9}\u{2028}\u{1F600}]{0,20}",
            ".{0,30}",
        ]
    }

    fn value() -> impl Strategy<Value = Option<Value>> {
        prop::option::of(prop_oneof![
            Just(serde_json::json!({"prompt": "x\n\"y\""})),
            Just(
                serde_json::json!({"score": 0.35, "failed_rules": ["r1"], "n": null, "z": [1.5e300, -0.0]})
            ),
            Just(Value::Null),
            Just(serde_json::json!("s")),
        ])
    }

    fn float() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            (0u32..1000).prop_map(|n| f64::from(n) / 100.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(-0.0),
        ]
    }

    fn ts() -> impl Strategy<Value = Option<Ts>> {
        prop::option::of(prop_oneof![
            (0i64..4_000_000_000_000).prop_map(Ts),
            any::<i64>().prop_map(|n| Ts(n / 1000)),
        ])
    }

    prop_compose! {
        fn point()(iteration in any::<u64>(), phase in text(), score in float(),
                   passed in any::<Option<bool>>(), seq in any::<Option<u64>>()) -> ScorePoint {
            ScorePoint { iteration, phase, score, passed, seq }
        }
    }

    prop_compose! {
        fn state()(ids in (text(), text(), text(), prop::option::of(text())),
                   nums in any::<(u64, Option<u64>, u64, Option<u64>, u64, u64)>(),
                   more in any::<(u64, u64, u64, u64, u64, bool, bool)>(),
                   values in (value(), value(), value()),
                   agent in (value(), value(), value()),
                   stop in (text(), prop::option::of(text())),
                   score in float(),
                   stamps in (ts(), ts()),
                   history in prop::collection::vec(point(), 0..4),
                   notes in (prop::option::of(text()), prop::option::of(text()), prop::option::of(text())),
                   log in (any::<(u64, u64, u64)>(), prop::option::of(text())),
                   status in prop::sample::select(vec![Status::Running, Status::Completed, Status::Stopped, Status::Failed]))
                   -> RunState {
            RunState {
                run_id: ids.0, task_alias: ids.1, status, iteration: nums.0,
                max_iterations: nums.1, phase: ids.2, current_step: ids.3,
                task: values.0, criteria: values.1, evaluation: values.2,
                plan: agent.0.map(Box::new), prepared_checks: agent.1.map(Box::new),
                critique: agent.2.map(Box::new),
                stop: Stop { passed: more.5, reason: stop.0, detail: stop.1 },
                last_score: score, stagnation_count: nums.2,
                created_at: stamps.0, updated_at: stamps.1, last_seq: nums.3, events: nums.4,
                score_history: history, iterations_completed: nums.5,
                exit_reason: notes.0, exit_label: notes.1,
                tokens: Tokens { input: more.0, output: more.1 },
                retries: more.2, phase_errors: more.3, last_error: notes.2,
                unknown_events: more.4, loop_started: more.6,
                log: LogMark { offset: log.0.0, line: log.0.1, len: log.0.2, fingerprint: log.1 },
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn written_json_is_serde_jsons(s in state()) {
            let mut ours = Vec::new();
            s.write_json(&mut ours);
            let theirs = serde_json::to_vec(&s).unwrap();
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        }
    }

    #[test]
    fn every_control_byte_is_escaped_like_serde_json() {
        let all: String = (0u8..0x80).map(char::from).collect();
        let mut ours = Vec::new();
        escape_into(&mut ours, &all);
        assert_eq!(ours, serde_json::to_vec(&all).unwrap());
    }
}
