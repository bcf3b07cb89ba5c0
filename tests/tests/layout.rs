//! The code's layout holds: the core's modules import one another one way (no cycles), a
//! file in crates/ over 900 lines says at its top why it is kept long, and readers of logs
//! leave threads to the fold driver.

use std::collections::BTreeSet;

use loopctl_tests::module_graph::Graph;
use loopctl_tests::{files_below, repo};

/// Import cycles known and being removed, each as its modules (sorted). A listed cycle that no
/// longer occurs fails the test too, so that the list only shrinks.
const KNOWN_CYCLES: &[&[&str]] = &[];

/// Files over the limit that other branches are reshaping right now; they leave this list when
/// those branches are merged.
const LONG_FILES_BEING_SPLIT: &[&str] = &[];

const LINE_LIMIT: usize = 900;
const WHY_LONG: &[&str] = &["long because", "kept whole"];

fn cycles_outside(graph: &Graph, known: &[&[&str]]) -> (Vec<String>, Vec<String>) {
    let found = graph.cycles();
    let new = found
        .iter()
        .filter(|(mods, _)| !known.iter().any(|k| k.iter().eq(mods.iter())))
        .map(|(mods, path)| match mods.len() {
            2 => path.clone(),
            _ => format!("{path} (all of: {})", mods.join(", ")),
        })
        .collect();
    let gone = known
        .iter()
        .filter(|k| !found.iter().any(|(mods, _)| k.iter().eq(mods.iter())))
        .map(|k| k.join(" <-> "))
        .collect();
    (new, gone)
}

#[test]
fn core_modules_import_one_another_without_cycles() {
    let graph = Graph::of_crate(&repo().join("crates/loopctl-core/src"));
    assert!(
        graph.edges.contains_key("decode::single_pass")
            && graph.edges["decode::single_pass"].contains("decode::event"),
        "the scan did not read the core's modules: {:?}",
        graph.edges.keys().collect::<Vec<_>>()
    );
    let (new, gone) = cycles_outside(&graph, KNOWN_CYCLES);
    assert!(
        new.is_empty(),
        "import cycles between loopctl-core's modules (make the dependency one-way, e.g. move \
         what both need into a module of its own):\n{}",
        new.join("\n")
    );
    assert!(
        gone.is_empty(),
        "these known cycles are gone: remove them from KNOWN_CYCLES:\n{}",
        gone.join("\n")
    );
}

fn sources(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

#[test]
fn the_scan_names_a_new_cycle() {
    let graph = Graph::of_sources(&sources(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::f;\npub fn g() { f() }\n"),
        ("b.rs", "pub fn f() { crate::a::g() }\n"),
    ]));
    let (new, _) = cycles_outside(&graph, &[]);
    assert_eq!(new, ["a -> b -> a"]);
}

#[test]
fn the_scan_follows_re_exports_and_super() {
    // `user` reaches `deep::model` through the root's `pub use deep::model as m`, and
    // `deep::model` reaches `user` through `super::super`.
    let graph = Graph::of_sources(&sources(&[
        (
            "lib.rs",
            "mod deep;\nmod user;\npub use deep::model as m;\n",
        ),
        ("deep/mod.rs", "pub mod model;\n"),
        (
            "deep/model.rs",
            "pub struct T;\nfn f() -> super::super::user::U { todo!() }\n",
        ),
        ("user.rs", "use crate::m::{self, T};\npub struct U(m::T);\n"),
    ]));
    let (new, _) = cycles_outside(&graph, &[]);
    assert_eq!(new, ["deep::model -> user -> deep::model"]);
}

#[test]
fn comments_strings_and_test_modules_make_no_cycle() {
    let graph = Graph::of_sources(&sources(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        (
            "a.rs",
            "// crate::b::f\n/* crate::b::f */\npub fn g() -> char {\n    let _ = \"crate::b::f\";\n    \
             let _ = r#\"{ crate::b::f \"#;\n    '{'\n}\n\n#[cfg(test)]\nmod tests {\n    \
             use super::*;\n    use crate::b::f;\n}\n",
        ),
        ("b.rs", "pub fn f() -> char { crate::a::g() }\n"),
    ]));
    assert_eq!(cycles_outside(&graph, &[]), (vec![], vec![]));
    assert_eq!(
        graph.edges["a::tests"],
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    assert!(graph.edges["a"].is_empty(), "{:?}", graph.edges["a"]);
}

#[test]
fn a_known_cycle_that_is_gone_is_reported() {
    let graph = Graph::of_sources(&sources(&[("lib.rs", "pub mod a;\n"), ("a.rs", "")]));
    assert_eq!(
        cycles_outside(&graph, &[&["a", "b"]]),
        (vec![], vec!["a <-> b".to_string()])
    );
}

/// Files over `LINE_LIMIT` lines with no `long because` or `kept whole` in their first 15 lines.
fn unexplained_long_files(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter_map(|(path, text)| {
            let lines = text.lines().count();
            let head = text
                .lines()
                .take(15)
                .collect::<Vec<_>>()
                .join("\n")
                .to_lowercase();
            (lines > LINE_LIMIT && !WHY_LONG.iter().any(|w| head.contains(w)))
                .then(|| format!("{path}: {lines} lines"))
        })
        .collect()
}

