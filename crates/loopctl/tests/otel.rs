//! `export otel` and the runner's live export against an in-test OTLP receiver: span tree,
//! parents, timestamps, ids, status and attributes, for each dialect and the real corpus.

#[path = "otel/cli.rs"]
mod cli;
mod common;
#[path = "otel/receiver.rs"]
mod receiver;

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{RUN, Sandbox, echo};
use serde_json::{Value, json};

use cli::{fixture, loopctl};
use loopctl_tests::shared;
use opentelemetry_proto::tonic::trace::v1::{Span, span::SpanKind, status::StatusCode};
use receiver::{Receiver, attrs};

/// `export otel PATHS` into a fresh receiver; the spans it got.
fn export(paths: &[&str]) -> Vec<Span> {
    export_with_stderr(paths).0
}

fn export_with_stderr(paths: &[&str]) -> (Vec<Span>, String) {
    let r = Receiver::start();
    let out = loopctl()
        .args(["export", "otel", "--endpoint", &r.base])
        .args(paths)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (r.spans(), err)
}

fn a(s: &Span) -> HashMap<String, String> {
    attrs(&s.attributes)
}

fn ns(rfc3339: &str) -> u64 {
    let t = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .unwrap();
    t.unix_timestamp_nanos() as u64
}

fn roots(spans: &[Span]) -> Vec<&Span> {
    spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect()
}

/// Every span's parent is a root of its trace; ids are well formed and non-zero; times are
/// ordered; ids are unique.
fn assert_tree(spans: &[Span]) {
    let root_ids: HashSet<(&[u8], &[u8])> = roots(spans)
        .iter()
        .map(|r| (r.trace_id.as_slice(), r.span_id.as_slice()))
        .collect();
    let mut seen = HashSet::new();
    for s in spans {
        assert_eq!(s.trace_id.len(), 16);
        assert_eq!(s.span_id.len(), 8);
        assert!(s.trace_id.iter().any(|b| *b != 0) && s.span_id.iter().any(|b| *b != 0));
        assert!(s.end_time_unix_nano >= s.start_time_unix_nano, "{}", s.name);
        assert!(s.start_time_unix_nano > 0);
        assert!(
            seen.insert(s.span_id.clone()),
            "duplicate span id in {}",
            s.name
        );
        if !s.parent_span_id.is_empty() {
            assert!(
                root_ids.contains(&(s.trace_id.as_slice(), s.parent_span_id.as_slice())),
                "{}: parent is no root of its trace",
                s.name
            );
            assert_eq!(s.kind, SpanKind::Internal as i32);
        } else {
            assert_eq!(s.kind, SpanKind::Server as i32);
            assert!(s.name.starts_with("RUN "));
        }
    }
}

fn sorted_ids(spans: &[Span]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = spans
        .iter()
        .map(|s| (s.trace_id.clone(), s.span_id.clone()))
        .collect();
    v.sort();
    v
}

