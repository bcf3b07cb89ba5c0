//! Where spans go and how the service is named: the standard OTEL_* variables, read through a
//! getter so the rules are testable without touching the process environment.

use std::time::Duration;

pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
pub const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
pub const METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
/// Milliseconds between two metric pushes (the OTel SDK's variable; default 60000).
pub const METRIC_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";
pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
pub const TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Milliseconds to wait for a collector's answer (the OTLP exporter spec's variables).
pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
pub const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
pub const METRICS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT";
/// The spec's default wait.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// The OTLP/HTTP default (a collector on this machine).
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// Which OTLP signal a configuration is for: its URL path and its own variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    fn path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }
    /// Its endpoint, headers and timeout variables.
    fn vars(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Signal::Traces => (TRACES_ENDPOINT, TRACES_HEADERS, TRACES_TIMEOUT),
            Signal::Metrics => (METRICS_ENDPOINT, METRICS_HEADERS, METRICS_TIMEOUT),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The full URL the signal is POSTed to (`.../v1/traces`, `.../v1/metrics`).
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, in order (service.name from it unless OTEL_SERVICE_NAME).
    pub resource: Vec<(String, String)>,
    /// How long an export waits for the collector's answer.
    pub timeout: Duration,
    /// The timeout variable in force holds no number of milliseconds: `check` says so (the
    /// default would be used silently, unlike what was set).
    pub timeout_problem: Option<String>,
}

fn set(env: &impl Fn(&str) -> Option<String>, k: &str) -> Option<String> {
    env(k).filter(|v| !v.trim().is_empty())
}

