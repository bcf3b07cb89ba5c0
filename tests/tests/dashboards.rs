//! `dashboards/` (issue 18) against the metric contract in `docs/metrics.md`: the structure of
//! the Grafana dashboards and alert rules, the sample scrape, and every panel and alert
//! expression run through a real `promtool` and a real Prometheus fed the sample scrape (the
//! `prometheus` module holds those tests and the helpers that start and query the tools).
//!
//! `dashboards/testdata/sample.prom` is a hand-written bad day on which every alert holds; the
//! `live` module runs the same expressions on the real exporter's scrape of the fixtures and
//! the corpus.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use loopctl_tests::repo;
use serde_json::Value;

#[path = "dashboards/live.rs"]
mod live;
#[path = "dashboards/prometheus.rs"]
mod prometheus;

use prometheus::*;

const DASHBOARDS: [&str; 2] = ["loopctl-overview.json", "loopctl-loop.json"];
/// Grafana's built-in panel types the dashboards may use (no plugin to install).
const PANEL_TYPES: [&str; 6] = [
    "stat",
    "timeseries",
    "bargauge",
    "table",
    "piechart",
    "gauge",
];
/// Grafana unit ids the dashboards may use (a typo would show as a literal suffix).
const UNITS: [&str; 5] = ["short", "none", "s", "percentunit", "currencyUSD"];
/// Grafana's built-in interval variables, as the tests substitute them.
const BUILTINS: [(&str, &str); 3] = [
    ("__rate_interval", "1m"),
    ("__range", "5m"),
    ("__interval", "15s"),
];

fn dashboards_dir() -> PathBuf {
    repo().join("dashboards")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn dashboard(name: &str) -> Value {
    let path = dashboards_dir().join(name);
    serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(rel: &str) -> serde_json::Value {
    let path = dashboards_dir().join(rel);
    serde_norway::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel, rows' nested panels included (rows themselves too).
fn all_panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels array") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

fn is_row(p: &Value) -> bool {
    p["type"] == "row"
}

fn str_of<'a>(v: &'a Value, ctx: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{ctx}: expected a string, got {v}"))
}

/// `(where, expr)` of every target of every data panel.
fn panel_exprs(name: &str, d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in all_panels(d).into_iter().filter(|p| !is_row(p)) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let ctx = format!("{name}: panel {:?} target {}", p["title"], t["refId"]);
            out.push((ctx.clone(), str_of(&t["expr"], &ctx).to_string()));
        }
    }
    out
}

/// `(alert name, expr)` of every rule in alerts.yaml.
fn alert_exprs() -> Vec<(String, String)> {
    let doc = yaml("alerts.yaml");
    let mut out = Vec::new();
    for g in doc["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let name = str_of(&r["alert"], "alert name").to_string();
            let expr = str_of(&r["expr"], &name).trim().to_string();
            out.push((name, expr));
        }
    }
    assert!(!out.is_empty(), "alerts.yaml has no rules");
    out
}

