//! Properties of replay over generated logs.

use std::collections::BTreeMap;

use loopctl_core::decode::lines::{DEFAULT_MAX_LINE, Piece, Splitter};
use loopctl_core::decode::parse_line;
use loopctl_core::fold::Split;
use loopctl_core::fold::replay::route;
use loopctl_core::{Event, Kind, Replay, RunState, Ts, apply, replay_bytes};
use proptest::prelude::*;
use serde_json::json;

/// One generated event line (aif-loop or native dialect) for run `run`.
fn line_strategy() -> impl Strategy<Value = (usize, String, bool)> {
    let kinds = prop::sample::select(vec![
        "run_started",
        "plan_created",
        "evaluation_done",
        "iteration_advanced",
        "phase_switched",
        "phase_retry",
        "phase_error",
        "stopped",
        "failed",
        "tool_call",
        "usage",
    ]);
    (0usize..3, kinds, 0u64..5, 0.0f64..1.0, any::<bool>(), 0u64..2000, prop::sample::select(vec!["A", "B", "A_B"]))
        .prop_map(|(run, kind, it, score, native, tokens, phase)| {
            let payload = match kind {
                "run_started" => json!({"max_iterations": it + 3, "task": "do it"}),
                "evaluation_done" => json!({"score": (score * 100.0).round() / 100.0, "passed": score > 0.8,
                                            "failed": if score < 0.5 { vec!["R1"] } else { vec![] }}),
                "iteration_advanced" => json!({"new_iteration": it + 1}),
                "phase_switched" => json!({"from_phase": "A", "to_phase": "B"}),
                "stopped" => json!({"reason": if score > 0.5 { "threshold_reached" } else { "user_stop - enough" }}),
                "failed" => json!({"reason": "phase_error", "error": "boom"}),
                _ => json!({"tokens_in": tokens, "tokens_out": tokens / 2}),
            };
            (run, json!({"ts": "2026-02-18T12:00:00.000Z", "run_id": format!("run-{run}"), "iteration": it,
                         "phase": phase, "step": "EVALUATE", "event": kind, "status": "ok", "payload": payload})
                .to_string(), native)
        })
}

/// A log of generated lines; native lines get per-run contiguous seq.
fn log_strategy() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(line_strategy(), 1..40).prop_map(|lines| {
        let mut seq = [0u64; 3];
        lines
            .into_iter()
            .map(|(run, line, native)| {
                if !native {
                    return line;
                }
                seq[run] += 1;
                let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
                v["v"] = json!(1);
                v["seq"] = json!(seq[run]);
                v.to_string()
            })
            .collect()
    })
}

