//! The edge: `MetricState` as Prometheus metric families, gathered through a `Registry` (which
//! checks names and label sets) and written as text format 0.0.4 or OpenMetrics 1.0.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use loopctl_core::fold::run_state::Status;
use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric as Sample, MetricFamily, MetricType,
};
use prometheus::{Encoder, Registry, TextEncoder};

use crate::model::{
    FINISHED_REASONS, Metric, MetricState, SeriesKey, SourceId, Type, Val, finding_label,
};
use loopctl_core::fold::replay::FindingKind;

const FINDING_KINDS: [FindingKind; 6] = [
    FindingKind::BadLine,
    FindingKind::TornTail,
    FindingKind::Oversize,
    FindingKind::SeqGap,
    FindingKind::SeqDuplicate,
    FindingKind::SeqReorder,
];

/// Buckets of the server's own scrape duration (s).
pub const SCRAPE_BUCKETS: [f64; 10] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// The server's scrape durations: per-bucket counts (the last for +Inf) and the sum.
#[derive(Debug, Default)]
pub struct ScrapeTimes {
    pub buckets: [u64; 11],
    pub sum: f64,
}

impl ScrapeTimes {
    pub fn observe(&mut self, seconds: f64) {
        let i = SCRAPE_BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(SCRAPE_BUCKETS.len());
        self.buckets[i] += 1;
        self.sum += seconds;
    }
}

pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

const LAST_EVENT: &str = "loopctl_run_last_event_timestamp_seconds";
const PHASE_STARTED: &str = "loopctl_run_phase_started_timestamp_seconds";
const BUILD_INFO: &str = "loopctl_build_info";
/// A run whose log says running and whose runner is gone (docs/runner.md, "Run states").
const INTERRUPTED: &str = "interrupted";
pub const SCRAPE_DURATION: &str = "loopctl_scrape_duration_seconds";

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("metrics registry: {0}")]
    Prometheus(#[from] prometheus::Error),
}

/// Whether the runner of a log's running runs is gone (its lock is free): asked at each gather
/// for the logs with running runs, which are then `interrupted`.
pub type RunnerGone = Arc<dyn Fn(SourceId) -> bool + Send + Sync>;

/// Shared state and the server's own figures, seen by the collector at each gather.
#[derive(Clone)]
pub struct Shared {
    pub state: Arc<Mutex<MetricState>>,
    /// The scrapes' durations; `None` outside `serve`.
    pub scrape_seconds: Option<Arc<Mutex<ScrapeTimes>>>,
    /// `None`: no run is found interrupted.
    pub runner_gone: Option<RunnerGone>,
}

struct StateCollector {
    shared: Shared,
    descs: Vec<Desc>,
}

fn descs(scrape: bool) -> Result<Vec<Desc>, prometheus::Error> {
    let mut out = Vec::new();
    for m in Metric::ALL {
        let labels = m.labels().iter().map(|l| l.to_string()).collect();
        out.push(Desc::new(
            m.name().into(),
            m.help().into(),
            labels,
            Default::default(),
        )?);
    }
    let extra: [(&str, &str, &[&str]); 4] = [
        (
            LAST_EVENT,
            "Time of a running run's last event (live runs only).",
            &["loop", "run"],
        ),
        (
            PHASE_STARTED,
            "Start time of a running run's current phase (live runs only).",
            &["loop", "run", "phase"],
        ),
        (BUILD_INFO, "loopctl's version.", &["version"]),
        (
            SCRAPE_DURATION,
            "Time the exporter took to encode each /metrics response (earlier scrapes).",
            &[],
        ),
    ];
    for (name, help, labels) in extra {
        if name == SCRAPE_DURATION && !scrape {
            continue;
        }
        let labels = labels.iter().map(|l| l.to_string()).collect();
        out.push(Desc::new(
            name.into(),
            help.into(),
            labels,
            Default::default(),
        )?);
    }
    Ok(out)
}

impl Collector for StateCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let scrape = self.shared.scrape_seconds.as_ref().map(|s| {
            let t = s.lock().unwrap_or_else(|e| e.into_inner());
            (t.buckets, t.sum)
        });
        let gone = match &self.shared.runner_gone {
            Some(f) => state
                .running_sources()
                .into_iter()
                .filter(|s| f(*s))
                .collect(),
            None => BTreeSet::new(),
        };
        families(&state, scrape, &gone)
    }
}

/// A registry holding one collector that reads `shared` at each gather.
pub fn registry(shared: Shared) -> Result<Registry, EncodeError> {
    let r = Registry::new();
    let descs = descs(shared.scrape_seconds.is_some())?;
    r.register(Box::new(StateCollector { shared, descs }))?;
    Ok(r)
}

fn pair(name: &str, value: &str) -> LabelPair {
    let mut p = LabelPair::default();
    p.set_name(name.to_string());
    p.set_value(value.to_string());
    p
}

