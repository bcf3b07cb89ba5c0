//! The line parser never panics, and accepts only what serde_json accepts as JSON.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let ours = loopctl_core::json::validate(text).is_ok();
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
        assert_eq!(ours, theirs, "validator disagrees with serde_json on {text:?}");
        if let Ok(ev) = loopctl_core::parse_line(text) {
            let line = ev.to_native_line();
            assert!(loopctl_core::parse_line(&line).is_ok(), "native line does not parse back: {line}");
        }
    }
});