fn join(lines: &[String]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|l| l.bytes().chain(std::iter::once(b'\n')))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn replay_equals_applying_events_one_by_one(lines in log_strategy()) {
        let out = replay_bytes("default", &join(&lines));
        let mut folded: BTreeMap<String, RunState> = BTreeMap::new();
        for l in &lines {
            let ev = parse_line(l).unwrap();
            let id = ev.run_id.clone().unwrap().into_owned();
            let s = folded.remove(&id).unwrap_or_else(|| RunState::new(&id));
            folded.insert(id, apply(s, &ev));
        }
        prop_assert_eq!(out.runs.len(), folded.len());
        for (id, s) in &out.runs {
            let mut want = folded[id].clone();
            want.log = s.log.clone(); // the log mark is the replay driver's, not the reducer's
            prop_assert_eq!(s, &want);
        }
    }

    #[test]
    fn snapshot_at_any_line_plus_the_tail_equals_a_full_replay(lines in log_strategy(), k in any::<prop::sample::Index>()) {
        // Snapshots are per run: keep one run's lines.
        let lines: Vec<String> = lines.into_iter().filter(|l| l.contains("\"run-0\"")).collect();
        prop_assume!(!lines.is_empty());
        let bytes = join(&lines);
        let full = replay_bytes("d", &bytes).runs;
        let k = k.index(lines.len());
        let prefix: usize = lines[..=k].iter().map(|l| l.len() + 1).sum();
        let head = replay_bytes("d", &bytes[..prefix]).runs;
        // Through run.json and back, as a real snapshot would go.
        let snap: RunState = serde_json::from_str(&serde_json::to_string(&head["run-0"]).unwrap()).unwrap();
        let mut r = Replay::new("d");
        let mut sp = Splitter::starting_at(DEFAULT_MAX_LINE, snap.log.offset, snap.log.line);
        r.resume(snap);
        sp.push(&bytes[prefix..], |p| r.piece(p));
        sp.finish(|p| r.piece(p));
        prop_assert_eq!(r.finish().runs, full);
    }

    #[test]
    fn sharded_replay_equals_one_pass(lines in log_strategy(), shards in 2u64..5) {
        let bytes = join(&lines);
        let one = replay_bytes("d", &bytes);
        // Each line to the shard `route` names, as the fold driver splits a log by run.
        let whole = Replay::new("d");
        let mut parts: Vec<Replay> = (0..shards).map(|_| whole.fork()).collect();
        let mut sp = Splitter::new(DEFAULT_MAX_LINE);
        let mut take = |p: Piece<'_>| {
            let shard = match p {
                Piece::Line(_, raw) | Piece::Unterminated(_, raw) => route("d", raw, shards).0,
                Piece::Oversize(..) => 0,
            };
            parts[shard as usize].piece(p);
        };
        sp.push(&bytes, &mut take);
        sp.finish(&mut take);
        let mut merged = whole;
        for p in parts.into_iter().rev() {
            merged.join(p);
        }
        let merged = merged.finish();
        prop_assert_eq!(merged.runs, one.runs);
        prop_assert_eq!(merged.findings, one.findings);
        prop_assert_eq!(merged.stats, one.stats);
    }

    #[test]
    fn native_events_round_trip(kind in prop::sample::select(Kind::ALL.to_vec()), seq in 1u64..1_000_000,
                                ms in 0i64..4_000_000_000_000, it in prop::option::of(0u64..100),
                                text in "\\PC{0,20}", score in prop::option::of(0.0f64..1.0)) {
        let mut ev = Event::new(kind);
        ev.seq = Some(seq);
        ev.ts = Some(Ts(ms));
        ev.run_id = Some(text.clone().into());
        ev.iteration = it;
        ev.phase = Some("A".into());
        ev.step = Some(text.clone().into());
        ev.status = Some("ok".into());
        let ev = ev.with_payload(&json!({"score": score, "reason": text, "nested": {"a": [1, 2, {"b": null}]}}));
        let line = ev.to_native_line();
        let back = parse_line(&line).unwrap();
        prop_assert_eq!(&back, &ev);
        prop_assert_eq!(back.to_native_line(), line);
    }

    #[test]
    fn a_single_corrupted_byte_never_panics_nor_drops_untouched_lines(lines in log_strategy(),
            at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        // aif-loop lines only: no seq, so no seq finding can hold an event back.
        let lines: Vec<String> = lines.into_iter().filter(|l| !l.contains("\"v\":")).collect();
        prop_assume!(!lines.is_empty());
        let mut bytes = join(&lines);
        let at = at.index(bytes.len());
        bytes[at] = byte;
        let out = replay_bytes("d", &bytes);
        // Per run, how many lines the corruption did not touch (a line owns its newline; a
        // newline overwritten merges it with the next line, which is touched too).
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        let mut start = 0;
        for l in &lines {
            let end = start + l.len(); // index of its newline
            let touched = (start..=end).contains(&at) || (at + 1 == start && byte != b'\n');
            if !touched {
                let id = parse_line(l).unwrap().run_id.unwrap().into_owned();
                *want.entry(id).or_default() += 1;
            }
            start = end + 1;
        }
        for (id, n) in want {
            let got = out.runs.get(&id).map_or(0, |s| s.events);
            prop_assert!(got >= n, "run {} lost events: {} < {}", id, got, n);
        }
    }
}