/// `a=b,c=d` with percent-encoded values (the W3C baggage shape the OTel spec uses for
/// headers and resource attributes); malformed pairs are skipped, as the spec allows.
pub fn parse_pairs(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Config {
    /// `flag` (`--endpoint`, `--otlp-endpoint`) is a base URL like OTEL_EXPORTER_OTLP_ENDPOINT;
    /// it wins over the variables. A signal-specific variable is used as is, a base gets
    /// `/v1/traces` appended (the OTLP exporter spec). A flag that already ends with the
    /// signal's path is taken as is (`.../v1/traces/v1/traces` is never what was meant).
    pub fn resolve(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Config {
        Config::resolve_signal(Signal::Traces, flag, env)
    }

    /// `resolve` for `signal` (its own endpoint and headers variables, its URL path).
    pub fn resolve_signal(
        signal: Signal,
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Config {
        let (signal_endpoint, signal_headers, signal_timeout) = signal.vars();
        let base = |b: &str| format!("{}{}", b.trim_end_matches('/'), signal.path());
        let url = match (flag, set(&env, signal_endpoint), set(&env, ENDPOINT)) {
            (Some(f), _, _) if f.trim_end_matches('/').ends_with(signal.path()) => {
                f.trim_end_matches('/').to_string()
            }
            (Some(f), _, _) if !f.is_empty() => base(f),
            (_, Some(t), _) => t,
            (_, _, Some(b)) => base(&b),
            _ => base(DEFAULT_ENDPOINT),
        };
        let headers = set(&env, signal_headers)
            .or_else(|| set(&env, HEADERS))
            .map(|h| parse_pairs(&h))
            .unwrap_or_default();
        let resource: Vec<(String, String)> = set(&env, RESOURCE_ATTRIBUTES)
            .map(|r| parse_pairs(&r))
            .unwrap_or_default();
        let service_name = set(&env, SERVICE_NAME)
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "loopctl".into());
        let timeout_var = [signal_timeout, TIMEOUT]
            .into_iter()
            .find_map(|k| Some((k, set(&env, k)?)));
        let ms = timeout_var.as_ref().map(|(k, v)| {
            v.trim().parse::<u64>().map_err(|_| {
                format!("{k}={v} is not a number of milliseconds (write 10000 for ten seconds)")
            })
        });
        let timeout = match &ms {
            Some(Ok(ms)) if *ms > 0 => Duration::from_millis(*ms),
            _ => DEFAULT_TIMEOUT,
        };
        Config {
            url,
            headers,
            service_name,
            resource,
            timeout,
            timeout_problem: ms.and_then(Result::err),
        }
    }

    /// Whether the URL is one OTLP/HTTP can be sent to (`http://` or `https://` and a host) and
    /// the timeout variable a number, told before any log is read: else a sentence for the user.
    pub fn check(&self) -> Result<(), String> {
        if let Some(p) = &self.timeout_problem {
            return Err(p.clone());
        }
        let url = reqwest::Url::parse(&self.url).map_err(|e| format!("not a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "OTLP/HTTP is sent to an http:// or https:// URL, not {}://",
                url.scheme()
            ));
        }
        // `http:/v1/metrics` (what `http://` becomes with the path appended) parses with
        // `v1` as its host: the text itself must name one after `//`.
        let authority = self.url.split_once("://").map_or("", |(_, rest)| rest);
        if authority.is_empty() || authority.starts_with('/') {
            return Err("the URL names no host".into());
        }
        Ok(())
    }

    /// The live export's settings: only when an endpoint is named (`flag` or a variable).
    pub fn live(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let named = flag.is_some_and(|f| !f.is_empty())
            || set(&env, ENDPOINT).is_some()
            || set(&env, TRACES_ENDPOINT).is_some();
        named.then(|| Config::resolve(flag, env))
    }

    /// `resolve` from the process environment.
    pub fn from_env(flag: Option<&str>) -> Config {
        Config::resolve(flag, |k| std::env::var(k).ok())
    }

    /// `live` from the process environment.
    pub fn live_from_env(flag: Option<&str>) -> Option<Config> {
        Config::live(flag, |k| std::env::var(k).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| v.iter().find(|(n, _)| n == k).map(|(_, x)| x.clone())
    }

    #[test]
    fn the_timeout_is_the_signals_then_the_general_variable_in_ms() {
        let t = |pairs: &[(&str, &str)]| Config::resolve_signal(Signal::Metrics, None, env(pairs));
        assert_eq!(t(&[]).timeout, DEFAULT_TIMEOUT);
        assert_eq!(t(&[(TIMEOUT, "2500")]).timeout, Duration::from_millis(2500));
        let both = [(TIMEOUT, "2500"), (METRICS_TIMEOUT, "700")];
        assert_eq!(t(&both).timeout, Duration::from_millis(700));
        // Another signal's variable is not this one's; 0 is the default.
        assert_eq!(t(&[(TRACES_TIMEOUT, "700")]).timeout, DEFAULT_TIMEOUT);
        assert_eq!(t(&[(TIMEOUT, "0")]).timeout, DEFAULT_TIMEOUT);
        assert_eq!(t(&[(TIMEOUT, "0")]).check(), Ok(()));
        // Nonsense is refused by `check`, naming the variable in force and its value.
        let err = t(&[(TIMEOUT, "2500"), (METRICS_TIMEOUT, "10s")]).check();
        assert!(
            err.unwrap_err()
                .starts_with("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT=10s ")
        );
        let err = t(&[(TIMEOUT, "soon")]).check();
        assert!(
            err.unwrap_err()
                .starts_with("OTEL_EXPORTER_OTLP_TIMEOUT=soon ")
        );
        assert_eq!(t(&[(TRACES_TIMEOUT, "soon")]).check(), Ok(()));
    }

    #[test]
    fn only_http_urls_with_a_host_are_sent_to() {
        let check = |f: &str| Config::resolve(Some(f), env(&[])).check();
        assert_eq!(check("http://c:4318"), Ok(()));
        assert_eq!(check("https://api.honeycomb.io"), Ok(()));
        assert!(check("ftp://c").unwrap_err().contains("not ftp://"));
        assert!(check("not a url").unwrap_err().contains("not a URL"));
        assert!(check("file:///tmp/x").is_err());
        for no_host in ["http://", "https://", "http:///v1/metrics"] {
            assert_eq!(
                check(no_host),
                Err("the URL names no host".to_string()),
                "{no_host}"
            );
        }
        let from_env = Config::resolve(None, env(&[(ENDPOINT, "http://")]));
        assert!(from_env.check().is_err());
    }

    #[test]
    fn endpoint_precedence_follows_the_otlp_spec() {
        let c = Config::resolve(None, env(&[]));
        assert_eq!(c.url, "http://localhost:4318/v1/traces");
        assert_eq!(c.service_name, "loopctl");
        let c = Config::resolve(None, env(&[(ENDPOINT, "http://c:4318/")]));
        assert_eq!(c.url, "http://c:4318/v1/traces");
        let both = [(ENDPOINT, "http://c:4318"), (TRACES_ENDPOINT, "http://t/x")];
        assert_eq!(Config::resolve(None, env(&both)).url, "http://t/x");
        let c = Config::resolve(Some("http://f:1"), env(&both));
        assert_eq!(c.url, "http://f:1/v1/traces");
        for full in ["http://f:1/v1/traces", "http://f:1/v1/traces/"] {
            assert_eq!(
                Config::resolve(Some(full), env(&[])).url,
                "http://f:1/v1/traces"
            );
        }
        let m = Config::resolve_signal(Signal::Metrics, Some("http://f:1/v1/metrics"), env(&[]));
        assert_eq!(m.url, "http://f:1/v1/metrics");
        assert!(Config::live(None, env(&[])).is_none());
        assert!(Config::live(None, env(&[(ENDPOINT, "http://c")])).is_some());
        assert!(Config::live(Some("http://f"), env(&[])).is_some());
        let m = Config::resolve_signal(Signal::Metrics, None, env(&both));
        assert_eq!(m.url, "http://c:4318/v1/metrics");
    }

    #[test]
    fn headers_service_and_resource_attributes() {
        let c = Config::resolve(
            None,
            env(&[
                (HEADERS, "a=1,x-key=s%20p, bad"),
                (RESOURCE_ATTRIBUTES, "service.name=fleet,host.name=h1"),
            ]),
        );
        assert_eq!(
            c.headers,
            [("a".into(), "1".into()), ("x-key".into(), "s p".into())]
        );
        assert_eq!(c.service_name, "fleet");
        assert_eq!(c.resource.len(), 2);
        let c = Config::resolve(
            None,
            env(&[
                (SERVICE_NAME, "svc"),
                (RESOURCE_ATTRIBUTES, "service.name=x"),
            ]),
        );
        assert_eq!(c.service_name, "svc");
    }
}
