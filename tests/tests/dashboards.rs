//! `dashboards/` (issue 18) against the metric contract in `docs/metrics.md`: the structure of
//! the Grafana dashboards and alert rules, the sample scrape, and every panel and alert
//! expression run through a real `promtool` and a real Prometheus fed the sample scrape.
//!
//! `dashboards/testdata/sample.prom` is a hand-written bad day on which every alert holds; the
//! `live` module runs the same expressions on the real exporter's scrape of the fixtures and
//! the corpus.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loopctl_tests::repo;
use serde_json::Value;

#[path = "dashboards/live.rs"]
mod live;

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

// ---- real promtool ----

/// An executable on PATH; `None` (with a notice) when absent, a failure under `CI=true`.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{name} is missing and CI=true: .ci/run installs Debian's prometheus package");
        }
        eprintln!("notice: skipping: {name} not found (apt-get install prometheus)");
    }
    found
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let Some(bin) = tool("promtool") else {
        return (true, String::new());
    };
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(dashboards_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    let input = stdin.unwrap_or_default().to_string();
    let mut pipe = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("promtool");
    writer.join().expect("writer").expect("write to promtool");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
#[cfg_attr(
    no_prometheus,
    ignore = "promtool or prometheus not on PATH (apt-get install prometheus)"
)]
fn promtool_accepts_the_sample_scrape_and_rejects_a_bad_one() {
    if tool("promtool").is_none() {
        return;
    }
    let s = sample();
    let (ok, out) = promtool(&["check", "metrics"], Some(&s.text));
    assert!(ok && out.trim().is_empty(), "promtool check metrics: {out}");
    // The check can fail: a counter without `_total` is a lint error.
    let bad = s
        .text
        .replace("loopctl_runs_started_total", "loopctl_runs_started_count");
    let (ok, out) = promtool(&["check", "metrics"], Some(&bad));
    assert!(
        !ok && out.contains("_total"),
        "promtool accepted a bad scrape: {out}"
    );
}

#[test]
#[cfg_attr(
    no_prometheus,
    ignore = "promtool or prometheus not on PATH (apt-get install prometheus)"
)]
fn promtool_checks_and_unit_tests_the_alert_rules() {
    if tool("promtool").is_none() {
        return;
    }
    let (ok, out) = promtool(&["check", "rules", "alerts.yaml"], None);
    assert!(ok, "promtool check rules: {out}");
    let (ok, out) = promtool(&["test", "rules", "alerts.test.yaml"], None);
    assert!(ok, "promtool test rules: {out}");
    // The compose stack's config, with the rule file it loads.
    let (ok, out) = promtool(&["check", "config", "prometheus.yml"], None);
    assert!(ok, "promtool check config: {out}");
}

// ---- a real Prometheus scraping the sample ----

/// Serves sample.prom at /metrics; scrape n multiplies every counter and histogram series by n,
/// so counters grow (rates are non-zero) while ratios and quantiles stay those of the sample.
fn serve_sample(text: String) -> (u16, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the sample server");
    let port = listener.local_addr().expect("addr").port();
    let scrapes = Arc::new(AtomicU64::new(0));
    let count = scrapes.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            let _ = answer(conn, &scaled(&text, n as f64));
        }
    });
    (port, scrapes)
}

