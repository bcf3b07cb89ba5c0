//! Parse, replay, stagnation and postmortem throughput in MB/s on a generated aif-loop log (the shape of
//! ../shared/bench/gen.py). The end-to-end comparison with jq/DuckDB is bench/compare.sh.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopctl_core::analysis::liveness::Liveness;
use loopctl_core::analysis::postmortem::{Format, Report, TIMELINE_EDGE};
use loopctl_core::analysis::stagnation::{Config, assess};
use loopctl_core::fold::counts::{ChunkTally, Tally};
use loopctl_core::fold::fold_bytes;
use loopctl_core::fold::trace::Traces;
use loopctl_core::{Replay, Ts, parse_line, replay_bytes};

fn generated_log(runs: usize, per_run: usize) -> Vec<u8> {
    let kinds = [
        "plan_created",
        "artifact_created",
        "checks_prepared",
        "evaluation_done",
        "critique_done",
        "refinement_done",
        "iteration_advanced",
    ];
    let mut out = String::new();
    for i in 0..per_run {
        for r in 0..runs {
            let kind = kinds[i % kinds.len()];
            let payload = match kind {
                "evaluation_done" => format!(r#"{{"score":0.{:02},"passed":false,"failed_rules":["r1","r4"],"duration_ms":4211,"tokens_in":1200,"tokens_out":300}}"#, i % 100),
                "iteration_advanced" => format!(r#"{{"from":{i},"to":{},"best_score":0.5}}"#, i + 1),
                _ => r#"{"path":"src/domain/course.rs","bytes":1234,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","duration_ms":2000,"tokens_in":1000,"tokens_out":300}"#.to_string(),
            };
            out.push_str(&format!(
                r#"{{"ts":"2026-02-18T12:{:02}:{:02}.123Z","run_id":"courses-api-ddd-20260218-120000-{r:06}","seq":{i},"iteration":{},"phase":"A","step":"EVALUATE","event":"{kind}","status":"ok","payload":{payload}}}"#,
                i / 60 % 60, i % 60, i / 7 + 1
            ));
            out.push('\n');
        }
    }
    out.into_bytes()
}

fn bench(c: &mut Criterion) {
    let log = generated_log(16, 2000);
    let mut g = c.benchmark_group("log");
    g.throughput(Throughput::Bytes(log.len() as u64));
    g.bench_function("parse_line", |b| {
        b.iter(|| {
            let text = std::str::from_utf8(&log).unwrap();
            text.lines().filter(|l| parse_line(l).is_ok()).count()
        })
    });
    g.bench_function("replay", |b| {
        b.iter(|| replay_bytes("bench", &log).runs.len())
    });
    // `list FILE`'s rows: the log counted in one chunk, folding what a row shows.
    g.bench_function("rows", |b| {
        b.iter(|| {
            let mut t = Tally::with_rows(0);
            t.push(ChunkTally::read_rows(&log, 0, "bench", 1 << 20));
            t.finish_rows().map(|o| o.runs.len())
        })
    });
    // `stagnation FILE`: one read folding run states and traces, then every run assessed.
    g.bench_function("stagnation", |b| {
        b.iter(|| {
            let (replay, traces) = fold_log(&log, Traces::lean("bench"));
            let outcome = replay.finish();
            let traces = traces.into_runs();
            let cfg = Config::default();
            outcome
                .runs
                .keys()
                .filter_map(|id| traces.get(id))
                .filter(|t| assess(t, &cfg, Some(Ts::from_millis(0)), Liveness::Unknown).stagnating)
                .count()
        })
    });
    // `postmortem FILE`: the same read, then one run's report rendered as text.
    g.bench_function("postmortem", |b| b.iter(|| postmortem_text(&log)));
    g.finish();
    // One run of many events: the traces' folds must stay linear in the run's length.
    let single = generated_log(1, 32_000);
    let mut g = c.benchmark_group("single_run");
    g.throughput(Throughput::Bytes(single.len() as u64));
    g.bench_function("stagnation", |b| {
        b.iter(|| {
            let (_, traces) = fold_log(&single, Traces::lean("bench"));
            let cfg = Config::default();
            traces
                .into_runs()
                .values()
                .filter(|t| assess(t, &cfg, None, Liveness::Unknown).stagnating)
                .count()
        })
    });
    g.bench_function("postmortem", |b| b.iter(|| postmortem_text(&single)));
    g.finish();
}

/// What `postmortem FILE` does: states and traces that keep a timeline's ends, in one pass,
/// then the last run's report as text.
fn postmortem_text(log: &[u8]) -> usize {
    let (replay, traces) = fold_log(log, Traces::ends("bench", TIMELINE_EDGE));
    let outcome = replay.finish();
    let traces = traces.into_runs();
    let Some((id, state)) = outcome.runs.iter().next_back() else {
        return 0;
    };
    let trace = &traces[id];
    let verdict = assess(
        trace,
        &Config::default(),
        Some(Ts::from_millis(0)),
        Liveness::Unknown,
    );
    Report::build_ends(state, trace, &verdict)
        .render(Format::Text)
        .len()
}

/// What `stagnation` (lean traces) and `postmortem` (`Traces::ends`) fold a log into, in one
/// pass.
fn fold_log(log: &[u8], traces: Traces) -> (Replay, Traces) {
    let mut p = (Replay::new("bench"), traces);
    fold_bytes(&mut p, log, 1 << 20);
    p
}

criterion_group!(benches, bench);
criterion_main!(benches);
