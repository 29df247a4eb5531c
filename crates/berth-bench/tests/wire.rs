//! Wire-level tests: each session-routing mode's output as received by a simulated worker.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};

use berth_bench::cli::Args;
use berth_bench::{BenchConfig, RunOutput, execute};
use berth_sim::{RequestRecord, SimHandle, SimWorker};
use serde_json::Value;

/// 2 trees, each a root with 2 children; every session plans 3 turns: 18 requests.
const REQUESTS: usize = 18;

async fn sim() -> SimHandle {
    SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(4096)
        .spawn_on_loopback()
        .await
}

async fn bench(sim: &SimHandle, extra: &[&str]) -> RunOutput {
    let url = sim.url();
    let mut flags = vec![
        "--url",
        &url,
        "--num-sessions",
        "2",
        "--concurrency",
        "2",
        "--session-turns-mean",
        "3",
        "--agent-fanout",
        "2",
        "--agent-depth",
        "1",
        "--random-seed",
        "7",
        "--quiet",
        "--synthetic-input-tokens-mean",
        "8",
        "--output-tokens-mean",
        "4",
        "--streaming",
    ];
    flags.extend_from_slice(extra);
    let config = BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap();
    let out = execute(config, std::future::pending()).await.unwrap();
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    assert_eq!(out.records.len(), REQUESTS);
    out
}

fn received(sim: &SimHandle) -> Vec<RequestRecord> {
    let mut r = sim.received();
    r.sort_by_key(|r| r.seq);
    assert_eq!(r.len(), REQUESTS);
    r
}

const ROUTING_HEADERS: [&str; 5] = [
    "x-dynamo-session-id",
    "x-dynamo-parent-session-id",
    "x-smg-routing-key",
    "x-session-id",
    "x-tree-id",
];

fn body_has_no_routing(r: &RequestRecord) {
    let body = r.json().unwrap();
    assert!(body.get("rid").is_none(), "{body}");
    assert!(body.get("nvext").is_none(), "{body}");
}

/// Session ids of the run, split into roots and children (from the bench's own records).
fn sessions(out: &RunOutput) -> (HashSet<String>, BTreeMap<String, String>) {
    let roots = out
        .records
        .iter()
        .filter(|r| r.depth == 0)
        .map(|r| r.session_id.clone())
        .collect();
    let parents = out
        .records
        .iter()
        .filter_map(|r| r.parent_id.clone().map(|p| (r.session_id.clone(), p)))
        .collect();
    (roots, parents)
}

#[tokio::test]
async fn dynamo_headers() {
    let sim = sim().await;
    let out = bench(&sim, &["--session-routing", "dynamo_headers"]).await;
    let (roots, parents) = sessions(&out);
    assert_eq!((roots.len(), parents.len()), (2, 4));
    let mut per_session: BTreeMap<String, usize> = BTreeMap::new();
    for r in received(&sim) {
        let id = r.header("x-dynamo-session-id").unwrap().to_owned();
        match r.header("x-dynamo-parent-session-id") {
            Some(parent) => assert_eq!(parents.get(&id).map(String::as_str), Some(parent)),
            None => assert!(roots.contains(&id), "parent header omitted only on roots"),
        }
        assert!(r.header("x-smg-routing-key").is_none() && r.header("x-session-id").is_none());
        body_has_no_routing(&r);
        *per_session.entry(id).or_default() += 1;
    }
    assert_eq!(per_session.len(), 6);
    assert!(per_session.values().all(|n| *n == 3), "{per_session:?}");
}

