//! What the model holds once runs have ended, counted by this test binary's own allocator: a
//! merged log interleaves thousands of runs, and `serve` keeps the model of all of them
//! (issue 18 §6: RSS <= 150 MiB on the 1 GiB merged log, about 40,000 runs).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use loopctl_export::Options;
use loopctl_export::model::MetricState;

/// Bytes allocated and not yet freed.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The events of one aif-loop run of `iterations` iterations, as the benchmark's generator
/// writes them (`../shared/bench/gen.py`): steps, evaluations, tokens, a stop.
fn aif_run(run: &str, iterations: u64) -> Vec<String> {
    let mut seq = 0;
    let mut lines = Vec::new();
    let mut line = |it: u64, phase: &str, step: &str, event: &str, payload: &str| {
        let ts = format!("2026-02-18T12:{:02}:{:02}.000Z", seq / 60 % 60, seq % 60);
        lines.push(format!(
            r#"{{"ts":"{ts}","run_id":"{run}","seq":{seq},"iteration":{it},"phase":"{phase}","step":"{step}","event":"{event}","status":"ok","payload":{payload}}}"#
        ));
        seq += 1;
    };
    line(
        0,
        "A",
        "INIT",
        "run_started",
        r#"{"goal":"g","config":{"max_iterations":9}}"#,
    );
    let tokens = r#""duration_ms":4600,"tokens_in":1447,"tokens_out":564"#;
    for it in 1..=iterations {
        let phase = if it <= iterations / 2 { "A" } else { "B" };
        line(
            it,
            phase,
            "PLAN",
            "plan_created",
            &format!(r#"{{"steps":6,{tokens}}}"#),
        );
        line(
            it,
            phase,
            "GENERATE",
            "artifact_created",
            &format!(r#"{{"path":"a.py",{tokens}}}"#),
        );
        line(
            it,
            phase,
            "PREPARE_CHECKS",
            "checks_prepared",
            r#"{"count":4}"#,
        );
        let score = 0.3 + 0.05 * it as f64;
        line(
            it,
            phase,
            "EVALUATE",
            "evaluation_done",
            &format!(r#"{{"score":{score:.2},"passed":false,"failed_rules":["r{it}"],{tokens}}}"#),
        );
        line(
            it,
            phase,
            "CRITIQUE",
            "critique_done",
            &format!(r#"{{"issues":2,{tokens}}}"#),
        );
        line(
            it,
            phase,
            "REFINE",
            "refinement_done",
            &format!(r#"{{"changed_files":[],{tokens}}}"#),
        );
        line(
            it,
            phase,
            "ADVANCE",
            "iteration_advanced",
            r#"{"from":1,"to":2}"#,
        );
    }
    line(
        iterations,
        "B",
        "STOP",
        "stopped",
        r#"{"reason":"iteration_limit"}"#,
    );
    lines
}

#[test]
fn an_ended_run_holds_a_few_hundred_bytes_of_the_model() {
    const RUNS: usize = 2000;
    // Interleaved as in a merged log: a few dozen runs open at a time.
    let runs: Vec<Vec<String>> = (0..RUNS)
        .map(|i| aif_run(&format!("billing-svc-20260218-120041-{i:06}"), 8))
        .collect();
    let mut order = Vec::new();
    for window in runs.chunks(40) {
        let longest = window.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..longest {
            order.extend(window.iter().filter_map(|r| r.get(k)));
        }
    }
    let mut m = MetricState::new(Options::default());
    let s = m.add_source("merged");
    let before = LIVE.load(Ordering::Relaxed);
    for l in &order {
        m.apply(s, &loopctl_core::parse_line(l).unwrap());
    }
    let held = LIVE.load(Ordering::Relaxed) - before;
    let per_run = held / RUNS as isize;
    eprintln!("{per_run} bytes per ended run");
    assert_eq!(m.runs().filter(|(_, r)| r.is_live()).count(), 0);
    // The state kept per ended run: its id, alias, status, stop (no series: they are in the
    // totals, under its loop).
    assert!(
        per_run < 1100,
        "{per_run} bytes per ended run ({held} for {RUNS} runs)"
    );
    drop(m);
}
