//! The dashboards' expressions on real tools: `promtool` checks of the sample scrape and the
//! alert rules, and a real Prometheus scraping the sample (its start-up and query helpers are
//! shared with the `live` module).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// An executable on PATH; `None` (with a notice) when absent, a failure under `CI=true`.
pub(super) fn tool(name: &str) -> Option<PathBuf> {
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

pub(super) fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
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
pub(super) fn serve_sample(text: String) -> (u16, Arc<AtomicU64>) {
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

pub(super) fn answer(mut conn: TcpStream, body: &str) -> std::io::Result<()> {
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

pub(super) fn scaled(text: &str, factor: f64) -> String {
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
pub(super) struct Prometheus {
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
    pub(super) fn get(&self, path_and_query: &str) -> (u16, Value) {
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

    pub(super) fn query(&self, expr: &str) -> (u16, Value) {
        self.get(&format!("/api/v1/query?query={}", url_encode(expr)))
    }

    pub(super) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `expr` until it returns a sample for which `ok` holds.
    pub(super) fn wait_for(&mut self, what: &str, expr: &str, ok: impl Fn(f64) -> bool) {
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

pub(super) fn url_encode(s: &str) -> String {
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
pub(super) fn values(result: &Value) -> Vec<f64> {
    result
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["value"][1].as_str())
        .filter_map(|v| v.parse().ok())
        .collect()
}

pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub(super) fn start_prometheus(bin: &Path, dir: &Path, target_port: u16) -> Prometheus {
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
pub(super) fn variable_values(dashboard: &str) -> Vec<BTreeMap<String, String>> {
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
pub(super) fn variables_used(expr: &str) -> Vec<String> {
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

pub(super) fn substitute(expr: &str, vars: &BTreeMap<String, String>) -> String {
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
/// The PromQL blocks of docs/metrics.md, one expression each (PromQL reads `#` comments).
fn doc_examples() -> Vec<String> {
    let doc = read(&repo().join("docs/metrics.md"));
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in doc.lines() {
        match (line.trim(), &mut block) {
            ("```promql", None) => block = Some(String::new()),
            ("```", Some(b)) => {
                out.push(std::mem::take(b));
                block = None;
            }
            (_, Some(b)) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

pub(super) fn evaluate(prom: &Prometheus, ctx: &str, expr: &str) -> Option<String> {
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
                // The phase picker offers every phase of the loop, whichever series has it (a
                // phase attempt with no known duration is only in loopctl_phases_total).
                if label.trim() == "phase" {
                    let values = |selector: &str| -> BTreeSet<String> {
                        let (_, v) = prom.get(&format!(
                            "/api/v1/label/phase/values?match[]={}",
                            url_encode(&substitute(selector, &vars))
                        ));
                        let found = v["data"].as_array().into_iter().flatten();
                        found
                            .filter_map(|x| Some(x.as_str()?.to_string()))
                            .collect()
                    };
                    let offered = values(selector);
                    let every = values(r#"{__name__=~"loopctl_.+",loop=~"$loop"}"#);
                    if offered != every {
                        failures.push(format!(
                            "{name}: $phase offers {offered:?}, the loop's series have {every:?}"
                        ));
                    }
                }
            }
        }
    }
    // Alert expressions: the sample is a bad day on which every alert's condition holds.
    for (alert, expr) in alert_exprs() {
        failures.extend(evaluate(&prom, &alert, &expr));
        ran += 1;
    }
    // docs/metrics.md's example for each metric: it parses and runs (some need data the
    // sample does not hold, such as a run silent for 15 minutes).
    let examples = doc_examples();
    assert!(examples.len() >= 15, "{examples:?}");
    for (i, expr) in examples.iter().enumerate() {
        let (code, v) = prom.query(expr);
        if code != 200 || v["status"] != "success" {
            let n = i + 1;
            failures.push(format!(
                "docs/metrics.md example {n}: HTTP {code} {v}\n  {expr}"
            ));
        }
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