/// The metric names an expression uses (loopctl's only: every series it queries is ours).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while let Some(at) = expr[i..].find("loopctl_") {
        let start = i + at;
        let mut end = start;
        while end < b.len() && ident(b[end]) {
            end += 1;
        }
        if start == 0 || !ident(b[start - 1]) {
            out.insert(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

/// The function whose parentheses directly enclose byte `at` of `expr`, if any.
fn enclosing_function(expr: &str, at: usize) -> Option<&str> {
    let b = expr.as_bytes();
    let mut depth = 0usize;
    for i in (0..at).rev() {
        match b[i] {
            b')' => depth += 1,
            b'(' if depth > 0 => depth -= 1,
            b'(' => {
                let head = expr[..i].trim_end();
                let start = head
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(0, |p| p + 1);
                return Some(&head[start..]);
            }
            _ => {}
        }
    }
    None
}

/// Counter series (`_total`, and a histogram's `_bucket`/`_sum`/`_count`) used outside
/// `rate()`/`increase()`: their raw value only says how long the exporter has been replaying.
fn raw_counters(expr: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for name in metric_names(expr) {
        let counter = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .any(|s| name.ends_with(s));
        if !counter {
            continue;
        }
        let mut from = 0;
        while let Some(at) = expr[from..].find(&name) {
            let pos = from + at;
            from = pos + name.len();
            let whole = expr[from..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
            if whole && !matches!(enclosing_function(expr, pos), Some("rate" | "increase")) {
                bad.push(name.clone());
            }
        }
    }
    bad
}

/// Metric names and types the contract defines: the rows of docs/metrics.md's metric tables.
fn contract() -> BTreeMap<String, String> {
    let doc = read(&repo().join("docs/metrics.md"));
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let (name, typ) = (cells[1].trim_matches('`'), cells[2]);
        if name.starts_with("loopctl_") && ["counter", "gauge", "histogram"].contains(&typ) {
            out.insert(name.to_string(), typ.to_string());
        }
    }
    out
}

/// The sample scrape: metric family → type, and every series name in it.
struct Sample {
    text: String,
    types: BTreeMap<String, String>,
    series: BTreeSet<String>,
}

fn sample() -> Sample {
    let text = read(&dashboards_dir().join("testdata/sample.prom"));
    let mut types = BTreeMap::new();
    let mut series = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(n), Some(t)) = (it.next(), it.next()) {
                types.insert(n.to_string(), t.to_string());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            series.insert(line[..end].to_string());
        }
    }
    Sample {
        text,
        types,
        series,
    }
}

/// A name an expression may use for a contract metric: itself, or a histogram's series.
fn defined(name: &str, contract: &BTreeMap<String, String>) -> bool {
    contract.contains_key(name)
        || ["_bucket", "_sum", "_count"].iter().any(|s| {
            name.strip_suffix(s)
                .is_some_and(|base| contract.get(base).is_some_and(|t| t == "histogram"))
        })
}

/// The metrics issue 18 names (section 2), each with its type.
const REQUIRED: [(&str, &str); 19] = [
    ("loopctl_runs", "gauge"),
    ("loopctl_runs_started_total", "counter"),
    ("loopctl_runs_finished_total", "counter"),
    ("loopctl_run_duration_seconds", "histogram"),
    ("loopctl_run_iterations", "histogram"),
    ("loopctl_phase_duration_seconds", "histogram"),
    ("loopctl_phases_total", "counter"),
    ("loopctl_phase_retries_total", "counter"),
    ("loopctl_evaluations_total", "counter"),
    ("loopctl_evaluation_score", "histogram"),
    ("loopctl_stagnation_verdicts_total", "counter"),
    ("loopctl_tokens_total", "counter"),
    ("loopctl_cost_usd_total", "counter"),
    ("loopctl_log_findings_total", "counter"),
    ("loopctl_events_total", "counter"),
    ("loopctl_run_last_event_timestamp_seconds", "gauge"),
    ("loopctl_run_phase_started_timestamp_seconds", "gauge"),
    ("loopctl_build_info", "gauge"),
    ("loopctl_scrape_duration_seconds", "histogram"),
];

