//! The capture of a phase's output, on readers built in place: no process.

use std::io::Read;

use super::*;

const CLAUDE: &[u8] = include_bytes!("../../../../fixtures/agents/claude-stream-json.jsonl");

/// Hands out its bytes a few at a time, as a pipe may, so lines arrive in pieces.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.len().min(buf.len()).min(self.1);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn captured(bytes: &[u8], chunk: usize, scan: bool) -> Captured {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = capture(Trickle(bytes, chunk), &out, None, scan, None).unwrap();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        bytes,
        "the file holds the stream"
    );
    c
}

fn scanned(bytes: &[u8]) -> Option<AgentUsage> {
    let mut s = UsageScanner::default();
    bytes.split(|b| *b == b'\n').for_each(|l| s.line(l));
    s.usage()
}

#[test]
fn stdout_usage_records_are_read_as_the_lines_stream_in_pieces() {
    let want = scanned(CLAUDE);
    assert!(want.is_some());
    for chunk in [1, 7, 4096, 1 << 20] {
        assert_eq!(
            captured(CLAUDE, chunk, true).usage.usage(),
            want,
            "chunk {chunk}"
        );
    }
}

#[test]
fn a_result_line_longer_than_a_read_counts_whole_and_a_marker_after_it_is_seen() {
    // The counts sit in the middle of the line, between two long texts.
    let long = "y".repeat(3 * (64 << 10));
    let text = format!(
        "{{\"type\":\"result\",\"result\":\"{long}\",\"usage\":{{\"input_tokens\":5,\"output_tokens\":6}},\"uuid\":\"{long}\"}}\n<|workflow: exit | done|>\n"
    );
    let c = captured(text.as_bytes(), 64 << 10, true);
    let u = c.usage.usage().expect("usage of the long line");
    assert_eq!((u.input_tokens, u.output_tokens), (Some(5), Some(6)));
    assert_eq!(c.scanner.seen.len(), 1, "the marker after it is seen");
    assert_eq!(c.last_line.as_deref(), Some("<|workflow: exit | done|>"));
}

#[test]
fn a_line_over_the_cap_is_not_read_for_usage_but_the_next_one_is() {
    let over = "z".repeat(MAX_STDOUT_LINE + (256 << 10));
    let text = format!(
        "{{\"type\":\"result\",\"usage\":{{\"input_tokens\":1}},\"result\":\"{over}\"}}\n{{\"type\":\"result\",\"usage\":{{\"output_tokens\":2}}}}\n"
    );
    let u = captured(text.as_bytes(), 64 << 10, true)
        .usage
        .usage()
        .unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (None, Some(2)));
}

#[test]
fn stderr_is_not_scanned_for_usage() {
    assert_eq!(captured(CLAUDE, 4096, false).usage.usage(), None);
}
