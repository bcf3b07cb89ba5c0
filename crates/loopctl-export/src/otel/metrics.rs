//! `serve --otlp-metrics`: the metric set `/metrics` shows, pushed to an OTLP/HTTP collector
//! at an interval, cumulative.
//!
//! The source is the very families the Prometheus endpoint encodes (`encode::families` through
//! the server's registry), converted to OTLP messages: a counter becomes a monotonic
//! cumulative sum (its `_total` suffix dropped, as OTel names counters), a gauge a gauge, a
//! histogram a cumulative explicit-bucket histogram with the same bounds. Built with
//! opentelemetry-proto's types rather than the SDK's instruments: the SDK has no observable
//! histogram, and its metric data cannot be constructed, so it could not carry series that
//! are rebuilt from logs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric::Data, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prometheus::proto::{MetricFamily, MetricType};
use prost::Message;

use super::config::Config;

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.to_string())),
        }),
        ..KeyValue::default()
    }
}

pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn number(labels: Vec<KeyValue>, start: u64, now: u64, v: f64) -> NumberDataPoint {
    NumberDataPoint {
        attributes: labels,
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsDouble(v)),
        ..NumberDataPoint::default()
    }
}

/// One Prometheus family as an OTLP metric (`None` for types loopctl does not export).
pub fn metric(f: &MetricFamily, start: u64, now: u64) -> Option<Metric> {
    let labels = |m: &prometheus::proto::Metric| {
        m.get_label()
            .iter()
            .map(|l| kv(l.name(), l.value()))
            .collect::<Vec<_>>()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let samples = f.get_metric();
    let (name, data) = match f.get_field_type() {
        MetricType::COUNTER => {
            let name = f.name().strip_suffix("_total").unwrap_or(f.name());
            let data_points = samples
                .iter()
                .map(|m| number(labels(m), start, now, m.get_counter().get_value()))
                .collect();
            let sum = Sum {
                data_points,
                aggregation_temporality: cumulative,
                is_monotonic: true,
            };
            (name, Data::Sum(sum))
        }
        MetricType::GAUGE => {
            let data_points = samples
                .iter()
                .map(|m| number(labels(m), start, now, m.get_gauge().get_value()))
                .collect();
            (f.name(), Data::Gauge(Gauge { data_points }))
        }
        MetricType::HISTOGRAM => {
            let data_points = samples
                .iter()
                .map(|m| {
                    let h = m.get_histogram();
                    let finite: Vec<_> = h
                        .get_bucket()
                        .iter()
                        .filter(|b| b.upper_bound().is_finite())
                        .collect();
                    let mut counts = Vec::with_capacity(finite.len() + 1);
                    let mut below = 0u64;
                    for b in &finite {
                        let c = b.cumulative_count();
                        counts.push(c.saturating_sub(below));
                        below = c;
                    }
                    counts.push(h.get_sample_count().saturating_sub(below));
                    HistogramDataPoint {
                        attributes: labels(m),
                        start_time_unix_nano: start,
                        time_unix_nano: now,
                        count: h.get_sample_count(),
                        sum: Some(h.get_sample_sum()),
                        bucket_counts: counts,
                        explicit_bounds: finite.iter().map(|b| b.upper_bound()).collect(),
                        ..HistogramDataPoint::default()
                    }
                })
                .collect();
            let hist = Histogram {
                data_points,
                aggregation_temporality: cumulative,
            };
            (f.name(), Data::Histogram(hist))
        }
        _ => return None,
    };
    Some(Metric {
        name: name.to_string(),
        description: f.help().to_string(),
        unit: if name.ends_with("_seconds") { "s" } else { "" }.to_string(),
        data: Some(data),
        ..Metric::default()
    })
}

/// The families as one OTLP request, under `cfg`'s resource (service name and attributes).
pub fn request(
    families: &[MetricFamily],
    cfg: &Config,
    start: SystemTime,
    now: SystemTime,
) -> ExportMetricsServiceRequest {
    let (start, now) = (unix_nanos(start), unix_nanos(now));
    let mut resource = vec![kv("service.name", &cfg.service_name)];
    resource.extend(
        cfg.resource
            .iter()
            .filter(|(k, _)| k != "service.name")
            .map(|(k, v)| kv(k, v)),
    );
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource,
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "loopctl".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                metrics: families
                    .iter()
                    .filter_map(|f| metric(f, start, now))
                    .collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// Where and how often `serve` pushes.
#[derive(Debug, Clone)]
pub struct Push {
    pub config: Config,
    pub interval: Duration,
}

impl Push {
    /// The interval: OTEL_METRIC_EXPORT_INTERVAL (ms) when set and valid, else 60 s.
    pub fn interval_from(env: impl Fn(&str) -> Option<String>) -> Duration {
        env(super::config::METRIC_INTERVAL)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .map_or(Duration::from_secs(60), Duration::from_millis)
    }
}

/// Pushes `gather()` every interval until `stop`, and once more on the way out unless the push
/// before failed (a collector that did not answer would hold the shutdown for another
/// timeout). The first failure goes to `warn`, once; the server goes on either way.
pub fn push_until(
    p: &Push,
    gather: impl Fn() -> Vec<MetricFamily>,
    stop: &AtomicBool,
    warn: impl Fn(&str),
) {
    let start = SystemTime::now();
    super::send::tls_provider();
    let client = match reqwest::blocking::Client::builder()
        .timeout(p.config.timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => return warn(&format!("otlp metrics: {}: {e}", p.config.url)),
    };
    let mut warned = false;
    // Whether the last push was answered.
    let mut send = || -> bool {
        let body = request(&gather(), &p.config, start, SystemTime::now()).encode_to_vec();
        let mut req = client
            .post(&p.config.url)
            .header("Content-Type", "application/x-protobuf")
            .body(body);
        for (k, v) in &p.config.headers {
            req = req.header(k, v);
        }
        let failed = match req.send() {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status())),
            Err(e) => Some(super::send::with_causes(&e)),
        };
        let answered = failed.is_none();
        if let Some(why) = failed
            && !std::mem::replace(&mut warned, true)
        {
            warn(&format!(
                "otlp metrics: {}: {why}; the server goes on",
                p.config.url
            ));
        }
        answered
    };
    let mut next = Instant::now();
    let mut answered = true;
    while !stop.load(Ordering::SeqCst) {
        if Instant::now() >= next {
            answered = send();
            next = Instant::now() + p.interval;
        }
        std::thread::sleep(Duration::from_millis(50).min(p.interval));
    }
    if answered {
        send();
    }
}