#[test]
fn contract_and_sample_agree() {
    let contract = contract();
    for (name, typ) in REQUIRED {
        assert_eq!(
            contract.get(name).map(String::as_str),
            Some(typ),
            "docs/metrics.md: {name}"
        );
    }
    let s = sample();
    assert_eq!(
        contract.keys().collect::<Vec<_>>(),
        s.types.keys().collect::<Vec<_>>(),
        "docs/metrics.md and sample.prom define different metric families"
    );
    for (name, typ) in &contract {
        assert_eq!(
            &s.types[name], typ,
            "{name}: type in docs/metrics.md vs sample.prom"
        );
        let present = match typ.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .all(|x| s.series.contains(&format!("{name}{x}"))),
            _ => s.series.contains(name),
        };
        assert!(present, "{name}: no series in sample.prom");
    }
    // Live-run series exist exactly for the running runs: one last-event gauge per running run.
    let value_of = |prefix: &str| -> f64 {
        s.text
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    for lp in s
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("loopctl_runs{loop=\""))
    {
        let lp = &lp[..lp.find('"').expect("loop label")];
        let running = value_of(&format!("loopctl_runs{{loop=\"{lp}\",status=\"running\"}}"));
        let live = s
            .text
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "loopctl_run_last_event_timestamp_seconds{{loop=\"{lp}\","
                ))
            })
            .count();
        assert_eq!(
            running, live as f64,
            "{lp}: running runs vs live-run series"
        );
    }
    // Bounded cardinality: only the two live-run gauges carry `run`.
    let live = [
        "loopctl_run_last_event_timestamp_seconds",
        "loopctl_run_phase_started_timestamp_seconds",
    ];
    for line in s.text.lines().filter(|l| !l.starts_with('#')) {
        let name = &line[..line.find(['{', ' ']).unwrap_or(line.len())];
        for banned in ["run=", "iteration=", "session", "path="] {
            let allowed = banned == "run=" && live.contains(&name);
            assert!(
                allowed
                    || !line.contains(&format!("{{{banned}"))
                        && !line.contains(&format!(",{banned}")),
                "unbounded label {banned} on {line}"
            );
        }
    }
}

/// The values of the `status` label, as docs/metrics.md lists them.
fn statuses() -> Vec<String> {
    let doc = read(&repo().join("docs/metrics.md"));
    let row = doc
        .lines()
        .find_map(|l| l.strip_prefix("| `status` | "))
        .expect("docs/metrics.md: the status label's row");
    let values = row.split(':').next().unwrap_or_default();
    values
        .split(", ")
        .map(|v| v.trim_matches('`').to_string())
        .collect()
}

/// A panel "by status" names every run status in its description.
#[test]
fn panels_by_status_name_every_run_status() {
    let statuses = statuses();
    assert!(statuses.len() >= 5, "{statuses:?}");
    for name in DASHBOARDS {
        let d = dashboard(name);
        for p in all_panels(&d) {
            if !p["title"].as_str().is_some_and(|t| t.contains("by status")) {
                continue;
            }
            let desc = p["description"].as_str().unwrap_or_default();
            for s in &statuses {
                assert!(desc.contains(s.as_str()), "{name}: no {s:?} in {desc:?}");
            }
        }
    }
}

