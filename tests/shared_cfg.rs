//! Build script of the packages whose tests read `../shared` (the real-world corpus). Without
//! `../shared` beside the checkout those tests are marked ignored, with the reason, so `cargo
//! test` shows them as skipped instead of passing silently. `LOOPCTL_SHARED=DIR` names it
//! elsewhere (a git worktree has no `../shared` beside it). Under `CI=true` they always run, and
//! fail loudly when `../shared` is missing (CI always has it). After adding `../shared`, `touch
//! tests/shared_cfg.rs` to run them. The same holds for the dashboards' tests and Prometheus's
//! tools (`promtool`, `prometheus`) on `PATH`.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_shared)");
    println!("cargo::rustc-check-cfg=cfg(no_prometheus)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=LOOPCTL_SHARED");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    // The dashboards' tests run promtool and prometheus (Debian's prometheus package): without
    // them they show as ignored, with the reason; under CI=true they run and fail loudly.
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    let tools = on_path("promtool") && on_path("prometheus");
    if !ci && !tools {
        println!("cargo::rustc-cfg=no_prometheus");
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let repo = manifest
        .ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .unwrap_or(&manifest);
    // As `loopctl_tests::shared_dir`.
    let shared = match std::env::var_os("LOOPCTL_SHARED") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo.join("../shared"),
    };
    if shared.is_dir() {
        // Tracked so that the tests are ignored again if it goes away; it is small.
        println!("cargo::rerun-if-changed={}", shared.display());
    } else if ci {
        // Not ignored: `loopctl_tests::shared` fails the tests loudly.
    } else {
        println!("cargo::rustc-cfg=no_shared");
    }
}