#[test]
fn a_long_file_without_a_note_is_named() {
    let long = "fn f() {}\n".repeat(LINE_LIMIT + 1);
    let noted = format!("//! One parser, kept whole: splitting it would scatter one loop.\n{long}");
    let files = sources(&[
        ("big.rs", &long),
        ("noted.rs", &noted),
        ("small.rs", "fn f() {}\n"),
    ]);
    assert_eq!(
        unexplained_long_files(&files),
        [format!("big.rs: {} lines", LINE_LIMIT + 1)]
    );
}

#[test]
fn files_in_crates_over_900_lines_say_why() {
    let root = repo();
    let files: Vec<(String, String)> = files_below(&root.join("crates"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            (rel, text)
        })
        .collect();
    assert!(files.len() > 20, "found only {} source files", files.len());
    let long = unexplained_long_files(&files);
    let offenders: Vec<&String> = long
        .iter()
        .filter(|l| {
            !LONG_FILES_BEING_SPLIT
                .iter()
                .any(|f| l.starts_with(&format!("{f}:")))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "split these files by what they hold, or say at the top why one is kept whole \
         (`long because` / `kept whole`):\n{}",
        offenders
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let settled: Vec<&&str> = LONG_FILES_BEING_SPLIT
        .iter()
        .filter(|f| !long.iter().any(|l| l.starts_with(&format!("{f}:"))))
        .collect();
    assert!(
        settled.is_empty(),
        "no longer long (or now explained): remove from LONG_FILES_BEING_SPLIT: {settled:?}"
    );
}

/// A test that reads `../shared` is shown as ignored, with the reason, where `../shared` is
/// absent (a user's clone): its package runs `tests/shared_cfg.rs` as build script and the
/// test carries the `no_shared` ignore attribute. Without both, such a test passes silently.
#[test]
fn tests_that_read_shared_show_as_ignored_without_it() {
    let root = repo();
    let mut missing = Vec::new();
    for f in files_below(&root.join("crates"))
        .into_iter()
        .chain(files_below(&root.join("tests/tests")))
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains("shared(\"") {
                continue;
            }
            // The attributes above the enclosing `fn`.
            let Some(fn_at) = (0..=i)
                .rev()
                .find(|&j| lines[j].trim_start().starts_with("fn "))
            else {
                continue;
            };
            let attrs = lines[fn_at.saturating_sub(6)..fn_at].join("\n");
            if attrs.contains("#[test]") && !attrs.contains("no_shared") {
                missing.push(format!("{}:{}", f.display(), fn_at + 1));
            }
        }
        if text.contains("shared(\"") {
            let mut dir = f.parent();
            while let Some(d) = dir {
                if d.join("Cargo.toml").is_file() {
                    let manifest = std::fs::read_to_string(d.join("Cargo.toml")).unwrap();
                    if !manifest.contains("shared_cfg.rs") {
                        missing.push(format!("{}: no shared_cfg.rs build script", d.display()));
                    }
                    break;
                }
                dir = d.parent();
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "tests reading ../shared without the no_shared ignore attribute or build script:\n{}",
        missing.join("\n")
    );
}

/// Where threads may be handed work over a log's chunks or a root's logs: the fold driver's
/// one scheduler. Other threads in loopctl (the runner's process pipes, the server, output
/// serialization) are not reading logs.
const SCHEDULER: &str = "crates/loopctl-store/src/fold/";
/// Folders that read logs and so must leave threads to the driver.
const READERS: &[&str] = &["crates/loopctl-store/src/", "crates/loopctl/src/cmd/"];
const THREAD_USE: &[&str] = &["thread::scope", "thread::spawn", "Condvar", "rayon"];

/// The files of `files` outside the scheduler that hand work to threads themselves.
fn schedulers_outside_the_driver(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(path, _)| READERS.iter().any(|r| path.starts_with(r)))
        .filter(|(path, _)| !path.starts_with(SCHEDULER))
        .filter_map(|(path, text)| {
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let used: Vec<&str> = THREAD_USE
                .iter()
                .copied()
                .filter(|w| code.contains(w))
                .collect();
            (!used.is_empty()).then(|| format!("{path}: {}", used.join(", ")))
        })
        .collect()
}

#[test]
fn a_scheduler_outside_the_fold_driver_is_named() {
    let files = sources(&[
        (
            "crates/loopctl/src/cmd/list.rs",
            "fn f() { std::thread::scope(|s| {}); }",
        ),
        (
            "crates/loopctl-store/src/fold/chunks.rs",
            "use rayon::prelude::*;",
        ),
        (
            "crates/loopctl-runner/src/run.rs",
            "fn f() { std::thread::spawn(|| {}); }",
        ),
    ]);
    assert_eq!(
        schedulers_outside_the_driver(&files),
        ["crates/loopctl/src/cmd/list.rs: thread::scope"]
    );
}

#[test]
fn readers_leave_threads_to_the_fold_driver() {
    let root = repo();
    let files: Vec<(String, String)> = files_below(&root.join("crates"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&p).unwrap_or_default())
        })
        .collect();
    let offenders = schedulers_outside_the_driver(&files);
    assert!(
        offenders.is_empty(),
        "hand threads work through the fold driver (store::fold: fold_file, fold_chunks, \
         each_run), not a scheduler of your own:\n{}",
        offenders.join("\n")
    );
}
