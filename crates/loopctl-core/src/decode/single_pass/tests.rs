use super::bytes::*;
use super::*;
use crate::decode::reference_parser::{parse_line_reference, run_key};
use proptest::prelude::*;

/// The contract: whatever the fast path returns, the reference returns too; the envelope
/// path gives the same event but for `ts` and the facts, which it does not read.
fn agrees(line: &str) -> bool {
    let full_ok = parse_line_fast(line).is_none_or(|ev| parse_line_reference(line) == Ok(ev));
    let envelope_ok = parse_envelope_fast(line).is_none_or(|mut env| {
        let Ok(reference) = parse_line_reference(line) else {
            return false;
        };
        env.ts = reference.ts;
        env.facts = reference.facts.clone();
        env == reference
    });
    full_ok && envelope_ok
}

const LINES: &[&str] = &[
    r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"billing-svc-20260218-120041-000000","seq":4,"iteration":1,"phase":"A","step":"EVALUATE","event":"evaluation_done","status":"ok","payload":{"score":0.35,"passed":false,"failed_rules":["r8","r10"],"duration_ms":13991,"tokens_in":2790,"tokens_out":517}}"#,
    r#"{"v":1,"seq":9,"ts":"2024-05-06T12:53:20.000Z","run_id":"a3f9","event":"phase_finished","iteration":2,"step":"test","payload":{"kind":"loop","index":0,"stop_reason":"end_turn","marker":{"directive":"abort","label":"stuck"}}}"#,
    r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"b","seq":0,"iteration":10,"phase":"A","step":"S","event":"x.y","status":"ok","payload":{"tokens_in":1}} "#,
    r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"b","seq":01,"iteration":1,"phase":"A","step":"S","event":"e","status":"ok","payload":{}}"#,
    r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"b\u00e9","seq":1,"iteration":1,"phase":"A","step":"S","event":"e","status":"ok","payload":{"to":3}}"#,
    r#"{"ts":"x","run_id":"b","seq":1,"iteration":99999999999999999999,"phase":"A","step":"S","event":"e","status":"ok","payload":{}}"#,
    r#"{"ts":"x","run_id":"b","seq":1,"iteration":1,"phase":"A","step":"S","event":"e","status":"ok","payload":{}}}"#,
    r#"{"ts":"2026-02-18T12:01:06.364Z","run_id":"r","seq":5,"event":"critique_done","payload":{"notes":"Missing validation on \"title\" field\nsee rule r4 \u00e9","usage":{"input_tokens":5,"output_tokens":7,"usage":{"score":1}}}}"#,
    r#" { "event" : "stopped" , "run_id" : 1 , "run_id" : "b\u00e9" , "session_id":"s", "payload" : null , "seq": -0, "iteration": 3.0 } "#,
    r#"{"event":"stopped","payload":{"reason":"user_stop - x","failed":[1,"a",null,["b"]],"warnings":"no","fail_count":1e2,"to":18446744073709551616,"tokens_in":-1,"score":1e300,"passed":"yes","threshold":true}}"#,
    r#"{"event":"x","session_id":"ses","ts":1715000000000,"status":["a"],"phase":{"a":[]}}"#,
    r#"{"event":"avenor.phase.end","run_id":"a"}"#,
    r#"{"v":"1","event":"a.b","ts":"bad"}"#,
    r#"{"event":"e","payload":[1,2],"payload":{}}"#,
    r#"{"ev\u0065nt":"x"}"#,
    r#"{"event":"x"} x"#,
    r#"{"event":"x",}"#,
    r#"{"event":"x","a":[1,]}"#,
    r#"{"event":"x","a":01}"#,
    r#"{"event":"x","a":"\x"}"#,
    r#"{"event":"x","a":"\u12"}"#,
    r#"{"event":nul}"#,
    r#"{"a":1}"#,
    r#"{}"#,
    r#"[1]"#,
    r#""x""#,
    // What the runner writes for its decisions.
    r##"{"v":1,"seq":28,"ts":"2026-11-21T08:45:55.815Z","run_id":"never-green","event":"evaluation_done","iteration":3,"phase":"A","step":"observe","payload":{"active_rule_count":2,"decision":{"action":"retry","feedback":"[fail] parses-months: check exited with code 1: FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)"},"failed":["parses-months"],"passed":false,"passed_rule_count":1,"rule_results":[{"id":"parses-months","message":"check exited with code 1: FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)","passed":false,"phase":"A","severity":"fail","weight":2.0},{"id":"has-notes","passed":true,"phase":"A","severity":"warn","weight":1.0}],"score":0.333333,"source":"checks","threshold":0.8,"warnings":[]}}"##,
    r##"{"v":1,"seq":29,"ts":"2026-11-21T08:45:55.816Z","run_id":"never-green","event":"transition","iteration":3,"step":"observe","payload":{"end":{"detail":"repeated_failure: iterations 1, 2, 3; scores 0.333, 0.333, 0.333; rules parses-months; seqs 8, 18, 28","reason":"stagnation"},"feedback":"[fail] parses-months: check exited with code 1: FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)","from":"observe","index":2,"kind":"loop","observed":true,"outcome":{"blocked":false,"goal_met":false,"passed":false,"tries":3},"source":"stagnation"}}"##,
    r##"{"v":1,"seq":11,"ts":"2026-11-21T08:19:41.779Z","run_id":"r","event":"escalated","iteration":2,"step":"observe","payload":{"attempts_summary":["2 observation(s), the last one blocked"],"feedback":"","question":"Which format?","report":"escalation.md","trigger":"ask_a_human"}}"##,
];

