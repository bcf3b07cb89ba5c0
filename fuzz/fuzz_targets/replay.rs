//! Replay of arbitrary bytes never panics, and every finding points inside the input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let out = loopctl_core::replay_bytes("fuzz", data);
    for f in &out.findings {
        assert!(f.offset <= data.len() as u64);
    }
});
