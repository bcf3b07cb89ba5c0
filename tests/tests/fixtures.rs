//! Every case under `fixtures/`: the hand-made log replays to the hand-computed expectation.

use loopctl_core::replay_bytes;
use loopctl_tests::{assert_subset, repo};
use serde_json::{Value, json};

#[test]
fn every_fixture_replays_to_its_expected_state() {
    let dir = repo().join("fixtures");
    let mut cases = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures/ exists").flatten() {
        let case = entry.path();
        let Ok(expect) = std::fs::read_to_string(case.join("expect.json")) else {
            continue;
        };
        let expect: Value = serde_json::from_str(&expect).expect("expect.json is JSON");
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(case.join("history.jsonl")).expect("history.jsonl");
        let default_run = expect["default_run"].as_str().unwrap_or(&name);
        let out = replay_bytes(default_run, &bytes);

        let runs = expect["runs"].as_object().expect("runs");
        assert_eq!(
            out.runs.keys().collect::<Vec<_>>(),
            runs.keys().collect::<Vec<_>>(),
            "{name}: run ids"
        );
        for (id, want) in runs {
            let state = &out.runs[id];
            let mut got = serde_json::to_value(state).unwrap();
            got["stop_reason"] = json!(state.stop.reason);
            assert_subset(&format!("{name}: run {id}"), want, &got);
        }
        let findings: Vec<Value> = out
            .findings
            .iter()
            .map(|f| json!({"line": f.line, "offset": f.offset, "kind": serde_json::to_value(f.kind).unwrap()}))
            .collect();
        let want: Vec<Value> = expect["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| json!({"line": f["line"], "offset": f["offset"], "kind": f["kind"]}))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(findings, want, "{name}: findings");
        assert_subset(
            &format!("{name}: stats"),
            &expect["stats"],
            &serde_json::to_value(&out.stats).unwrap(),
        );
        cases += 1;
    }
    assert!(cases >= 15, "expected the fixture set, found {cases} cases");
}