#[test]
fn fast_path_agrees_with_the_reference() {
    for l in LINES {
        assert!(agrees(l), "{l}");
    }
    // The common shapes are taken by the fast path, not left to the fallback.
    assert!(parse_line_fast(LINES[0]).is_some());
    assert!(parse_line_fast(LINES[1]).is_some());
    for l in &LINES[7..10] {
        assert!(parse_line_fast(l).is_some(), "{l}");
    }
    // The aif-loop shape is read by `aif_shape`; its near misses by the general path.
    let mut ev = Event::new(Kind::Other);
    assert!(aif_shape::<true>(LINES[0], &mut ev).is_some());
    assert!(aif_shape::<true>(LINES[2], &mut ev).is_none());
    assert!(parse_line_fast(LINES[4]).is_some());
    for l in LINES {
        assert_eq!(
            parse_line_fast(l).is_some(),
            parse_envelope_fast(l).is_some(),
            "{l}"
        );
    }
    let deep = format!(
        r#"{{"event":"x","a":{}1{}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    assert!(agrees(&deep));
}

/// Whether a line may name `run_id` twice (plainly or with escaped letters): its fast run key
/// may then be its first `run_id`, not its last (the fold driver checks the events' runs).
fn names_run_id_twice(line: &str) -> bool {
    let mut plain = line.to_string();
    for (esc, c) in [
        ("72", "r"),
        ("75", "u"),
        ("6e", "n"),
        ("5f", "_"),
        ("69", "i"),
        ("64", "d"),
    ] {
        plain = plain.replace(&format!("\\u00{esc}"), c);
        plain = plain.replace(&format!("\\u00{}", esc.to_uppercase()), c);
    }
    plain.matches("run_id").count() >= 2
}

/// Where the fast run key answers, it is `run_key`'s answer (for UTF-8 lines), but for a line
/// naming `run_id` twice.
fn key_agrees(line: &str) -> bool {
    match run_key_fast(line.as_bytes()) {
        Some(k) => match run_key(line) {
            Ok(r) => r.as_deref().map(str::as_bytes) == k || names_run_id_twice(line),
            // The line is damaged: parse_line rejects it wherever it is sent.
            Err(_) => parse_line_reference(line).is_err(),
        },
        None => true,
    }
}

#[test]
fn fast_run_key_agrees_with_run_key() {
    for l in LINES {
        assert!(key_agrees(l), "{l}");
    }
    assert_eq!(
        run_key_fast(LINES[0].as_bytes()),
        Some(Some(&b"billing-svc-20260218-120041-000000"[..]))
    );
    assert_eq!(
        run_key_fast(br#"{"event":"x","n":1.5e3,"b":true}"#),
        Some(None)
    );
    assert_eq!(run_key_fast(br#"{"session_id":"s","run_id":"r"}"#), None);
}

/// A JSON value of any shape, as text.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "0",
        "-1",
        "2.5e-3",
        "1E+2",
        "true",
        "false",
        "null",
        "\"\"",
        "\"a b\"",
        "\"\\u00e9\\n\"",
        "\"\u{e9}\"",
    ])
    .prop_map(str::to_string);
    leaf.prop_recursive(6, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            (prop::collection::vec(inner, 0..4), any::<bool>()).prop_map(|(v, compact)| {
                // Written compact (what `skip_flat_object` takes) or spaced out.
                let (colon, comma, pad) = if compact {
                    (":", ",", "")
                } else {
                    (" : ", " ,", " ")
                };
                let members: Vec<String> = v
                    .iter()
                    .enumerate()
                    .map(|(k, x)| format!("\"k{k}\"{colon}{x}"))
                    .collect();
                format!("{{{pad}{}{pad}}}", members.join(comma))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    /// `skip_value` takes every valid value whole, and whatever it takes (even after a
    /// byte is changed) serde_json takes too.
    #[test]
    fn skip_value_validates_like_serde_json(v in json_value(), at in any::<prop::sample::Index>(),
            byte in prop::sample::select(b"{}[],:\"\\ 0-.eEtfnu1a\x01".to_vec()), mutate in any::<bool>()) {
        prop_assert_eq!(skip_value(v.as_bytes(), 0, 0), Some(v.len()), "{}", v);
        let mut b = v.into_bytes();
        if mutate {
            let i = at.index(b.len());
            b[i] = byte;
        }
        if skip_value(&b, 0, 0) == Some(b.len()) {
            prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&b).is_ok(),
                "took {:?}", String::from_utf8_lossy(&b));
        }
        // The flat-object shortcut takes nothing the general reader would not, and ends
        // where it does.
        if b.first() == Some(&b'{') && let Some(end) = skip_flat_object(&b, 0) {
            prop_assert_eq!(Some(end), skip_value_general(&b, 0, 0), "{:?}", String::from_utf8_lossy(&b));
        }
    }
}

/// A payload value of a kind `flat_facts` reads, or one it leaves to `facts_general`.
fn fact_value() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "0",
        "7",
        "01",
        "-3",
        "1.5",
        "1e2",
        "0.35",
        "0.333333",
        "3.14159265358979",
        "9.999999999999999",
        "12345678901234567890",
        "18446744073709551615",
        "\"x\"",
        "\"a\\nb\\u00e9\"",
        "true",
        "false",
        "tru",
        "null",
        "[]",
        "[\"r1\",\"r2\"]",
        "[\"a\\u00e9\",1,null]",
        "[[1]]",
        "[\"r1\" ]",
        "{\"input_tokens\":3}",
        "{}",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Whatever payload `flat_facts` takes, it ends where `facts_general` does with the same
    /// facts; `facts` (shortcut first) always answers as `facts_general` does; and reading
    /// only a row's facts (`ALL` false) accepts the same payloads with the same two facts.
    #[test]
    fn flat_facts_read_what_the_general_reader_reads(
        members in prop::collection::vec((prop::sample::select(vec![
            "score", "passed", "threshold", "failed", "failed_rules", "warnings", "warn_rules",
            "fail_count", "reason", "new_iteration", "to", "tokens_in", "input_tokens",
            "tokens_out", "output_tokens", "usage", "duration_ms", "path", "t\\u006f",
            // Near the keys matched whole (quotes and colon included): longer, shorter, escaped.
            "tokens_i", "tokens_inn", "tokens_ou", "tokens_outs", "tokens_\\u0069n", "t",
            "duration_m", "duration_mss", "d", "duration\\u005fms"]),
            fact_value()), 0..7),
        spaced in any::<bool>()) {
        let sep = if spaced { ", " } else { "," };
        let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let text = format!("{{{}}}", body.join(sep));
        fn read<'t>(text: &'t str, f: &mut Facts<'t>, general: bool) -> Option<usize> {
            let mut p = P { s: text, b: text.as_bytes(), i: 0 };
            let r = if general { p.facts_general::<true>(f, 0) } else { p.facts::<true>(f, 0) };
            r.map(|()| p.i)
        }
        let p = |f, general| read(&text, f, general);
        let (mut general, mut shortcut) = (Facts::default(), Facts::default());
        let end = p(&mut general, true);
        prop_assert_eq!(p(&mut shortcut, false), end, "{}", text);
        if end.is_some() {
            prop_assert_eq!(&shortcut, &general, "{}", text);
        }
        let mut row = Facts::default();
        let mut rp = P { s: &text, b: text.as_bytes(), i: 0 };
        let row_end = rp.facts::<false>(&mut row, 0).map(|()| rp.i);
        prop_assert_eq!(row_end, end, "{}", text);
        if end.is_some() {
            prop_assert_eq!((row.score, row.new_iteration), (general.score, general.new_iteration), "{}", text);
        }
        let mut flat = Facts::default();
        let reader = P { s: &text, b: text.as_bytes(), i: 0 };
        if let Some(flat_end) = reader.flat_facts::<true>(&mut flat) {
            prop_assert_eq!(Some(flat_end), end, "{}", text);
            prop_assert_eq!(&flat, &general, "{}", text);
        }
    }

    /// `decimal` gives `str::parse`'s value, bit for bit, where it answers.
    #[test]
    fn decimal_rounds_like_parse(int in 0u8..10, frac in "[0-9]{1,16}") {
        let text = format!("{int}.{frac}");
        let parsed: f64 = text.parse().unwrap();
        match decimal(text.as_bytes()) {
            Some(v) => prop_assert_eq!(v.to_bits(), parsed.to_bits(), "{}", text),
            None => prop_assert!(frac.len() > 14),
        }
    }
}