fn sample(names: &[&str], values: &[&str]) -> Sample {
    Sample::from_label(names.iter().zip(values).map(|(n, v)| pair(n, v)).collect())
}

fn family(name: &str, help: &str, ty: MetricType, metrics: Vec<Sample>) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.to_string());
    f.set_help(help.to_string());
    f.set_field_type(ty);
    f.set_metric(metrics);
    f
}

fn gauge(names: &[&str], values: &[&str], v: f64) -> Sample {
    let mut s = sample(names, values);
    let mut g = Gauge::default();
    g.set_value(v);
    s.set_gauge(g);
    s
}

/// `loopctl_runs_finished_total` at 0 for each (status, exit reason) pair of every known loop
/// that has no series yet: Prometheus's `increase()` needs a sample before a run's end to see it.
fn finished_zeros(state: &MetricState, m: Metric) -> Vec<(SeriesKey, Val)> {
    if m != Metric::RunsFinished {
        return Vec::new();
    }
    let mut zeros = Vec::new();
    for lp in state.loops() {
        for (status, reasons) in FINISHED_REASONS {
            for reason in *reasons {
                let key = (
                    m,
                    vec![lp.to_string(), status.to_string(), reason.to_string()],
                );
                if state.get(&key).is_none() {
                    zeros.push((key, Val::Count(0)));
                }
            }
        }
    }
    zeros
}

/// Every family, in a fixed order; families without samples are left out. The running runs of
/// the logs in `gone` (their runner's lock is free) are `interrupted`, without live series.
pub fn families(
    state: &MetricState,
    scrape: Option<([u64; 11], f64)>,
    gone: &BTreeSet<SourceId>,
) -> Vec<MetricFamily> {
    let series = state.series();
    let mut interrupted: BTreeMap<&str, f64> = BTreeMap::new();
    for (source, r) in state.running_runs() {
        if gone.contains(&source) {
            *interrupted.entry(r.loop_label.as_str()).or_default() += 1.0;
        }
    }
    let mut out = Vec::new();
    for m in Metric::ALL {
        let names = m.labels();
        let mut samples = Vec::new();
        if m == Metric::Runs {
            // Every status of every loop, zeros included: "no failed runs" is a value.
            for lp in state.loops() {
                let lost = interrupted.get(lp).copied().unwrap_or(0.0);
                for st in [
                    Status::Running,
                    Status::Completed,
                    Status::Stopped,
                    Status::Failed,
                ] {
                    let key = (m, vec![lp.to_string(), st.as_str().to_string()]);
                    let mut v = match state.get(&key) {
                        Some(Val::Count(n)) => *n as f64,
                        _ => 0.0,
                    };
                    if st == Status::Running {
                        v -= lost;
                    }
                    let values: Vec<&str> = key.1.iter().map(String::as_str).collect();
                    samples.push(gauge(names, &values, v));
                }
                samples.push(gauge(names, &[lp, INTERRUPTED], lost));
            }
        } else if m == Metric::LogFindings {
            // Every kind from the start, so that `increase()` sees the first one.
            for kind in FINDING_KINDS {
                let key = (m, vec![finding_label(kind).to_string()]);
                let mut s = sample(names, &[finding_label(kind)]);
                let mut c = Counter::default();
                if let Some(Val::Count(n)) = state.get(&key) {
                    c.set_value(*n as f64);
                }
                s.set_counter(c);
                samples.push(s);
            }
        } else {
            let zeros = finished_zeros(state, m);
            let mut of_m: Vec<(&SeriesKey, &Val)> = series
                .iter()
                .filter(|(k, _)| k.0 == m)
                .copied()
                .chain(zeros.iter().map(|(k, v)| (k, v)))
                .collect();
            of_m.sort_by(|a, b| a.0.cmp(b.0));
            for (key, val) in of_m {
                let values: Vec<&str> = key.1.iter().map(String::as_str).collect();
                let mut s = sample(names, &values);
                match (m.kind(), val) {
                    (Type::Counter, Val::Count(n)) => {
                        let mut c = Counter::default();
                        c.set_value(*n as f64 / m.scale());
                        s.set_counter(c);
                    }
                    (Type::Gauge, Val::Count(n)) => {
                        let mut g = Gauge::default();
                        g.set_value(*n as f64 / m.scale());
                        s.set_gauge(g);
                    }
                    (Type::Histogram, Val::Hist(h)) => {
                        let mut hist = Histogram::default();
                        hist.set_sample_count(h.count.max(0) as u64);
                        hist.set_sample_sum(h.sum as f64 / m.scale());
                        let mut cum = 0i64;
                        let buckets = m
                            .buckets()
                            .iter()
                            .zip(&h.buckets)
                            .map(|(bound, n)| {
                                cum += n;
                                let mut b = Bucket::default();
                                b.set_upper_bound(*bound);
                                b.set_cumulative_count(cum.max(0) as u64);
                                b
                            })
                            .collect();
                        hist.set_bucket(buckets);
                        s.set_histogram(hist);
                    }
                    _ => continue,
                }
                samples.push(s);
            }
        }
        let ty = match m.kind() {
            Type::Counter => MetricType::COUNTER,
            Type::Gauge => MetricType::GAUGE,
            Type::Histogram => MetricType::HISTOGRAM,
        };
        if !samples.is_empty() {
            out.push(family(m.name(), m.help(), ty, samples));
        }
    }
    if state.options.per_run_series {
        let (mut last, mut phase) = (Vec::new(), Vec::new());
        for (source, r) in state.running_runs() {
            if gone.contains(&source) {
                continue;
            }
            let (lp, run) = (r.loop_label.as_str(), r.state.run_id.as_str());
            if let Some(ts) = r.last_event() {
                last.push(gauge(&["loop", "run"], &[lp, run], ts.0 as f64 / 1e3));
            }
            if let Some((name, ts)) = r.open_phase() {
                phase.push(gauge(
                    &["loop", "run", "phase"],
                    &[lp, run, state.phase_label(lp, name)],
                    ts.0 as f64 / 1e3,
                ));
            }
        }
        for (name, help, samples) in [
            (
                LAST_EVENT,
                "Time of a running run's last event (live runs only).",
                last,
            ),
            (
                PHASE_STARTED,
                "Start time of a running run's current phase (live runs only).",
                phase,
            ),
        ] {
            if !samples.is_empty() {
                out.push(family(name, help, MetricType::GAUGE, samples));
            }
        }
    }
    out.push(family(
        BUILD_INFO,
        "loopctl's version.",
        MetricType::GAUGE,
        vec![gauge(&["version"], &[env!("CARGO_PKG_VERSION")], 1.0)],
    ));
    if let Some((counts, sum)) = scrape {
        let mut hist = Histogram::default();
        let mut cum = 0;
        let buckets = SCRAPE_BUCKETS
            .iter()
            .zip(counts)
            .map(|(bound, n)| {
                cum += n;
                let mut b = Bucket::default();
                b.set_upper_bound(*bound);
                b.set_cumulative_count(cum);
                b
            })
            .collect();
        hist.set_bucket(buckets);
        hist.set_sample_count(counts.iter().sum());
        hist.set_sample_sum(sum);
        let mut s = sample(&[], &[]);
        s.set_histogram(hist);
        out.push(family(
            SCRAPE_DURATION,
            "Time the exporter took to encode each /metrics response (earlier scrapes).",
            MetricType::HISTOGRAM,
            vec![s],
        ));
    }
    out
}

