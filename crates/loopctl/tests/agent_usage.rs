//! End-to-end: an agent's token and cost records on a phase's stdout reach its
//! `phase_finished`, run.json's token counts and the postmortem.

use serde_json::{Value, json};

mod common;
use common::*;

/// What an agent transcript of `fixtures/agents` says it spent, read here on its own terms:
/// Claude's last `result` line (model from its `init` line), or Codex's last `turn.completed`
/// and the number of them.
fn spent(transcript: &str) -> Value {
    let text = std::fs::read_to_string(
        loopctl_tests::repo()
            .join("fixtures/agents")
            .join(transcript),
    )
    .unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &'static str| lines.iter().filter(move |l| l["type"] == t);
    if let Some(r) = of("result").next_back() {
        let u = &r["usage"];
        json!({"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
               "cache_read_tokens": u["cache_read_input_tokens"],
               "cache_creation_tokens": u["cache_creation_input_tokens"],
               "cost_usd": r["total_cost_usd"], "turns": r["num_turns"],
               "model": of("system").next().unwrap()["model"]})
    } else {
        let u = &of("turn.completed").next_back().unwrap()["usage"];
        json!({"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
               "cache_read_tokens": u["cached_input_tokens"],
               "turns": of("turn.completed").count()})
    }
}

#[test]
fn an_agents_usage_on_stdout_reaches_phase_finished_and_the_postmortem() {
    let s = Sandbox::new();
    let agents = loopctl_tests::repo().join("fixtures/agents");
    let cat = |f: &str| format!("cat '{}'", agents.join(f).display());
    let (code, err) = s.run(
        json!({"max_iterations": 1,
               "loop": [{"name": "implement", "run": cat("claude-stream-json.jsonl")},
                        {"name": "review", "run": cat("codex-exec-json.jsonl")},
                        {"name": "gate", "run": echo("<|workflow: exit | done|>")}]}),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ev = s.events();
    let fin = named(&ev, "phase_finished");
    let (claude, codex) = (
        spent("claude-stream-json.jsonl"),
        spent("codex-exec-json.jsonl"),
    );
    assert_eq!(fin[0]["payload"]["usage"], claude);
    assert_eq!(fin[1]["payload"]["usage"], codex);
    assert!(
        fin[2]["payload"].get("usage").is_none(),
        "no record, no usage"
    );

    let n = |k: &str| claude[k].as_u64().unwrap_or(0) + codex[k].as_u64().unwrap_or(0);
    let out = s.cmd().args(["postmortem", "r1"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let total = format!(
        "Agent usage: {} in, {} out, {} cache read, {} cache write, ${:.4}, {} turns ({})",
        n("input_tokens"),
        n("output_tokens"),
        n("cache_read_tokens"),
        n("cache_creation_tokens"),
        claude["cost_usd"].as_f64().unwrap(),
        n("turns"),
        claude["model"].as_str().unwrap()
    );
    assert!(text.contains(&total), "{text}");
    let pm: Value = serde_json::from_slice(
        &s.cmd()
            .args(["postmortem", "r1", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        pm["usage"]["total"]["input_tokens"],
        json!(n("input_tokens"))
    );
    assert_eq!(pm["usage"]["phases"][1]["usage"], codex);
    // run.json's token counts take the agents' input and output tokens.
    let st = s.state();
    assert_eq!(
        (&st["tokens"]["input"], &st["tokens"]["output"]),
        (&json!(n("input_tokens")), &json!(n("output_tokens")))
    );
}

#[test]
fn an_agent_stopped_before_its_result_still_has_its_calls_recorded() {
    let s = Sandbox::new();
    let claude = loopctl_tests::repo().join("fixtures/agents/claude-stream-json.jsonl");
    // Everything but the result line, then the agent hangs until the timeout.
    let run = format!(
        "grep -v '\"type\":\"result\"' '{}'; sleep 30 & wait",
        claude.display()
    );
    let (code, err) = s.run(
        json!({"loop": [{"name": "implement", "run": run}]}),
        &["--timeout", "1s"],
    );
    assert_eq!(code, 124, "{err}");
    let ev = s.events();
    let fin = &named(&ev, "phase_finished")[0]["payload"];
    assert_eq!(fin["stop_reason"], json!("timeout"));
    // What its calls spent: each assistant message id once.
    let text = std::fs::read_to_string(&claude).unwrap();
    let mut calls = std::collections::BTreeMap::new();
    let mut model = Value::Null;
    for l in text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        match l["type"].as_str() {
            Some("system") => model = l["model"].clone(),
            Some("assistant") => {
                calls.insert(
                    l["message"]["id"].to_string(),
                    l["message"]["usage"].clone(),
                );
            }
            _ => {}
        }
    }
    let sum = |k: &str| calls.values().map(|u| u[k].as_u64().unwrap()).sum::<u64>();
    let want = json!({"input_tokens": sum("input_tokens"), "output_tokens": sum("output_tokens"),
                      "cache_read_tokens": sum("cache_read_input_tokens"),
                      "cache_creation_tokens": sum("cache_creation_input_tokens"), "model": model});
    assert_eq!(fin["usage"], want);
}