#[test]
fn the_usual_payload_takes_the_flat_path() {
    let text = r#"{"score":0.35,"passed":false,"failed_rules":["r8","r10"],"duration_ms":13991,"tokens_in":2790,"tokens_out":517}"#;
    let mut f = Facts::default();
    let p = P {
        s: text,
        b: text.as_bytes(),
        i: 0,
    };
    assert_eq!(p.flat_facts::<true>(&mut f), Some(text.len()));
    assert_eq!(f.score, Some(0.35));
    assert_eq!(
        f.failed,
        Some(vec![Cow::Borrowed("r8"), Cow::Borrowed("r10")])
    );
    // Rule ids borrow from the line.
    assert!(matches!(
        f.failed.as_deref(),
        Some([Cow::Borrowed(_), Cow::Borrowed(_)])
    ));
    assert_eq!(
        (f.tokens_in, f.tokens_out, f.passed),
        (Some(2790), Some(517), Some(false))
    );
}

proptest! {
    #[test]
    fn digit_run_and_has_dot_follow_their_definitions(b in prop::collection::vec(
        prop::sample::select(b"0123456789./:\x00\x7f\x80\xb9\xba\xff a".to_vec()), 0..40),
        start in any::<prop::sample::Index>()) {
        let start = start.index(b.len() + 1);
        let want = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        prop_assert_eq!(digit_run(&b, start), want);
        let s = String::from_utf8_lossy(&b);
        prop_assert_eq!(has_dot(&s), s.contains('.'));
    }
}