#[test]
fn dashboards_are_well_formed() {
    let contract = contract();
    let s = sample();
    for name in DASHBOARDS {
        let d = dashboard(name);
        assert!(
            d["uid"].as_str().is_some_and(|u| !u.is_empty()),
            "{name}: uid"
        );
        assert!(
            d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
            "{name}: schemaVersion"
        );
        let vars: BTreeMap<&str, &Value> = d["templating"]["list"]
            .as_array()
            .expect("templating.list")
            .iter()
            .map(|v| (str_of(&v["name"], name), v))
            .collect();
        let ds = vars.get("datasource").expect("a datasource variable");
        assert_eq!(ds["type"], "datasource", "{name}");
        assert_eq!(ds["query"], "prometheus", "{name}");
        let required: &[&str] = if name == "loopctl-loop.json" {
            &["loop", "phase"]
        } else {
            &["loop"]
        };
        for v in required {
            let var = vars
                .get(v)
                .unwrap_or_else(|| panic!("{name}: no ${v} variable"));
            assert_eq!(var["datasource"]["uid"], "${datasource}", "{name}: ${v}");
        }
        if name == "loopctl-loop.json" {
            assert_eq!(
                vars["loop"]["multi"], false,
                "the drill-down shows one loop"
            );
            assert_eq!(vars["phase"]["includeAll"], true, "{name}: $phase");
        }

        let mut ids = BTreeSet::new();
        let mut boxes: Vec<(String, [u64; 4])> = Vec::new();
        for p in all_panels(&d) {
            let title = p["title"].as_str().unwrap_or_default().to_string();
            let id = p["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: {title}: id"));
            assert!(ids.insert(id), "{name}: duplicate panel id {id}");
            let g = &p["gridPos"];
            let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| {
                g[k].as_u64()
                    .unwrap_or_else(|| panic!("{name}: {title}: gridPos.{k}"))
            });
            assert!(
                w >= 1 && h >= 1 && x + w <= 24,
                "{name}: {title}: gridPos {g}"
            );
            for (other, [ox, oy, ow, oh]) in &boxes {
                let overlap = x < ox + ow && *ox < x + w && y < oy + oh && *oy < y + h;
                assert!(!overlap, "{name}: {title:?} overlaps {other:?}");
            }
            boxes.push((title.clone(), [x, y, w, h]));
            if is_row(p) {
                continue;
            }
            let ctx = format!("{name}: panel {title:?}");
            assert!(!title.is_empty(), "{name}: panel {id} has no title");
            let desc = p["description"].as_str().unwrap_or_default();
            assert!(!desc.trim().is_empty(), "{ctx}: no description");
            let unit = p["fieldConfig"]["defaults"]["unit"]
                .as_str()
                .unwrap_or_default();
            assert!(!unit.is_empty(), "{ctx}: no unit");
            // Grafana shows an unknown panel type as "plugin not found", an unknown unit as text.
            assert!(
                PANEL_TYPES.contains(&str_of(&p["type"], &ctx)),
                "{ctx}: type {}",
                p["type"]
            );
            assert!(
                UNITS.contains(&unit),
                "{ctx}: unit {unit:?} is not one of {UNITS:?}"
            );
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{ctx}: datasource");
            let targets = p["targets"].as_array().filter(|t| !t.is_empty());
            for t in targets.unwrap_or_else(|| panic!("{ctx}: no targets")) {
                assert_eq!(
                    t["datasource"]["uid"], "${datasource}",
                    "{ctx}: target datasource"
                );
                assert!(
                    t["refId"].as_str().is_some_and(|r| !r.is_empty()),
                    "{ctx}: refId"
                );
                assert!(
                    t["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                    "{ctx}: expr"
                );
            }
        }

        for (var, v) in vars.iter().filter(|(_, v)| v["type"] == "query") {
            let query = str_of(&v["query"], name);
            for n in metric_names(query) {
                assert!(
                    defined(&n, &contract),
                    "{name}: ${var}: {n} is not in docs/metrics.md"
                );
                assert!(
                    s.series.contains(&n),
                    "{name}: ${var}: {n} is not in sample.prom"
                );
            }
        }
        for (ctx, expr) in panel_exprs(name, &d) {
            check_expr(&ctx, &expr, &contract, &s);
            for var in variables_used(&expr) {
                assert!(
                    vars.contains_key(var.as_str()) || BUILTINS.iter().any(|(b, _)| *b == var),
                    "{ctx}: ${var} is not a variable of the dashboard"
                );
            }
        }
    }
}

fn check_expr(ctx: &str, expr: &str, contract: &BTreeMap<String, String>, s: &Sample) {
    let names = metric_names(expr);
    assert!(!names.is_empty(), "{ctx}: uses no loopctl metric: {expr}");
    for n in &names {
        assert!(defined(n, contract), "{ctx}: {n} is not in docs/metrics.md");
        assert!(s.series.contains(n), "{ctx}: {n} is not in sample.prom");
    }
    let raw = raw_counters(expr);
    assert!(
        raw.is_empty(),
        "{ctx}: {raw:?} not inside rate()/increase(): {expr}"
    );
}

#[test]
fn the_expression_checks_can_fail() {
    assert_eq!(
        raw_counters("sum(loopctl_runs_started_total)"),
        ["loopctl_runs_started_total"]
    );
    assert_eq!(
        raw_counters("histogram_quantile(0.5, sum by (le) (loopctl_run_iterations_bucket))"),
        ["loopctl_run_iterations_bucket"]
    );
    assert!(
        raw_counters("sum by (loop) (increase(loopctl_runs_started_total{loop=~\"a\"}[1h]))")
            .is_empty()
    );
    assert!(!defined("loopctl_runs_total", &contract()));
    assert!(defined("loopctl_run_iterations_bucket", &contract()));
}