#[test]
fn native_log_as_a_trace_with_original_times_and_stable_ids() {
    let f = fixture("native-clean");
    let spans = export(&[&f]);
    assert_tree(&spans);
    let rs = roots(&spans);
    assert_eq!(rs.len(), 1);
    let root = rs[0];
    assert_eq!(root.name, "RUN native-clean");
    assert_eq!(root.start_time_unix_nano, ns("2026-03-01T09:00:00.125Z"));
    assert_eq!(root.end_time_unix_nano, ns("2026-03-01T09:05:01.000Z"));
    let ra = a(root);
    assert_eq!(ra["cicd.pipeline.name"], "native-clean");
    assert_eq!(ra["cicd.pipeline.run.id"], "native-clean-20260301-090000");
    assert_eq!(ra["cicd.pipeline.result"], "success");
    assert_eq!(root.status.as_ref().unwrap().code, StatusCode::Ok as i32);
    let evals = root
        .events
        .iter()
        .filter(|e| e.name == "evaluation")
        .count();
    assert_eq!(evals, 2);
    let phase = spans
        .iter()
        .find(|s| s.name == "produce")
        .expect("produce span");
    assert_eq!(phase.parent_span_id, root.span_id);
    assert_eq!(phase.start_time_unix_nano, ns("2026-03-01T09:00:01.250Z"));
    assert_eq!(phase.end_time_unix_nano, ns("2026-03-01T09:02:10.500Z"));
    let pa = a(phase);
    assert_eq!(pa["cicd.pipeline.task.name"], "produce");
    assert_eq!(pa["cicd.pipeline.task.run.result"], "success");
    assert_eq!(pa["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(pa["gen_ai.usage.input_tokens"], "1500");
    assert_eq!(pa["gen_ai.usage.output_tokens"], "420");
    // Exported again: the same ids (a backend deduplicates).
    assert_eq!(sorted_ids(&spans), sorted_ids(&export(&[&f])));
}

#[test]
fn aif_loop_steps_are_children_and_a_failed_run_has_error_status() {
    let spans = export(&[&fixture("aif-loop-clean")]);
    assert_tree(&spans);
    assert_eq!(roots(&spans).len(), 1);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"PLAN") && names.contains(&"EVALUATE"),
        "{names:?}"
    );

    let spans = export(&[&fixture("failed-run")]);
    assert_tree(&spans);
    let root = roots(&spans)[0];
    assert_eq!(root.status.as_ref().unwrap().code, StatusCode::Error as i32);
    let ra = a(root);
    assert_eq!(ra["cicd.pipeline.result"], "failure");
    assert_eq!(ra["error.type"], "failure");
    let eval = spans.iter().find(|s| s.name == "EVALUATE").unwrap();
    assert_eq!(eval.status.as_ref().unwrap().code, StatusCode::Error as i32);
    assert!(
        eval.status
            .as_ref()
            .unwrap()
            .message
            .contains("missing score")
    );
    assert_eq!(a(eval)["error.type"], "failure");
}

#[test]
fn avenor_phases_retries_and_usage() {
    let spans = export(&[&fixture("avenor-loop")]);
    assert_tree(&spans);
    let root = roots(&spans)[0];
    assert_eq!(a(root)["loopctl.dialect"], "avenor");
    // A bare Avenor id names no loop: its folder does, as the metrics' `loop` label.
    assert_eq!(a(root)["cicd.pipeline.name"], "avenor-loop");
    assert_eq!(root.name, "RUN avenor-loop");
    // A run never scored has no score (not 0), as `status` shows it.
    assert_eq!(a(root).get("loopctl.score"), None);
    let names: Vec<&str> = spans
        .iter()
        .filter(|s| !s.parent_span_id.is_empty())
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["build", "test", "fix", "test"]);
    assert!(root.events.iter().any(|e| e.name == "retry"));
    let build = spans.iter().find(|s| s.name == "build").unwrap();
    assert_eq!(build.start_time_unix_nano, 1_715_000_001_000 * 1_000_000);
    assert_eq!(a(build)["gen_ai.usage.input_tokens"], "2000");
    assert_eq!(a(build)["gen_ai.agent.name"], "build");
    let last = spans.iter().rfind(|s| s.name == "test").unwrap();
    assert!(last.events.iter().any(|e| e.name == "marker"));
}

#[test]
fn a_run_id_selects_one_run_of_a_log_holding_several() {
    let all = export(&[&fixture("merged-runs")]);
    assert_eq!(roots(&all).len(), 2);
    let r = Receiver::start();
    loopctl()
        .args([
            "--root",
            &fixture(""),
            "export",
            "otel",
            "--endpoint",
            &r.base,
        ])
        .arg("beta-docs-20260304-080500")
        .assert()
        .success();
    let one = r.spans();
    assert_tree(&one);
    assert_eq!(roots(&one).len(), 1);
    assert_eq!(
        a(roots(&one)[0])["cicd.pipeline.run.id"],
        "beta-docs-20260304-080500"
    );
}

#[test]
fn standard_variables_name_the_endpoint_service_resource_and_headers() {
    let r = Receiver::start();
    loopctl()
        .args(["export", "otel", &fixture("native-clean")])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &r.base)
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-team=blue%20sky")
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "host.name=m1,deployment.environment=ci",
        )
        .assert()
        .success();
    let got = r.received();
    assert!(!got.is_empty());
    assert_eq!(got[0].resource["service.name"], "loopctl");
    assert_eq!(got[0].resource["host.name"], "m1");
    assert_eq!(got[0].headers["x-team"], "blue sky");

    let r = Receiver::start();
    loopctl()
        .args(["export", "otel", &fixture("native-clean")])
        .env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/v1/traces", r.base),
        )
        .env("OTEL_SERVICE_NAME", "fleet-7")
        .assert()
        .success();
    assert_eq!(r.received()[0].resource["service.name"], "fleet-7");
}