proptest! {
    /// `short_digits` reads one to seven digits followed by another byte as `str::parse` does,
    /// and declines anything else.
    #[test]
    fn short_digits_parse_as_str_does(digits in "[0-9]{0,9}", after in prop::sample::select(
            b",}].eE\"x 0".to_vec()), pad in 0usize..9) {
        let mut b = digits.clone().into_bytes();
        b.push(after);
        b.extend(std::iter::repeat_n(b'1', pad));
        let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let want = (b.len() >= 8 && (1..8).contains(&n))
            .then(|| (String::from_utf8_lossy(&b[..n]).parse::<u64>().unwrap(), n));
        prop_assert_eq!(short_digits(&b, 0), want, "{:?}", String::from_utf8_lossy(&b));
    }

    #[test]
    fn mutated_lines_agree(which in 0..LINES.len(), at in any::<prop::sample::Index>(),
                           byte in prop::sample::select(b"{}[],:\"\\ 0-.eEtfnu1a\x01\x7f".to_vec()),
                           insert in any::<bool>()) {
        let mut s = LINES[which].as_bytes().to_vec();
        let i = at.index(s.len() + 1);
        if insert || i == s.len() {
            s.insert(i, byte);
        } else {
            s[i] = byte;
        }
        if let Ok(s) = String::from_utf8(s) {
            prop_assert!(agrees(&s), "disagree on {:?}", s);
            prop_assert!(key_agrees(&s), "run keys disagree on {:?}", s);
        }
    }

    #[test]
    fn generated_lines_agree(keys in prop::collection::vec(prop::sample::select(vec![
            "event", "v", "seq", "ts", "run_id", "session_id", "iteration", "phase", "step",
            "status", "payload", "other"]), 0..8),
            vals in prop::collection::vec(prop::sample::select(vec![
            "\"evaluation_done\"", "\"a.b\"", "1", "-2", "3.5", "1e3", "null", "true", "false",
            "[\"r1\",2]", "{\"score\":0.5,\"failed\":[\"x\"],\"usage\":{\"input_tokens\":3}}",
            "\"2026-02-18T12:01:04.798Z\"", "\"t\\u00e9\\n\"", "{}", "[]"]), 8)) {
        let body: Vec<String> = keys.iter().zip(&vals).map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let line = format!("{{{}}}", body.join(","));
        prop_assert!(agrees(&line), "disagree on {}", line);
        prop_assert!(key_agrees(&line), "run keys disagree on {}", line);
    }
}

