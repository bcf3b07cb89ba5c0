//! Code and docs speak of the project: formats by their names (Avenor loop files, aif-loop
//! runs, `when` rules, task-chain branches, iteration control; docs/sources.md maps them to
//! their documents), never by a reference document's number; bench scripts find `../shared`
//! beside the repository, not at an absolute path.

use std::path::Path;

use loopctl_tests::{files_below, repo};

/// Ways of citing a reference document by number or as "the seed". A random seed is fine.
const DOCUMENT_NUMBERS: &[&str] = &[
    "seed 0",
    "seed 1",
    "seed 2",
    "seed 3",
    "seed 4",
    "seed's",
    "seeds'",
    "per seed",
    "the seed says",
    "the seed is silent",
];

fn ours(path: &Path) -> bool {
    let skip = [
        "target",
        ".git",
        "proptest-regressions",
        "fuzz/corpus",
        "fuzz/artifacts",
    ];
    !path.components().any(|c| {
        let c = c.as_os_str().to_string_lossy();
        skip.iter().any(|s| *s == c)
    }) && path.file_name().is_some_and(|n| n != "words.rs")
}

fn hits(files: &[std::path::PathBuf], forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let low = line.to_lowercase();
            if let Some(w) = forbidden.iter().find(|w| low.contains(*w)) {
                found.push(format!("{}:{}: {w:?}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn code_and_docs_name_formats_not_document_numbers() {
    let root = repo();
    let files: Vec<_> = [
        "crates", "docs", "tests", "bench", "fixtures", "examples", "fuzz",
    ]
    .iter()
    .flat_map(|d| files_below(&root.join(d)))
    .chain([root.join("README.md")])
    .filter(|p| ours(p) && p.extension().is_some_and(|e| e == "rs" || e == "md"))
    .collect();
    assert!(files.len() > 20, "found only {} files", files.len());
    let found = hits(&files, DOCUMENT_NUMBERS);
    assert!(
        found.is_empty(),
        "name the format (see docs/sources.md), not the document:\n{}",
        found.join("\n")
    );
}

#[test]
fn bench_scripts_find_shared_data_beside_the_repository() {
    let files: Vec<_> = files_below(&repo().join("bench"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sh" || e == "py"))
        .collect();
    assert!(!files.is_empty(), "no bench script found");
    let found = hits(&files, &["/work/"]);
    assert!(
        found.is_empty(),
        "bench scripts find ../shared relative to the repository:\n{}",
        found.join("\n")
    );
}
