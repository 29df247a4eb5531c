//! The agentic workload on the wire: several shared system prompts drawn per tree, and
//! sub-agents whose first prompt extends their parent's conversation.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};

use berth_bench::cli::Args;
use berth_bench::workload::prompts::system_prompts;
use berth_bench::{BenchConfig, RunOutput, execute};
use berth_sim::{SimHandle, SimWorker};
use serde_json::Value;

/// Request bodies as the worker received them, per session id (in turn order).
type Bodies = BTreeMap<String, Vec<Value>>;

async fn run(extra: &[&str]) -> (SimHandle, RunOutput, Bodies) {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(4096)
        .spawn_on_loopback()
        .await;
    let url = sim.url();
    let mut flags = vec![
        "--url",
        &url,
        "--quiet",
        "--streaming",
        "--random-seed",
        "21",
        "--synthetic-input-tokens-mean",
        "6",
        "--output-tokens-mean",
        "5",
        "--session-routing",
        "dynamo_headers",
    ];
    flags.extend_from_slice(extra);
    let config = BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap();
    let out = execute(config, std::future::pending()).await.unwrap();
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let mut received = sim.received();
    received.sort_by_key(|r| r.seq);
    let mut bodies = Bodies::new();
    for r in &received {
        let session = r.header("x-dynamo-session-id").unwrap().to_owned();
        bodies.entry(session).or_default().push(r.json().unwrap());
    }
    (sim, out, bodies)
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

#[tokio::test]
async fn each_tree_draws_one_of_the_system_prompts() {
    let flags = [
        "--num-sessions",
        "12",
        "--num-system-prompts",
        "3",
        "--shared-system-prompt-length",
        "20",
        "--agent-fanout",
        "1",
        "--agent-depth",
        "1",
        "--session-turns-mean",
        "2",
    ];
    let (_sim, out, bodies) = run(&flags).await;
    let prompts = system_prompts(21, 3, 20);
    let mut by_root: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    for r in &out.records {
        let body = &bodies[&r.session_id][r.turn_index as usize];
        let first = &messages(body)[0];
        assert_eq!(first["role"], "system");
        let text = first["content"].as_str().unwrap().to_owned();
        assert!(prompts.contains(&text), "an unknown system prompt");
        by_root.entry(r.root_id.clone()).or_default().insert(text);
    }
    assert_eq!(by_root.len(), 12);
    assert!(
        by_root.values().all(|p| p.len() == 1),
        "a tree keeps its root's prompt"
    );
    let used: HashSet<&String> = by_root.values().flatten().collect();
    assert!(used.len() > 1, "12 roots spread over the 3 prompts");

    // The same seed draws the same prompt for the same (seeded) root id.
    let (_sim, again, bodies) = run(&flags).await;
    for r in &again.records {
        let body = &bodies[&r.session_id][r.turn_index as usize];
        let text = messages(body)[0]["content"].as_str().unwrap().to_owned();
        assert!(by_root[&r.root_id].contains(&text));
    }
}

#[tokio::test]
async fn sub_agents_under_agent_context_parent_extend_their_parents_conversation() {
    let (_sim, out, bodies) = run(&[
        "--num-sessions",
        "1",
        "--shared-system-prompt-length",
        "40",
        "--agent-fanout",
        "2",
        "--agent-depth",
        "2",
        "--session-turns-mean",
        "2",
        "--agent-context",
        "parent",
    ])
    .await;
    // Each session's requests in turn order, with what the worker received.
    let mut turns: BTreeMap<String, Vec<(&berth_bench::metrics::RequestRecord, &Value)>> =
        BTreeMap::new();
    for r in &out.records {
        let body = &bodies[&r.session_id][r.turn_index as usize];
        turns
            .entry(r.session_id.clone())
            .or_default()
            .push((r, body));
    }
    for reqs in turns.values_mut() {
        reqs.sort_by_key(|(r, _)| r.turn_index);
    }
    assert_eq!(turns.len(), 7, "1 root, 2 children, 4 grandchildren");
    let mut checked = 0;
    for reqs in turns.values() {
        let (child, child_body) = reqs[0];
        let Some(parent) = &child.parent_id else {
            continue;
        };
        let parent_reqs = &turns[parent];
        // The parent's second turn resends its first turn and answer: the spawn point.
        let spawn = messages(parent_reqs[1].1);
        let first = messages(child_body);
        let n = first.len() - 1;
        assert_eq!(
            first[..n],
            spawn[..n],
            "the child starts with its parent's conversation"
        );
        assert_eq!(first[n - 1]["role"], "assistant");
        assert!(
            first[n]["content"]
                .as_str()
                .unwrap()
                .starts_with("Sub-agent task: ")
        );
        // On one worker the parent's first turn and answer are already cached.
        let parent_prompt = parent_reqs[0].0.prompt_tokens.unwrap();
        assert!(
            child.cached_tokens.unwrap() >= parent_prompt / 16 * 16,
            "child cached {:?} of {:?}; parent prompt {parent_prompt}",
            child.cached_tokens,
            child.prompt_tokens
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
    // Grandchildren carry the root's conversation too: it is a prefix of theirs.
    let root = turns.values().find(|r| r[0].0.depth == 0).unwrap();
    let root_first = messages(root[0].1);
    for reqs in turns.values().filter(|r| r[0].0.depth == 2) {
        assert_eq!(messages(reqs[0].1)[..root_first.len()], root_first[..]);
    }
}