#[cfg_attr(
    no_shared,
    ignore = "needs ../shared, absent at build time (tests/shared_cfg.rs)"
)]
#[test]
fn the_corpus_exports_as_well_formed_traces() {
    let Some(shared) = shared("otel export of the corpus") else {
        return;
    };
    let corpus = shared.join("corpus");
    let logs: Vec<String> = loopctl_tests::files_below(&corpus)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "ndjson"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(logs.len() >= 5, "{logs:?}");
    let args: Vec<&str> = logs.iter().map(String::as_str).collect();
    let (spans, err) = export_with_stderr(&args);
    assert_tree(&spans);
    // Every log gives its run's root, but the Avenor session stream, which has no timestamp
    // (said on stderr); aif-loop runs give their steps.
    let untimed = err.matches("has no timestamps").count();
    assert_eq!(untimed, 1, "{err}");
    assert!(err.contains("accumulate.ndjson"), "{err}");
    assert_eq!(roots(&spans).len(), logs.len() - untimed);
    assert!(spans.iter().any(|s| s.name == "EVALUATE"));
    let ids = sorted_ids(&spans);
    assert_eq!(ids, sorted_ids(&export(&args)));
}

type SpanEventShape = (String, u64, Vec<(String, String)>);

/// A span as comparable data: everything but the instrumentation scope.
fn shape(s: &Span) -> String {
    let mut attrs: Vec<(String, String)> = a(s).into_iter().collect();
    attrs.sort();
    let events: Vec<SpanEventShape> = s
        .events
        .iter()
        .map(|e| {
            let mut v: Vec<_> = attrs_of(&e.attributes);
            v.sort();
            (e.name.clone(), e.time_unix_nano, v)
        })
        .collect();
    let links: Vec<(Vec<u8>, Vec<u8>)> = s
        .links
        .iter()
        .map(|l| (l.trace_id.clone(), l.span_id.clone()))
        .collect();
    format!(
        "{:?}",
        (
            &s.trace_id,
            &s.span_id,
            &s.parent_span_id,
            &s.name,
            s.kind,
            s.start_time_unix_nano,
            s.end_time_unix_nano,
            attrs,
            events,
            links,
            s.status.as_ref().map(|st| (st.code, st.message.clone())),
        )
    )
}

fn attrs_of(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> Vec<(String, String)> {
    attrs(kvs).into_iter().collect()
}

fn shapes(spans: &[Span]) -> Vec<String> {
    let mut v: Vec<String> = spans.iter().map(shape).collect();
    v.sort();
    v
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn log_of(s: &Sandbox) -> String {
    s.run_dir().join("history.jsonl").display().to_string()
}

/// A loop whose phases write the TRACEPARENT they were given to tp-<phase>-<iteration>.
fn traced_loop() -> Value {
    let tp = |name: &str| format!("printf '%s' \"$TRACEPARENT\" > tp-{name}-$LOOPCTL_ITERATION");
    json!({"max_iterations": 3,
           "pre": [{"name": "build", "run": tp("build")}],
           "loop": [{"name": "work", "run": format!("{}; test $LOOPCTL_ITERATION -ge 2 && {} || true", tp("work"), echo("<|workflow: exit | done|>"))},
                    {"name": "check", "run": tp("check")}],
           "post": [{"name": "report", "run": tp("report")}]})
}

#[test]
fn a_live_run_sends_the_trace_export_otel_gives_of_its_log() {
    let r = Receiver::start();
    let s = Sandbox::new();
    std::fs::write(s.dir.join("loop.json"), traced_loop().to_string()).unwrap();
    let out = s
        .cmd()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &r.base)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .args(RUN)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("otel"), "{err}");
    let live = r.spans();
    assert_tree(&live);
    let names: Vec<&str> = live.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(live.len(), 6, "{names:?}");
    let after = export(&[&log_of(&s)]);
    assert_eq!(shapes(&live), shapes(&after));

    // Each phase process saw TRACEPARENT naming its own span.
    for (name, it) in [
        ("build", 0),
        ("work", 1),
        ("check", 1),
        ("work", 2),
        ("report", 2),
    ] {
        let seen = std::fs::read_to_string(s.dir.join(format!("tp-{name}-{it}"))).unwrap();
        let span = live
            .iter()
            .find(|x| x.name == name && a(x).get("loopctl.iteration") == Some(&it.to_string()))
            .unwrap_or_else(|| panic!("no span {name}@{it}"));
        assert_eq!(
            seen,
            format!("00-{}-{}-01", hex(&span.trace_id), hex(&span.span_id))
        );
    }
}

