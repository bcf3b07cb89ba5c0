use proptest::prelude::*;
use serde_json::json;

use super::*;

fn scan(text: &str) -> Option<AgentUsage> {
    let mut s = UsageScanner::default();
    for l in text.split('\n') {
        s.line(l.as_bytes());
    }
    s.usage()
}

const CLAUDE: &str = include_str!("../../../../../fixtures/agents/claude-stream-json.jsonl");
const CODEX: &str = include_str!("../../../../../fixtures/agents/codex-exec-json.jsonl");

#[test]
fn a_claude_result_gives_its_totals_cost_turns_and_the_init_model() {
    let u = scan(CLAUDE).expect("usage");
    assert_eq!(u.input_tokens, Some(18));
    assert_eq!(u.output_tokens, Some(208));
    assert_eq!(u.cache_read_tokens, Some(49366));
    assert_eq!(u.cache_creation_tokens, Some(8421));
    assert_eq!(u.cost_usd, Some(0.05794215));
    assert_eq!(u.turns, Some(5));
    assert_eq!(u.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
}

#[test]
fn without_an_init_line_the_model_that_wrote_most_in_model_usage_is_named() {
    let result = CLAUDE.lines().last().unwrap();
    assert_eq!(
        scan(result).unwrap().model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
}

#[test]
fn a_claude_session_cut_off_before_its_result_counts_its_calls_once_each_without_cost() {
    let before_result: Vec<&str> = CLAUDE.lines().take(CLAUDE.lines().count() - 1).collect();
    // The fixture's result states the sum of its calls; a call's lines (text, then tool use)
    // repeat its usage and count once.
    let first = before_result[1];
    let mut lines = before_result.clone();
    lines.insert(2, first);
    let u = scan(&lines.join("\n")).expect("usage");
    let whole = scan(CLAUDE).unwrap();
    assert_eq!(
        u,
        AgentUsage {
            cost_usd: None,
            turns: None,
            ..whole.clone()
        }
    );
    // Once the result comes, it alone counts.
    assert_eq!(
        scan(&format!(
            "{}\n{}",
            lines.join("\n"),
            CLAUDE.lines().last().unwrap()
        )),
        Some(whole)
    );
}

#[test]
fn two_claude_sessions_in_one_phase_are_added() {
    let u = scan(&format!("{CLAUDE}{CLAUDE}")).unwrap();
    assert_eq!(u.input_tokens, Some(36));
    assert_eq!(u.turns, Some(10));
    assert_eq!(u.cost_usd, Some(0.05794215 * 2.0));
}

#[test]
fn a_codex_turn_gives_tokens_cache_reads_and_one_turn_but_no_model_or_cost() {
    let u = scan(CODEX).expect("usage");
    assert_eq!(
        u,
        AgentUsage {
            input_tokens: Some(41873),
            output_tokens: Some(1516),
            cache_read_tokens: Some(35072),
            turns: Some(1),
            ..AgentUsage::default()
        }
    );
}

#[test]
fn codex_turns_of_one_thread_are_running_totals_and_threads_are_added() {
    let turn = |i: u64, o: u64| {
        format!(
            r#"{{"type":"turn.completed","usage":{{"input_tokens":{i},"cached_input_tokens":0,"output_tokens":{o}}}}}"#
        )
    };
    let log = [
        r#"{"type":"thread.started","thread_id":"a"}"#.to_string(),
        turn(100, 10),
        turn(250, 30),
        r#"{"type":"thread.started","thread_id":"b"}"#.to_string(),
        turn(40, 4),
    ]
    .join("\n");
    let u = scan(&log).unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (Some(290), Some(34)));
    assert_eq!(u.turns, Some(3));
}

#[test]
fn text_damaged_lines_and_wrong_types_are_skipped_field_by_field() {
    let log = [
        "plain text mentioning result and turn.completed",
        r#"{"type":"result","usage":{"input_tokens":"12","output_tokens":-3,"cache_read_input_tokens":7},"total_cost_usd":"0.1","num_turns":2.5}"#,
        r#"{"type":"result","usage":{"input_tokens":5"#,
        r#"{"type":["result"],"usage":{"input_tokens":99}}"#,
        r#"{"type":"result","total_cost_usd":-1,"usage":[1,2]}"#,
        "\u{0}\u{7f}{}",
    ]
    .join("\n");
    let u = scan(&log).unwrap();
    assert_eq!(
        u,
        AgentUsage {
            cache_read_tokens: Some(7),
            ..AgentUsage::default()
        }
    );
    assert_eq!(scan("no records here\n{\"type\":\"turn.started\"}"), None);
}

#[test]
fn a_crlf_line_and_a_huge_result_text_still_count() {
    let big = "x".repeat(4 << 20);
    let line = format!(
        "{{\"type\":\"result\",\"result\":\"{big}\",\"usage\":{{\"input_tokens\":3,\"output_tokens\":4}}}}\r"
    );
    let u = scan(&line).unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (Some(3), Some(4)));
}

