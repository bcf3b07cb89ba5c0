//! A run as `list`, `status` and `serve`'s `/api/runs` show it: the fields and meanings of
//! docs/json.md, one place for all three.

use std::path::Path;

use serde::Serialize;

use crate::analysis::liveness::Standing;
use crate::decode::timestamp::Ts;
use crate::fold::run_state::{RunState, Stop};
use crate::render::run_json::Writer as JsonWriter;

/// The status of a run whose log holds no event yet (no state to tell).
pub const EMPTY: &str = "empty";

/// A run as `list` and `status` show it: the fields and meanings of docs/json.md.
#[derive(Serialize)]
pub struct RunRow<'a> {
    pub run_id: &'a str,
    pub task_alias: &'a str,
    pub status: &'static str,
    pub stop: &'a Stop,
    pub iteration: u64,
    pub max_iterations: Option<u64>,
    pub phase: Option<&'a str>,
    pub last_score: Option<f64>,
    pub updated_at: Option<Ts>,
    /// Milliseconds since the last event, for an interrupted run.
    pub idle_ms: Option<u64>,
    /// The command that continues an interrupted run.
    pub resume: Option<&'a str>,
    pub events: u64,
    pub finding_count: usize,
    pub log_path: &'a Path,
    pub dir: Option<&'a Path>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    /// What the table's first column shows (the folder's name, or the run id for the runs of
    /// one log).
    #[serde(skip)]
    pub name: &'a str,
}

impl<'a> RunRow<'a> {
    /// The row as compact JSON: serde_json's bytes for it (tested), written by hand because
    /// a merged log can have tens of thousands of rows.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let RunRow {
            run_id,
            task_alias,
            status,
            stop,
            iteration,
            max_iterations,
            phase,
            last_score,
            updated_at,
            idle_ms,
            resume,
            events,
            finding_count,
            log_path,
            dir,
            error,
            name: _,
        } = self;
        let mut w = JsonWriter::object_in(out);
        w.key("run_id").string(run_id);
        w.key("task_alias").string(task_alias);
        w.key("status").string(status);
        w.key("stop").stop(stop);
        w.key("iteration").u64(*iteration);
        w.key("max_iterations").opt_u64(*max_iterations);
        w.key("phase").opt_string(*phase);
        w.key("last_score").opt_f64(*last_score);
        w.key("updated_at").ts(*updated_at);
        w.key("idle_ms").opt_u64(*idle_ms);
        w.key("resume").opt_string(*resume);
        w.key("events").u64(*events);
        w.key("finding_count").u64(*finding_count as u64);
        w.key("log_path").string(&log_path.to_string_lossy());
        w.key("dir")
            .opt_string(dir.map(|d| d.to_string_lossy()).as_deref());
        if let Some(e) = error {
            w.key("error").string(e);
        }
        w.close();
    }

    pub fn of(
        name: &'a str,
        s: &'a RunState,
        finding_count: usize,
        run: (&'a Path, Option<&'a Path>),
        error: Option<&'a str>,
        (standing, resume): (Standing, Option<&'a str>),
    ) -> RunRow<'a> {
        RunRow {
            run_id: &s.run_id,
            task_alias: &s.task_alias,
            status: if error.is_some() {
                "unreadable"
            } else if s.events == 0 {
                EMPTY
            } else {
                standing.condition.as_str()
            },
            stop: &s.stop,
            iteration: s.iteration,
            max_iterations: s.max_iterations,
            phase: s.quality_phase(),
            last_score: s.score(),
            updated_at: s.updated_at,
            idle_ms: standing.idle_ms,
            resume,
            events: s.events,
            finding_count,
            log_path: run.0,
            dir: run.1,
            error,
            name,
        }
    }
}