#[test]
fn a_resumed_live_run_links_its_root_to_the_earlier_session() {
    let r = Receiver::start();
    let s = Sandbox::new();
    let cfg = json!({"max_iterations": 1, "loop": [{"name": "a", "run": "true"}, {"name": "b", "run": "test -f go || sleep 30"}]});
    std::fs::write(s.dir.join("loop.json"), cfg.to_string()).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("loopctl"))
        .current_dir(&s.dir)
        .env_remove("LOOPCTL_ROOT")
        .arg("--root")
        .arg(s.root())
        .args(RUN)
        .args(["-q", "--otlp-endpoint", &r.base])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(s.run_dir().join("history.jsonl"))
        .unwrap_or_default()
        .contains(r#""step":"b""#)
    {
        assert!(Instant::now() < end, "phase b never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    // Killed outright: phase a's span was sent when a ended; no root yet.
    let first = r.spans();
    assert_eq!(
        first.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    std::fs::write(s.dir.join("go"), "").unwrap();
    let out = s
        .cmd()
        .args(["resume", "r1", "--otlp-endpoint", &r.base])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live = r.spans();
    let after = export(&[&log_of(&s)]);
    let rs = roots(&after);
    assert_eq!(rs.len(), 2);
    let resumed = roots(&live);
    assert_eq!(
        resumed.len(),
        1,
        "only the resumed session's root is sent by it"
    );
    assert_eq!(resumed[0].links.len(), 1);
    assert_eq!(resumed[0].links[0].span_id, rs[0].span_id);
    assert_eq!(resumed[0].links[0].trace_id, rs[0].trace_id);
    // What was sent live is what the log gives, but the root the killed session never sent.
    let mut expected = after.clone();
    expected.retain(|x| x.span_id != rs[0].span_id);
    assert_eq!(shapes(&live), shapes(&expected));
}

#[test]
fn an_unreachable_or_slow_collector_leaves_the_loop_alone_with_one_warning() {
    let cfg = json!({"max_iterations": 3, "loop": [{"name": "a", "run": "true"}, {"name": "b", "run": "true"}]});
    let run = |endpoint: Option<&str>| {
        let s = Sandbox::new();
        std::fs::write(s.dir.join("loop.json"), cfg.to_string()).unwrap();
        let mut c = s.cmd();
        c.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT").args(RUN);
        if let Some(e) = endpoint {
            c.args(["--otlp-endpoint", e]);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            out.status.code(),
            s.sentinel(),
            s.state()["stop"].clone(),
            err,
            s,
        )
    };
    let (code, sentinel, stop, _, _) = run(None);
    let slow = Receiver::with_delay(Duration::from_secs(5));
    for endpoint in ["http://127.0.0.1:9", slow.base.as_str()] {
        let (c, sn, st, err, s) = run(Some(endpoint));
        assert_eq!((c, &st), (code, &stop), "{err}");
        let strip = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("RUN=") && !l.contains("_AT="))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&sn), strip(&sentinel));
        assert_eq!(err.matches("otel:").count(), 1, "{endpoint}: {err}");
        assert!(err.contains(endpoint), "{err}");
        // No phase waited for the collector: every gap between events in the log is far
        // shorter than the slow collector's 5 s.
        let ts: Vec<i64> = common::read_events(&s.run_dir().join("history.jsonl"))
            .iter()
            .map(|e| {
                let t = e["ts"].as_str().unwrap();
                (ns(t) / 1_000_000) as i64
            })
            .collect();
        let widest = ts.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        assert!(
            widest < 4000,
            "{endpoint}: a {widest} ms gap between events"
        );
    }
}

