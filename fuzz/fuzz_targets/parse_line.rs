//! The line parser never panics, accepts only what serde_json accepts as JSON, and its fast
//! path gives what the reference parser gives.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let ours = loopctl_core::decode::json_scanner::validate(text).is_ok();
        // serde_json's grammar, and its refusal of a number beyond f64 (a typed read makes it).
        let out_of_range = serde_json::from_str::<serde_json::Value>(text)
            .is_err_and(|e| e.to_string().starts_with("number out of range"));
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() && !out_of_range;
        assert_eq!(ours, theirs, "validator disagrees with serde_json on {text:?}");
        assert_eq!(
            loopctl_core::parse_line(text),
            loopctl_core::decode::reference_parser::parse_line_reference(text),
            "fast path disagrees with the reference on {text:?}"
        );
        if let Ok(ev) = loopctl_core::parse_line(text) {
            let line = ev.to_native_line();
            assert!(loopctl_core::parse_line(&line).is_ok(), "native line does not parse back: {line}");
        }
    }
});