/// Whether `payload` names a `USAGE_EXTRAS` key at its top level or in its `usage` object, as
/// serde_json reads it: what `Facts::usage_extras` must say on every path.
fn names_usage_extra(payload: &serde_json::Value) -> bool {
    let named = |v: &serde_json::Value| {
        v.as_object().is_some_and(|o| {
            o.keys()
                .any(|k| crate::decode::event::USAGE_EXTRAS.contains(&k.as_str()))
        })
    };
    named(payload) || payload.get("usage").is_some_and(named)
}

proptest! {
    #[test]
    fn usage_extras_say_whether_a_cache_or_cost_key_is_named(
        keys in prop::collection::vec(
            prop::sample::select(vec![
                "cost_usd", "total_cost_usd", "cache_read_input_tokens", "cache_read_tokens",
                "cache_creation_input_tokens", "cache_creation_tokens", "cache_read_input_tokens_x",
                "cost", "cache_", "tokens_in", "a_rather_long_key_name", "x",
            ]),
            0..4,
        ),
        nested in prop::collection::vec(
            prop::sample::select(vec!["cache_read_tokens", "cost_usd", "input_tokens", "other_long_key_name"]),
            0..3,
        ),
        usage in 0u8..3,
        aif in any::<bool>(),
    ) {
        let mut fields: Vec<String> = keys.iter().enumerate().map(|(i, k)| format!(r#""{k}":{i}"#)).collect();
        let inner: Vec<String> = nested.iter().map(|k| format!(r#""{k}":7"#)).collect();
        match usage {
            1 => fields.push(format!(r#""usage":{{{}}}"#, inner.join(","))),
            2 => fields.push(format!(r#""other":{{{}}}"#, inner.join(","))),
            _ => {}
        }
        let payload = format!("{{{}}}", fields.join(","));
        let line = if aif {
            format!(r#"{{"ts":"2026-02-18T13:03:23.570Z","run_id":"r-20260218-130323-000001","seq":1,"iteration":1,"phase":"A","step":"PLAN","event":"plan_created","status":"ok","payload":{payload}}}"#)
        } else {
            format!(r#"{{"v":1,"seq":1,"event":"usage","run_id":"r","payload":{payload}}}"#)
        };
        let want = names_usage_extra(&serde_json::from_str(&payload).unwrap());
        let reference = parse_line_reference(&line).unwrap();
        prop_assert_eq!(reference.facts.usage_extras, want, "{}", line);
        let fast = parse_line_fast(&line);
        prop_assert!(fast.is_some(), "{}", line);
        prop_assert_eq!(fast.map(|e| e.facts.usage_extras), Some(want), "{}", line);
    }
}

#[test]
fn the_usage_extra_keys_pass_the_length_and_first_byte_screen() {
    for k in crate::decode::event::USAGE_EXTRAS {
        assert!(crate::decode::event::is_usage_extra(k.as_bytes()), "{k}");
    }
    assert!(!crate::decode::event::is_usage_extra(
        b"cache_read_input_tokenz_"
    ));
}

/// `aif_head` looks for a dot (Avenor's names) only in names that are no known kind.
#[test]
fn known_kind_names_have_no_dot() {
    for k in Kind::ALL {
        assert!(!k.name().contains('.'), "{}", k.name());
    }
}

proptest! {
    /// aif-loop's shape with any `seq` and `iteration` text (one or two digits take a shortcut)
    /// and names known, unknown or dotted: the fast path reads it as the reference does.
    #[test]
    fn aif_lines_agree(seq in prop::sample::select(vec![
            "0", "7", "00", "01", "10", "99", "123", "1234567890123456789", "12345678901234567890",
            "-1", "1.0", "1e2"]),
            iteration in 0u64..200,
            name in prop::sample::select(vec![
            "evaluation_done", "run_started", "tool_call", "x.y", "evaluation_done.x",
            "a.b.c.d.e.f.g.h.i", "abcdefgh.", "abcdefghijklmnop.q", ""])) {
        let line = format!(r#"{{"ts":"2026-02-18T13:03:23.570Z","run_id":"r","seq":{seq},"iteration":{iteration},"phase":"A","step":"PLAN","event":"{name}","status":"ok","payload":{{"tokens_in":1}}}}"#);
        prop_assert!(agrees(&line), "{}", line);
        let fast = parse_line_fast(&line);
        // A plain integer of at most 19 digits, no leading zero, and a name without a dot.
        let plain = seq.bytes().all(|c| c.is_ascii_digit())
            && seq.len() <= 19
            && (seq.len() == 1 || !seq.starts_with('0'));
        if plain && !name.contains('.') {
            prop_assert!(fast.is_some(), "{}", line);
            let ev = fast.unwrap();
            prop_assert_eq!(ev.seq, seq.parse().ok());
            prop_assert_eq!(ev.iteration, Some(iteration));
        }
    }
}

/// Rule ids borrow from the line unless escaped, and an owned event keeps them all.
#[test]
fn rule_ids_borrow_from_the_line_until_owned() {
    let line =
        r#"{"event":"evaluation_done","payload":{"failed":["r1","r\u0032"],"warnings":["w"]}}"#;
    let ev = crate::decode::parse_line(line).unwrap();
    let failed = ev.facts.failed.as_deref().unwrap();
    assert!(matches!(failed, [Cow::Borrowed("r1"), Cow::Owned(r2)] if r2 == "r2"));
    assert!(matches!(
        ev.facts.warnings.as_deref(),
        Some([Cow::Borrowed("w")])
    ));
    let facts = ev.facts.clone();
    let owned = ev.into_owned();
    assert_eq!(owned.facts, facts);
    assert!(
        owned
            .facts
            .failed
            .iter()
            .flatten()
            .all(|s| matches!(s, Cow::Owned(_)))
    );
}

/// A number beyond f64 (`1e400`) makes the line damaged, as serde_json refuses it, in both
/// parsers: a score is never infinite (replay printed null, status `inf`), and every reader
/// reports the line.
#[test]
fn a_number_beyond_f64_is_a_damaged_line_wherever_it_is() {
    let lines = [
        r#"{"event":"evaluation_done","payload":{"score":1e400}}"#,
        r#"{"event":"evaluation_done","payload":{"score":-1E+400,"passed":true}}"#,
        r#"{"event":"evaluation_done","payload":{"threshold":1e999}}"#,
        r#"{"event":"note","payload":{"x":[1,{"y":2e308}]}}"#,
        r#"{"event":"note","iteration":1e400}"#,
    ];
    for line in lines {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_err(),
            "{line}"
        );
        let e = crate::decode::parse_line(line).expect_err(line);
        assert!(e.to_string().contains("number out of range"), "{line}: {e}");
        assert!(parse_line_fast(line).is_none(), "{line}");
        assert!(agrees(line), "{line}");
    }
    // Large but finite numbers stay numbers.
    let ok = r#"{"event":"evaluation_done","payload":{"score":1e300,"to":1e308}}"#;
    assert_eq!(
        crate::decode::parse_line(ok).unwrap().facts.score,
        Some(1e300)
    );
}

/// What serde_json's `Value` makes of a line: a repeated key keeps its last value. The run is
/// `run_id` if that is a string, else `session_id` if that is one.
#[derive(Debug, PartialEq)]
struct ByValue {
    name: Option<String>,
    run: Option<String>,
    seq: Option<u64>,
    phase: Option<String>,
    status: Option<String>,
    score: Option<f64>,
    payload: serde_json::Value,
}

fn by_value(line: &str) -> ByValue {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let payload = v.get("payload").cloned().unwrap_or_default();
    ByValue {
        name: text("event"),
        run: text("run_id").or_else(|| text("session_id")),
        seq: v.get("seq").and_then(|x| x.as_u64()),
        phase: text("phase"),
        status: text("status"),
        score: payload.get("score").and_then(|x| x.as_f64()),
        payload,
    }
}

fn by_event(ev: &Event<'_>) -> ByValue {
    ByValue {
        name: Some(ev.name.to_string()),
        run: ev.run_id.as_deref().map(str::to_string),
        seq: ev.seq,
        phase: ev.phase.as_deref().map(str::to_string),
        status: ev.status.as_deref().map(str::to_string),
        score: ev.facts.score,
        payload: ev.payload_value(),
    }
}

/// Each parser, the run key included, reads a line with repeated keys as `Value` does.
fn repeated_keys_agree(line: &str) -> Result<(), String> {
    let want = by_value(line);
    let reference = parse_line_reference(line);
    if reference.is_ok() != want.name.is_some() {
        return Err(format!("{line}: {reference:?} for {want:?}"));
    }
    let key = run_key(line).map_err(|e| format!("{line}: {e}"))?;
    if key.as_deref() != want.run.as_deref() {
        return Err(format!("{line}: run_key {key:?}, want {:?}", want.run));
    }
    // The fast run key reads a line's first `run_id`; one that names it again is left to the
    // fold driver, which checks each event's run against the shard it was sent to.
    if let Some(k) = run_key_fast(line.as_bytes())
        && k != want.run.as_deref().map(str::as_bytes)
        && !names_run_id_twice(line)
    {
        return Err(format!("{line}: run_key_fast {k:?}, want {:?}", want.run));
    }
    let Ok(ev) = reference else { return Ok(()) };
    for (who, ev) in [("reference", Some(ev)), ("fast", parse_line_fast(line))] {
        if let Some(ev) = ev
            && by_event(&ev) != want
        {
            return Err(format!("{line}: {who} {:?}, want {want:?}", by_event(&ev)));
        }
    }
    Ok(())
}

#[test]
fn a_repeated_key_takes_its_last_value_in_both_parsers() {
    for line in [
        r#"{"event":"e","run_id":"first","run_id":"last"}"#,
        r#"{"run_id":"first","event":"e","seq":1,"payload":{"score":0.5},"run_id":"last"}"#,
        r#"{"ts":"2026-02-18T12:01:04.798Z","run_id":"a","seq":4,"event":"e","run_id":"b"}"#,
        r#"{"event":"e","run_id":"a","run_id":1}"#,
        r#"{"event":"e","run_id":"a","run_id":null,"session_id":"s"}"#,
        r#"{"event":"e","session_id":"s1","session_id":"s2"}"#,
        r#"{"event":"e","run_id":"a","run\u005fid":"b"}"#,
        r#"{"event":"e","payload":{"score":0.5},"payload":{"passed":true}}"#,
        r#"{"event":"e","payload":{"score":0.5,"score":0.75}}"#,
        r#"{"event":"e","event":"f","seq":1,"seq":"x","phase":"A","phase":"B"}"#,
    ] {
        repeated_keys_agree(line).unwrap();
    }
}

proptest! {
    /// Any envelope, keys repeated in any order, is read as `Value` reads it.
    #[test]
    fn repeated_envelope_keys_are_read_as_value_reads_them(members in prop::collection::vec((
        prop::sample::select(vec!["event", "run_id", "session_id", "seq", "phase", "status", "payload", "v"]),
        prop::sample::select(vec![
            "\"e\"", "\"stopped\"", "\"run-1\"", "\"run-2\"", "0", "7", "null", "true",
            "{\"score\":0.5}", "{\"score\":0.25,\"score\":\"x\"}", "{\"passed\":true}", "[1]",
        ]),
    ), 1..8)) {
        let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let line = format!("{{{}}}", body.join(","));
        prop_assert!(repeated_keys_agree(&line).is_ok(), "{:?}", repeated_keys_agree(&line));
    }
}