/// Prometheus text as `name{k=v,...}` → value (labels sorted), comments left out.
fn prom_series(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = l.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut ls: Vec<String> = labels
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.replace('"', ""))
            .collect();
        ls.sort();
        let v = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap(),
        };
        out.insert(format!("{name}{{{}}}", ls.join(",")), v);
    }
    out
}

fn fmt_le(b: f64) -> String {
    if b.is_infinite() {
        "+Inf".into()
    } else {
        format!("{b}")
    }
}

/// An OTLP metrics request as the Prometheus series it stands for.
fn otlp_series(
    r: &opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest,
) -> HashMap<String, f64> {
    use opentelemetry_proto::tonic::metrics::v1::{
        AggregationTemporality, metric::Data, number_data_point::Value as V,
    };
    let key = |name: &str,
               attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
               extra: Option<String>| {
        let mut ls: Vec<String> = attrs_of(attrs)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        ls.extend(extra);
        ls.sort();
        format!("{name}{{{}}}", ls.join(","))
    };
    let num = |v: &Option<V>| match v {
        Some(V::AsDouble(d)) => *d,
        Some(V::AsInt(i)) => *i as f64,
        None => f64::NAN,
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let mut out = HashMap::new();
    for rm in &r.resource_metrics {
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                match m.data.as_ref().unwrap() {
                    Data::Sum(s) => {
                        assert!(
                            s.is_monotonic && s.aggregation_temporality == cumulative,
                            "{}",
                            m.name
                        );
                        for p in &s.data_points {
                            assert!(p.start_time_unix_nano <= p.time_unix_nano);
                            out.insert(
                                key(&format!("{}_total", m.name), &p.attributes, None),
                                num(&p.value),
                            );
                        }
                    }
                    Data::Gauge(g) => {
                        for p in &g.data_points {
                            out.insert(key(&m.name, &p.attributes, None), num(&p.value));
                        }
                    }
                    Data::Histogram(h) => {
                        assert_eq!(h.aggregation_temporality, cumulative, "{}", m.name);
                        for p in &h.data_points {
                            assert_eq!(p.bucket_counts.len(), p.explicit_bounds.len() + 1);
                            let mut cum = 0u64;
                            let bounds = p.explicit_bounds.iter().copied().chain([f64::INFINITY]);
                            for (c, b) in p.bucket_counts.iter().zip(bounds) {
                                cum += c;
                                let le = Some(format!("le={}", fmt_le(b)));
                                out.insert(
                                    key(&format!("{}_bucket", m.name), &p.attributes, le),
                                    cum as f64,
                                );
                            }
                            out.insert(
                                key(&format!("{}_sum", m.name), &p.attributes, None),
                                p.sum.unwrap(),
                            );
                            out.insert(
                                key(&format!("{}_count", m.name), &p.attributes, None),
                                p.count as f64,
                            );
                        }
                    }
                    other => panic!("{}: unexpected {other:?}", m.name),
                }
            }
        }
    }
    out
}

