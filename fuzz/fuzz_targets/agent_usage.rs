//! The agent usage scanner never panics on any stdout, and what it gives reads back from a
//! `phase_finished` payload unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use loopctl_core::decode::agent_usage::{AgentUsage, UsageScanner};

fuzz_target!(|data: &[u8]| {
    let mut s = UsageScanner::default();
    for line in data.split(|b| *b == b'\n') {
        s.line(line);
    }
    if let Some(u) = s.usage() {
        let payload = serde_json::json!({ "usage": u });
        assert_eq!(AgentUsage::from_payload(&payload), Some(u));
    }
});
