//! Loop-file validation and the marker scanner never panic; a valid loop file survives the
//! round trip through the run_started payload that resume reads it back from.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let scanned = loopctl_core::rules::markers::scan(&text);
    if let Some(w) = scanned.winner() {
        assert!(scanned.seen.iter().all(|m| m.directive <= w.directive));
    }
    if let Ok(p) = loopctl_core::rules::loop_file::parse(&text, None) {
        let v = serde_json::to_value(&p.file).expect("serializes");
        let back: loopctl_core::rules::loop_file::LoopFile = serde_json::from_value(v).expect("reads back");
        assert_eq!(back, p.file);
    }
});