#[test]
fn serve_pushes_the_metric_set_of_export_prometheus_over_otlp_cumulative() {
    let logs = [
        fixture("native-clean"),
        fixture("avenor-loop"),
        fixture("aif-loop-clean"),
    ];
    let prom = loopctl()
        .args(["export", "prometheus"])
        .args(&logs)
        .output()
        .unwrap();
    let want = prom_series(&String::from_utf8_lossy(&prom.stdout));
    assert!(want.len() > 50, "{}", want.len());

    let r = Receiver::start();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("loopctl"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--otlp-metrics",
            &r.base,
        ])
        .args(&logs)
        .env("OTEL_METRIC_EXPORT_INTERVAL", "100")
        .env("OTEL_SERVICE_NAME", "fleet")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first push may come before the logs are read: wait for one with every series.
    let end = Instant::now() + Duration::from_secs(30);
    let got = loop {
        let last = r.metrics().last().map(otlp_series);
        if let Some(g) = last.filter(|g| want.keys().all(|k| g.contains_key(k))) {
            break g;
        }
        assert!(
            Instant::now() < end,
            "no complete push; got {:?}",
            r.metrics().len()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    child.wait().unwrap();
    for (k, v) in &want {
        assert!(
            (got[k] - v).abs() < 1e-9,
            "{k}: otlp {} vs prometheus {v}",
            got[k]
        );
    }
    let res = &r.metrics()[0].resource_metrics[0].resource;
    assert_eq!(
        attrs(&res.as_ref().unwrap().attributes)["service.name"],
        "fleet"
    );
}

#[test]
fn an_agents_usage_becomes_the_phase_spans_gen_ai_attributes_live_and_replayed() {
    let claude = loopctl_tests::repo().join("fixtures/agents/claude-stream-json.jsonl");
    let r = Receiver::start();
    let s = Sandbox::new();
    let cfg = json!({"max_iterations": 1,
                     "loop": [{"name": "implement", "run": format!("cat '{}'", claude.display())}]});
    std::fs::write(s.dir.join("loop.json"), cfg.to_string()).unwrap();
    let out = s
        .cmd()
        .args(RUN)
        .args(["--otlp-endpoint", &r.base])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fin = common::named(&s.events(), "phase_finished")[0].clone();
    let usage = &fin["payload"]["usage"];
    assert!(usage["input_tokens"].as_u64().is_some(), "{fin}");
    let live = r.spans();
    let span = live.iter().find(|x| x.name == "implement").unwrap();
    let at = a(span);
    assert_eq!(at["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(at["gen_ai.agent.name"], "implement");
    assert_eq!(
        at["gen_ai.usage.input_tokens"],
        usage["input_tokens"].to_string()
    );
    assert_eq!(
        at["gen_ai.usage.output_tokens"],
        usage["output_tokens"].to_string()
    );
    if let Some(m) = usage["model"].as_str() {
        assert_eq!(at["gen_ai.request.model"], m);
    }
    assert_eq!(shapes(&live), shapes(&export(&[&log_of(&s)])));
}

/// Every finding `replay` finds is reported as the other commands report it, and counts under
/// `--strict`: seq problems too, not only damaged lines.
#[test]
fn seq_problems_are_reported_and_fail_strict() {
    let (_, err) = export_with_stderr(&[&fixture("seq-problems")]);
    assert!(
        err.contains("history.jsonl:4: byte 330: seq_gap: seq jumps from 3 to 5"),
        "{err}"
    );
    let r = Receiver::start();
    let out = loopctl()
        .args(["--strict", "export", "otel", "--endpoint", &r.base])
        .arg(fixture("seq-problems"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!r.spans().is_empty(), "the spans are sent all the same");
}

/// A phase whose start no event gives is a point at its end: no duration made up from the
/// session's start (postmortem and the metrics give it none either).
#[test]
fn a_phase_with_no_start_event_gets_no_made_up_duration() {
    let spans = export(&[&fixture("avenor-abort")]);
    // The fixture's lone `phase.end` of plan (run c9d0aa11) has no start.
    let lone: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "plan" && a(s)["cicd.pipeline.run.id"] == "c9d0aa11")
        .collect();
    assert_eq!(lone.len(), 1, "{spans:?}");
    assert_eq!(lone[0].start_time_unix_nano, lone[0].end_time_unix_nano);
}

/// `--json` counts what was sent: a run with no timestamp gives no span and is not counted.
#[test]
fn json_counts_the_runs_sent() {
    let r = Receiver::start();
    let out = loopctl()
        .args(["export", "otel", "--json", "--endpoint", &r.base])
        .args([fixture("avenor-loop"), fixture("avenor-session")])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["logs"].as_u64(), v["runs"].as_u64()), (Some(2), Some(1)));
    assert_eq!(roots(&r.spans()).len(), 1);
}

/// A log named as a file that holds no event is said and exits 1, as every read command and
/// `export prometheus` do; the other logs' spans are sent all the same.
#[test]
fn a_log_with_no_event_is_said_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    let r = Receiver::start();
    let out = loopctl()
        .args(["export", "otel", "--endpoint", &r.base])
        .arg(&empty)
        .arg(fixture("native-clean"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}: the log holds no event", empty.display())),
        "{err}"
    );
    assert_eq!(roots(&r.spans()).len(), 1);
}