#[tokio::test]
async fn single_header_presets() {
    for (mode, header) in [
        ("smg_routing_key", "x-smg-routing-key"),
        ("session_id_header", "x-session-id"),
    ] {
        let sim = sim().await;
        let out = bench(&sim, &["--session-routing", mode]).await;
        let ids: HashSet<String> = out.records.iter().map(|r| r.session_id.clone()).collect();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for r in received(&sim) {
            let value = r.header(header).unwrap().to_owned();
            assert!(ids.contains(&value));
            for other in ROUTING_HEADERS.iter().filter(|h| **h != header) {
                assert!(r.header(other).is_none(), "{mode} sent {other}");
            }
            body_has_no_routing(&r);
            *seen.entry(value).or_default() += 1;
        }
        assert_eq!(seen.len(), 6, "{mode}");
        assert!(seen.values().all(|n| *n == 3), "{mode}: {seen:?}");
    }
}

#[tokio::test]
async fn identity_headers_tiers() {
    let sim = sim().await;
    let out = bench(
        &sim,
        &[
            "--session-routing",
            "identity_headers",
            "--session-routing-opt",
            "session=X-Session-ID,X-SMG-Routing-Key",
            "--session-routing-opt",
            "parent=X-Parent-ID",
            "--session-routing-opt",
            "root=X-Tree-ID",
        ],
    )
    .await;
    let (roots, parents) = sessions(&out);
    for r in received(&sim) {
        let id = r.header("x-session-id").unwrap();
        assert_eq!(r.header("x-smg-routing-key"), Some(id));
        let tree = r.header("x-tree-id").unwrap();
        assert!(roots.contains(tree));
        match parents.get(id) {
            Some(parent) => {
                assert_eq!(r.header("x-parent-id"), Some(parent.as_str()));
                assert_eq!(parent, tree, "depth 1: the parent is the root");
            }
            None => {
                assert!(r.header("x-parent-id").is_none());
                assert_eq!(id, tree);
            }
        }
        assert!(r.header("x-dynamo-session-id").is_none());
        body_has_no_routing(&r);
    }
}

#[tokio::test]
async fn rid_lineage() {
    let sim = sim().await;
    let out = bench(
        &sim,
        &["--session-routing", "rid", "--endpoint-type", "generate"],
    )
    .await;
    let ids: HashSet<String> = out.records.iter().map(|r| r.session_id.clone()).collect();
    let mut rids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in received(&sim) {
        assert_eq!(r.path, "/generate");
        let rid = r.rid.clone().unwrap();
        let base = berth_client::strip_lineage(&rid).to_owned();
        assert!(ids.contains(&base), "{rid}");
        for h in ROUTING_HEADERS {
            assert!(r.header(h).is_none());
        }
        rids.entry(base).or_default().push(rid);
    }
    for (base, list) in rids {
        let expected: Vec<String> = (0..3).map(|t| format!("{base}_t{t}")).collect();
        assert_eq!(list, expected);
    }
}

#[tokio::test]
async fn none_sends_nothing() {
    let sim = sim().await;
    bench(
        &sim,
        &[
            "--session-routing",
            "none",
            "--endpoint-type",
            "completions",
        ],
    )
    .await;
    for r in received(&sim) {
        for h in ROUTING_HEADERS {
            assert!(r.header(h).is_none());
        }
        body_has_no_routing(&r);
    }
}

fn control(r: &RequestRecord) -> Value {
    r.json().unwrap()["nvext"]["session_control"].clone()
}

