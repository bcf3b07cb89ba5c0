//! What the OTel tests share: loopctl without the caller's OTEL_* settings, fixtures.

use assert_cmd::Command;

/// loopctl with no OTEL_* or LOOPCTL_ROOT variable of the test's environment.
pub fn loopctl() -> Command {
    let mut c = Command::cargo_bin("loopctl").unwrap();
    for k in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "LOOPCTL_ROOT",
    ] {
        c.env_remove(k);
    }
    c
}

/// A fixture's path.
pub fn fixture(name: &str) -> String {
    loopctl_tests::repo()
        .join("fixtures")
        .join(name)
        .display()
        .to_string()
}
