use super::*;
use proptest::prelude::*;

const KEYS: Keys<'static> = Keys {
    keys: &["reason", "final_score", "task"],
    nested: Some(("config", &["max_iterations"])),
};

/// What `get` answers for every key asked for, on `v`.
fn answers(v: &Value) -> Vec<Option<&Value>> {
    let mut out: Vec<_> = KEYS.keys.iter().map(|k| v.get(k)).collect();
    let (n, inner) = KEYS.nested.unwrap();
    out.extend(inner.iter().map(|k| v.get(n).and_then(|c| c.get(k))));
    out
}

fn value() -> impl Strategy<Value = String> {
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    prop::sample::select(vec![
        "\"stop\"".to_string(),
        "\"a\\u0062\"".into(),
        "3".into(),
        "3.0".into(),
        "-1".into(),
        "1e400".into(),
        "18446744073709551616".into(),
        "null".into(),
        "true".into(),
        "[1,{\"x\":2}]".into(),
        "{\"max_iterations\":4}".into(),
        "{\"max_iterations\":4,\"max_iterations\":\"5\"}".into(),
        "{\"a\":[{\"max_iterations\":1}]}".into(),
        "{\"max_iterations\":7}".into(),
        deep,
        "[".into(),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    /// Whatever the payload (repeated keys, escaped keys, any value, nesting past serde_json's
    /// limit, bad syntax, no object at all), the keys asked for answer as on the whole `Value`.
    #[test]
    fn kept_keys_answer_as_the_whole_value(
        members in prop::collection::vec((prop::sample::select(vec![
            "reason", "final_score", "task", "config", "conf\\u0069g", "other", "detail"]),
            value()), 0..6),
        shape in 0..4u8,
    ) {
        let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let text = match shape {
            0 => format!("[{}]", members.iter().map(|m| m.1.clone()).collect::<Vec<_>>().join(",")),
            1 => format!(" {{ {} }} ", body.join(" , ")),
            2 => format!("{{{}}} x", body.join(",")),
            _ => format!("{{{}}}", body.join(",")),
        };
        let whole: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let part = subset(&text, KEYS);
        prop_assert_eq!(answers(&part), answers(&whole), "{}", text);
    }
}

#[test]
fn only_the_keys_asked_for_are_kept() {
    let text = r#"{"reason":"x","model":"m","config":{"max_iterations":9,"rules":12}}"#;
    assert_eq!(
        subset(text, KEYS),
        serde_json::json!({"reason": "x", "config": {"max_iterations": 9}})
    );
}

#[test]
fn nesting_past_the_limit_in_a_skipped_value_fails_as_value_does() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let text = format!(r#"{{"reason":"x","other":{deep}}}"#);
    assert!(serde_json::from_str::<Value>(&text).is_err());
    assert_eq!(subset(&text, KEYS), Value::Null);
}