#[test]
fn the_usage_object_reads_back_from_a_payload_and_omits_what_is_absent() {
    let u = scan(CODEX).unwrap();
    let payload = json!({"exit_code": 0, "usage": u});
    assert_eq!(
        payload["usage"],
        json!({"input_tokens": 41873, "output_tokens": 1516, "cache_read_tokens": 35072, "turns": 1})
    );
    assert_eq!(AgentUsage::from_payload(&payload), Some(u));
    assert_eq!(
        AgentUsage::from_payload(&json!({"usage": {"input_tokens": "x"}})),
        None
    );
    assert_eq!(AgentUsage::from_payload(&json!({"usage": 3})), None);
}

/// Pieces an agent's output is made of, valid and broken.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"type":"result","num_turns":1,"usage":{"input_tokens":1}}"#.to_string()),
        Just(
            r#"{"type":"turn.completed","usage":{"input_tokens":2,"cached_input_tokens":1}}"#
                .to_string()
        ),
        Just(r#"{"type":"thread.started"}"#.to_string()),
        Just(r#"{"type":"system","subtype":"init","model":"m"}"#.to_string()),
        Just(r#"{"type":"result","modelUsage":{"a":{"outputTokens":"x"},"b":7}}"#.to_string()),
        Just(format!("{{{}}}", "[".repeat(300))),
        Just(r#"{"type":"result","usage":{"input_tokens":18446744073709551615}}"#.to_string()),
        "\\PC{0,40}",
        "[{}\\[\\]\":,0-9a-z. ]{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn no_bytes_make_it_panic(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20)) {
        let mut s = UsageScanner::default();
        for l in &lines {
            s.line(l);
        }
        let _ = s.usage();
    }

    #[test]
    fn any_mix_of_pieces_cut_anywhere_never_panics_and_reads_back(
        pieces in proptest::collection::vec(piece(), 0..30),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
    ) {
        let mut text = pieces.join("\n");
        for c in cuts {
            if !text.is_empty() {
                let mut at = c.index(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                text.insert(at, '\n');
            }
        }
        if let Some(u) = scan(&text) {
            prop_assert!(!u.is_empty());
            let back = AgentUsage::from_payload(&json!({"usage": u}));
            prop_assert_eq!(back, Some(u));
        }
    }

    #[test]
    fn garbage_between_records_changes_nothing(
        garbage in proptest::collection::vec("[^\n]{0,60}", 0..8),
    ) {
        let clean = scan(CLAUDE);
        let mut mixed = String::new();
        for (i, l) in CLAUDE.lines().enumerate() {
            if let Some(g) = garbage.get(i)
                && !g.contains("\"type\"")
            {
                mixed.push_str(g);
                mixed.push('\n');
            }
            mixed.push_str(l);
            mixed.push('\n');
        }
        prop_assert_eq!(scan(&mixed), clean);
    }
}

/// Costs add up to the nano-dollar: ten records of 0.1 are 1, not 0.9999999999999999.
#[test]
fn costs_sum_without_float_noise() {
    let mut total = AgentUsage::default();
    let one = AgentUsage {
        cost_usd: Some(0.1),
        ..AgentUsage::default()
    };
    for _ in 0..10 {
        total.add(&one);
    }
    assert_eq!(total.cost_usd, Some(1.0));
    let mut t = AgentUsage::default();
    for c in [0.1, 0.2] {
        t.add(&AgentUsage {
            cost_usd: Some(c),
            ..AgentUsage::default()
        });
    }
    assert_eq!(t.cost_usd, Some(0.3));
}

#[test]
fn a_payload_s_usage_is_read_as_the_metrics_read_it() {
    // Avenor / Claude names, the cost at the top.
    let claude = json!({"usage": {"input_tokens": 1000, "output_tokens": 200,
        "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 600},
        "total_cost_usd": 0.3});
    let u = AgentUsage::from_payload(&claude).unwrap();
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cache_read_tokens),
        (Some(1000), Some(200), Some(4000))
    );
    assert_eq!(
        (u.cache_creation_tokens, u.cost_usd),
        (Some(600), Some(0.3))
    );
    // Both cache names: the larger; the top's cost wins over the usage object's.
    let both = json!({"cost_usd": 0.25, "usage": {"cache_read_input_tokens": 40,
        "cache_read_tokens": 30, "cost_usd": 9.0}});
    let u = AgentUsage::from_payload(&both).unwrap();
    assert_eq!((u.cache_read_tokens, u.cost_usd), (Some(40), Some(0.25)));
    // Native logs write their tokens at the top level.
    let native = json!({"stop_reason": "end_turn", "tokens_in": 1500, "tokens_out": 420});
    let u = AgentUsage::from_payload(&native).unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (Some(1500), Some(420)));
    assert_eq!(
        AgentUsage::from_payload(&json!({"stop_reason": "end_turn"})),
        None
    );
    assert_eq!(AgentUsage::from_payload(&json!({"cost_usd": -1.0})), None);
}