#[tokio::test]
async fn nvext_conversation_lifecycle_preserves_other_nvext() {
    let sim = sim().await;
    bench(
        &sim,
        &[
            "--session-routing",
            "dynamo_nvext",
            "--session-routing-opt",
            "timeout_seconds=120",
            "--extra-inputs",
            r#"{"nvext":{"priority":2}}"#,
        ],
    )
    .await;
    let mut by_session: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in received(&sim) {
        assert_eq!(
            r.json().unwrap()["nvext"]["priority"],
            2,
            "other nvext content kept"
        );
        for h in ROUTING_HEADERS {
            assert!(r.header(h).is_none());
        }
        let c = control(&r);
        by_session
            .entry(c["session_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(c);
    }
    assert_eq!(by_session.len(), 6);
    for (id, controls) in by_session {
        let actions: Vec<&str> = controls
            .iter()
            .map(|c| c["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, ["bind", "bind", "close"], "{id}");
        assert_eq!(controls[0]["timeout"], 120);
        assert!(controls[2].get("timeout").is_none());
    }
}

#[tokio::test]
async fn nvext_lineage_binds_root_and_closes_once_per_tree() {
    let sim = sim().await;
    let out = bench(
        &sim,
        &[
            "--session-routing",
            "dynamo_nvext",
            "--session-routing-opt",
            "scope=lineage",
        ],
    )
    .await;
    let (roots, _) = sessions(&out);
    let mut by_tree: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in received(&sim) {
        let c = control(&r);
        let key = c["session_id"].as_str().unwrap().to_owned();
        assert!(roots.contains(&key), "every session binds the root's id");
        by_tree
            .entry(key)
            .or_default()
            .push(c["action"].as_str().unwrap().to_owned());
    }
    assert_eq!(by_tree.len(), 2);
    for (root, actions) in by_tree {
        assert_eq!(actions.len(), 9);
        assert_eq!(
            actions.iter().filter(|a| *a == "close").count(),
            1,
            "{root}"
        );
        assert_eq!(
            actions.last().map(String::as_str),
            Some("close"),
            "the tree's last request closes"
        );
    }
}

#[tokio::test]
async fn history_is_resent_with_the_servers_answers() {
    let sim = sim().await;
    let out = bench(
        &sim,
        &[
            "--session-routing",
            "session_id_header",
            "--shared-system-prompt-length",
            "40",
        ],
    )
    .await;
    let rec = received(&sim);
    // Take one leaf session's three requests in order.
    let child = out
        .records
        .iter()
        .find(|r| r.depth == 1)
        .unwrap()
        .session_id
        .clone();
    let turns: Vec<Value> = rec
        .iter()
        .filter(|r| r.header("x-session-id") == Some(child.as_str()))
        .map(|r| r.json().unwrap())
        .collect();
    assert_eq!(turns.len(), 3);
    let messages = |v: &Value| v["messages"].as_array().unwrap().clone();
    assert_eq!(messages(&turns[0]).len(), 2); // system + user
    assert_eq!(messages(&turns[2]).len(), 6);
    // Turn 2 starts with turn 1's whole message list, and the assistant turns are not empty.
    assert_eq!(messages(&turns[2])[..4], messages(&turns[1])[..]);
    assert_eq!(messages(&turns[1])[2]["role"], "assistant");
    assert!(
        !messages(&turns[1])[2]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    // The parent quotes its children's final answers in its second turn.
    let s = &out.summary;
    assert!(
        s.cached_ratio.unwrap() > 0.0,
        "later turns hit the worker's prefix cache"
    );
    assert_eq!(
        s.stickiness.ratio,
        Some(1.0),
        "one worker: every turn sticks"
    );
    assert_eq!(s.workers.len(), 1);
    assert!(s.ttft_ms.is_some() && s.itl_ms.is_some());
}

#[tokio::test]
async fn retries_keep_the_session_and_add_retry_suffixes() {
    let sim = sim().await;
    sim.set_error_rate(1.0, 503);
    let url = sim.url();
    let flags = [
        "--url",
        &url,
        "--num-sessions",
        "1",
        "--session-turns-mean",
        "2",
        "--max-retries",
        "2",
        "--session-routing",
        "rid",
        "--quiet",
    ];
    let config = BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap();
    let out = execute(config, std::future::pending()).await.unwrap();
    let rids: Vec<String> = sim.received().into_iter().map(|r| r.rid.unwrap()).collect();
    let base = &out.records[0].session_id;
    assert_eq!(
        rids,
        [
            format!("{base}_t0"),
            format!("{base}_t0_r1"),
            format!("{base}_t0_r2")
        ]
    );
    assert_eq!(out.summary.failed, 3);
    assert_eq!(out.summary.errors.values().sum::<u64>(), 3);
    assert!(
        out.summary.errors.keys().all(|k| k.starts_with("503")),
        "{:?}",
        out.summary.errors
    );
}