/// Text format 0.0.4 (what node_exporter's textfile collector reads too: no timestamps).
pub fn text(families: &[MetricFamily]) -> String {
    let mut buf = Vec::new();
    // Writing to a Vec cannot fail, and the families come from `families` (valid names).
    if TextEncoder::new().encode(families, &mut buf).is_err() {
        buf.clear();
    }
    String::from_utf8(buf).unwrap_or_default()
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn labels(s: &Sample, extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> = s
        .get_label()
        .iter()
        .map(|p| format!("{}=\"{}\"", p.name(), escape(p.value())))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// OpenMetrics 1.0 text (the prometheus crate writes only 0.0.4): counters named without
/// `_total` in their metadata, `# EOF` at the end.
pub fn openmetrics(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for f in families {
        let name = f.name();
        let (base, ty) = match f.get_field_type() {
            MetricType::COUNTER => (name.strip_suffix("_total").unwrap_or(name), "counter"),
            MetricType::HISTOGRAM => (name, "histogram"),
            _ => (name, "gauge"),
        };
        let _ = writeln!(out, "# TYPE {base} {ty}");
        let _ = writeln!(out, "# HELP {base} {}", f.help().replace('\n', "\\n"));
        for s in f.get_metric() {
            match f.get_field_type() {
                MetricType::COUNTER => {
                    let v = number(s.get_counter().get_value());
                    let _ = writeln!(out, "{base}_total{} {v}", labels(s, None));
                }
                MetricType::HISTOGRAM => {
                    let h = s.get_histogram();
                    for b in h.get_bucket() {
                        let le = Some(("le", number(b.upper_bound())));
                        let n = b.cumulative_count();
                        let _ = writeln!(out, "{name}_bucket{} {n}", labels(s, le));
                    }
                    let inf = Some(("le", "+Inf".to_string()));
                    let n = h.get_sample_count();
                    let _ = writeln!(out, "{name}_bucket{} {n}", labels(s, inf));
                    let _ = writeln!(out, "{name}_count{} {n}", labels(s, None));
                    let sum = number(h.get_sample_sum());
                    let _ = writeln!(out, "{name}_sum{} {sum}", labels(s, None));
                }
                _ => {
                    let v = number(s.get_gauge().get_value());
                    let _ = writeln!(out, "{name}{} {v}", labels(s, None));
                }
            }
        }
    }
    out.push_str("# EOF\n");
    out
}