#[test]
fn alert_rules_are_well_formed_and_all_unit_tested() {
    let contract = contract();
    let s = sample();
    let doc = yaml("alerts.yaml");
    let mut names = BTreeSet::new();
    for g in doc["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let name = str_of(&r["alert"], "alert").to_string();
            let sev = r["labels"]["severity"].as_str().unwrap_or_default();
            assert!(
                ["info", "warning", "critical"].contains(&sev),
                "{name}: severity {sev:?}"
            );
            for a in ["summary", "description"] {
                let text = r["annotations"][a].as_str().unwrap_or_default();
                assert!(!text.trim().is_empty(), "{name}: no {a}");
                // `loopctl stop` refuses the logs another tool writes: advice to use it says
                // which runs it stops.
                if text.contains("loopctl stop") {
                    assert!(
                        text.contains("aif-loop") && text.contains("Avenor"),
                        "{name}: {a} suggests `loopctl stop` for every run: {text}"
                    );
                }
            }
            assert!(names.insert(name.clone()), "duplicate alert {name}");
        }
    }
    for (name, expr) in alert_exprs() {
        check_expr(&name, &expr, &contract, &s);
    }
    // Every alert has a case where it fires and one where it does not.
    let tests = yaml("alerts.test.yaml");
    let (mut fires, mut silent) = (BTreeSet::new(), BTreeSet::new());
    for t in tests["tests"].as_array().expect("tests") {
        for case in t["alert_rule_test"].as_array().into_iter().flatten() {
            let name = str_of(&case["alertname"], "alertname").to_string();
            let n = case["exp_alerts"].as_array().map_or(0, Vec::len);
            if n > 0 {
                fires.insert(name)
            } else {
                silent.insert(name)
            };
        }
    }
    assert_eq!(fires, names, "alerts without a firing test case");
    assert_eq!(silent, names, "alerts without a silent test case");
}

/// The image builds with the toolchain the workspace says it needs, and the README says the
/// same (the lock's crates set the floor: polars' sysinfo needs 1.95).
#[test]
fn the_image_and_the_readme_name_the_workspace_s_rust_version() {
    let manifest = read(&repo().join("Cargo.toml"));
    let version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let dockerfile = read(&dashboards_dir().join("Dockerfile"));
    assert!(
        dockerfile.contains(&format!("FROM rust:{version}-")),
        "dashboards/Dockerfile does not build with rust {version}"
    );
    let readme = read(&repo().join("README.md"));
    assert!(
        readme.contains(&format!("Rust {version} or newer")),
        "README.md does not say Rust {version}"
    );
}

#[test]
fn deployment_files_parse_and_point_at_each_other() {
    let compose = yaml("docker-compose.yml");
    for svc in ["prometheus", "grafana", "loopctl"] {
        assert!(
            compose["services"][svc].is_object(),
            "docker-compose.yml: no {svc} service"
        );
    }
    let prom = yaml("prometheus.yml");
    let targets: Vec<&str> = prom["scrape_configs"]
        .as_array()
        .expect("scrape_configs")
        .iter()
        .flat_map(|c| c["static_configs"].as_array().into_iter().flatten())
        .flat_map(|c| c["targets"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        targets.iter().any(|t| t.ends_with(":9477")),
        "prometheus.yml scrapes {targets:?}"
    );
    let ds = yaml("provisioning/datasources/prometheus.yml");
    let sources = ds["datasources"].as_array().expect("datasources");
    assert!(
        sources.iter().any(|d| d["type"] == "prometheus"),
        "no Prometheus datasource"
    );
    let provider = yaml("provisioning/dashboards/loopctl.yml");
    let path = provider["providers"][0]["options"]["path"]
        .as_str()
        .expect("provider path");
    // The compose file mounts the dashboards where the provider looks for them.
    let mounts = compose["services"]["grafana"]["volumes"]
        .as_array()
        .expect("grafana volumes");
    assert!(
        mounts
            .iter()
            .filter_map(Value::as_str)
            .any(|m| m.ends_with(&format!(":{path}:ro")) || m.ends_with(&format!(":{path}"))),
        "grafana does not mount the dashboards at {path}: {mounts:?}"
    );
}