fn answer(mut conn: TcpStream, body: &str) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn scaled(text: &str, factor: f64) -> String {
    let mut types: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(n), Some(t)) = (it.next(), it.next()) {
                types.insert(n, t);
            }
        }
        let grows = !line.starts_with('#') && {
            let name = &line[..line.find(['{', ' ']).unwrap_or(line.len())];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|b| types.get(b) == Some(&"histogram"))
                })
                .unwrap_or(name);
            matches!(types.get(family), Some(&"counter" | &"histogram"))
        };
        match line.rsplit_once(' ') {
            Some((series, v)) if grows => {
                let v: f64 = v
                    .parse()
                    .unwrap_or_else(|_| panic!("sample value in {line}"));
                out.push_str(&format!("{series} {}\n", v * factor));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Kills Prometheus when the test ends, failed or not.
struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn get(&self, path_and_query: &str) -> (u16, Value) {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to Prometheus");
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            conn,
            "GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
        )
        .expect("request");
        let mut resp = String::new();
        conn.read_to_string(&mut resp).expect("response");
        let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (code, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn query(&self, expr: &str) -> (u16, Value) {
        self.get(&format!("/api/v1/query?query={}", url_encode(expr)))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `expr` until it returns a sample for which `ok` holds.
    fn wait_for(&mut self, what: &str, expr: &str, ok: impl Fn(f64) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "prometheus exited ({status}) while waiting for {what}:\n{}",
                    self.log()
                );
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                let (_, v) = self.query(expr);
                if values(&v["data"]["result"]).iter().any(|x| ok(*x)) {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The sample values of an instant query's vector result.
fn values(result: &Value) -> Vec<f64> {
    result
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["value"][1].as_str())
        .filter_map(|v| v.parse().ok())
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn start_prometheus(bin: &Path, dir: &Path, target_port: u16) -> Prometheus {
    let rules = dashboards_dir().join("alerts.yaml");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: loopctl\n    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n",
            rules.display()
        ),
    )
    .expect("write prometheus.yml");
    let port = free_port();
    let log = dir.join("prometheus.log");
    let log_file = std::fs::File::create(&log).expect("log file");
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .expect("start prometheus");
    Prometheus { child, port, log }
}

/// The values each dashboard variable takes in the test runs (one run per combination).
fn variable_values(dashboard: &str) -> Vec<BTreeMap<String, String>> {
    let mut base: BTreeMap<String, String> = BUILTINS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    base.insert("window".into(), "1h".into());
    let combos: Vec<Vec<(&str, &str)>> = if dashboard == "loopctl-loop.json" {
        vec![
            vec![("loop", "docs-refresh"), ("phase", ".*")],
            vec![("loop", "docs-refresh"), ("phase", "(write|review)")],
        ]
    } else {
        // All, and a multi-value selection as Grafana formats it for a regex.
        vec![
            vec![("loop", ".*")],
            vec![("loop", "(courses-api-ddd|docs-refresh)")],
        ]
    };
    combos
        .into_iter()
        .map(|c| {
            let mut m = base.clone();
            m.extend(c.into_iter().map(|(k, v)| (k.to_string(), v.to_string())));
            m
        })
        .collect()
}

/// `$name` and `${name}` in an expression.
fn variables_used(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let braced = rest.starts_with('{');
        let body = if braced { &rest[1..] } else { rest };
        let end = body
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(body.len());
        out.push(body[..end].to_string());
    }
    out
}

fn substitute(expr: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = expr.to_string();
    // Longest names first, so `$__range` does not eat the start of `$__rate_interval`.
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for n in names {
        out = out
            .replace(&format!("${{{n}}}"), &vars[n])
            .replace(&format!("${n}"), &vars[n]);
    }
    assert!(!out.contains('$'), "unsubstituted variable in {out}");
    out
}

/// Runs one expression; returns why it fails the test, if it does.
fn evaluate(prom: &Prometheus, ctx: &str, expr: &str) -> Option<String> {
    let (code, v) = prom.query(expr);
    if code != 200 || v["status"] != "success" {
        return Some(format!("{ctx}: HTTP {code} {v}\n  {expr}"));
    }
    let result = &v["data"]["result"];
    let vals = values(result);
    if vals.is_empty() {
        return Some(format!("{ctx}: no data\n  {expr}"));
    }
    if !vals.iter().any(|x| x.is_finite()) {
        return Some(format!("{ctx}: only NaN/Inf: {result}\n  {expr}"));
    }
    None
}

#[test]
#[cfg_attr(
    no_prometheus,
    ignore = "promtool or prometheus not on PATH (apt-get install prometheus)"
)]
fn every_panel_and_alert_expression_returns_data_from_a_real_prometheus() {
    let Some(bin) = tool("prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (target, scrapes) = serve_sample(sample().text);
    let mut prom = start_prometheus(&bin, dir.path(), target);
    prom.wait_for("the first scrape (up == 1)", r#"up{job="loopctl"}"#, |v| {
        v == 1.0
    });
    // Enough samples for rate() over the shortest window, counters having moved between them.
    prom.wait_for(
        "5 scrapes",
        r#"count_over_time(up{job="loopctl"}[1m])"#,
        |v| v >= 5.0,
    );
    assert!(scrapes.load(Ordering::SeqCst) >= 5);

    let mut failures = Vec::new();
    let mut ran = 0;
    for name in DASHBOARDS {
        let d = dashboard(name);
        for vars in variable_values(name) {
            for (ctx, expr) in panel_exprs(name, &d) {
                let ctx = format!("{ctx} with {vars:?}");
                failures.extend(evaluate(&prom, &ctx, &substitute(&expr, &vars)));
                ran += 1;
            }
            // A variable's `label_values(selector, label)` must find its label in the data.
            for v in d["templating"]["list"].as_array().into_iter().flatten() {
                if v["type"] != "query" {
                    continue;
                }
                let def = str_of(&v["query"], name);
                let inner = def
                    .strip_prefix("label_values(")
                    .and_then(|r| r.strip_suffix(')'))
                    .unwrap_or_else(|| {
                        panic!("{name}: variable {} is not label_values: {def}", v["name"])
                    });
                let (selector, label) = inner
                    .rsplit_once(',')
                    .expect("label_values(selector, label)");
                let expr = format!(
                    "count by ({}) ({})",
                    label.trim(),
                    substitute(selector, &vars)
                );
                failures.extend(evaluate(
                    &prom,
                    &format!("{name}: variable {}", v["name"]),
                    &expr,
                ));
            }
        }
    }
    // Alert expressions: the sample is a bad day on which every alert's condition holds.
    for (alert, expr) in alert_exprs() {
        failures.extend(evaluate(&prom, &alert, &expr));
        ran += 1;
    }
    // Prometheus loaded the same rules and evaluates them without error.
    let (_, rules) = prom.get("/api/v1/rules");
    let loaded: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(
        loaded.len(),
        alert_exprs().len(),
        "rules Prometheus loaded: {rules}"
    );
    for r in loaded {
        if r["health"] == "err" {
            failures.push(format!("rule {}: {}", r["name"], r["lastError"]));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} expressions failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{ran} expressions returned data from Prometheus");
}
