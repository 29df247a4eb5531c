//! Trace replay against real simulated workers on loopback: the prefix sharing reaches the
//! worker exactly (measured cached tokens equal the ideal on one worker that never evicts),
//! session keys per routing mode, and refusals before anything is sent.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use berth_bench::cli::Args;
use berth_bench::{BenchConfig, BenchError, RunOutput, execute};
use berth_sim::{SimHandle, SimWorker};

async fn sim() -> SimHandle {
    SimWorker::builder()
        .time_scale(0.0)
        .kv_capacity_tokens(100_000_000)
        .record_capacity(4096)
        .spawn_on_loopback()
        .await
}

fn trace_file(name: &str, lines: &[String]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("berth-trace-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

async fn bench(url: &str, path: &std::path::Path, extra: &[&str]) -> Result<RunOutput, BenchError> {
    let mut flags = vec![
        "--url",
        url,
        "--quiet",
        "--input-file",
        path.to_str().unwrap(),
    ];
    flags.extend_from_slice(extra);
    let config = BenchConfig::try_from_args(&Args::from_flags(flags)?)?;
    execute(config, std::future::pending()).await
}

/// Six sessions of four turns: a shared 3-block prefix, a per-group block, per-turn blocks, and
/// a cut last block.
fn agentic_lines() -> Vec<String> {
    let mut lines = Vec::new();
    for s in 0..6u64 {
        let group = 100 + s % 2;
        lines.push(format!(
            r#"{{"session_id": "sess-{s}", "timestamp": 0, "input_length": 75, "output_length": 9, "hash_ids": [0, 1, 2, {group}, {}]}}"#,
            1000 + s * 10
        ));
        for t in 1..4u64 {
            lines.push(format!(
                r#"{{"session_id": "sess-{s}", "delay": 1, "input_length": {}, "output_length": {}, "hash_ids": [{}, {}]}}"#,
                20 + t * 3,
                3 + t,
                1000 + s * 10 + t * 2,
                1001 + s * 10 + t * 2
            ));
        }
    }
    lines
}

#[tokio::test]
async fn measured_cached_tokens_equal_the_ideal_on_one_worker_that_never_evicts() {
    let path = trace_file("agentic.jsonl", &agentic_lines());
    for extra in [
        &["--endpoint-type", "chat", "--streaming"][..],
        &["--endpoint-type", "chat"],
        &["--endpoint-type", "completions"],
    ] {
        let sim = sim().await;
        let mut flags = vec![
            "--custom-dataset-type",
            "mooncake_trace",
            "--prompt-input-tokens-block-size",
            "16",
            "--concurrency",
            "1",
        ];
        flags.extend_from_slice(extra);
        let out = bench(&sim.url(), &path, &flags).await.unwrap();
        let s = &out.summary;
        assert_eq!((s.requests, s.failed), (24, 0), "{extra:?}");
        let ideal_prompt: u64 = out
            .records
            .iter()
            .filter_map(|r| r.ideal_prompt_tokens)
            .sum();
        let ideal_cached: u64 = out
            .records
            .iter()
            .filter_map(|r| r.ideal_cached_tokens)
            .sum();
        assert_eq!(ideal_prompt, s.prompt_tokens, "{extra:?}: prompts as sent");
        assert_eq!(
            ideal_cached, s.cached_tokens,
            "{extra:?}: one worker reaches the ideal"
        );
        assert!(s.cached_tokens > s.prompt_tokens / 2, "{extra:?}: {s:?}");
        assert_eq!(s.ideal_cached_ratio, s.cached_ratio);
        // Each request's figures match, not only the sums.
        for r in &out.records {
            assert_eq!(
                r.ideal_cached_tokens, r.cached_tokens,
                "{extra:?} seq {}",
                r.seq
            );
        }
        let replay = out.replay.unwrap();
        assert_eq!(replay.sessions_started, 6);
    }
}

#[tokio::test]
async fn the_ideal_stays_above_a_scattered_fleet() {
    // A worker whose cache holds four blocks evicts the shared prefix: it measures less than
    // the ideal.
    let path = trace_file("evict.jsonl", &agentic_lines());
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .kv_capacity_tokens(64)
        .spawn_on_loopback()
        .await;
    let out = bench(
        &sim.url(),
        &path,
        &[
            "--custom-dataset-type",
            "mooncake_trace",
            "--prompt-input-tokens-block-size",
            "16",
        ],
    )
    .await
    .unwrap();
    let s = &out.summary;
    assert!(
        s.cached_ratio.unwrap() < s.ideal_cached_ratio.unwrap(),
        "{s:?}"
    );
}

#[tokio::test]
async fn session_keys_per_routing_mode() {
    let lines = vec![
        r#"{"session_id": "conv-a", "input_length": 8, "output_length": 2, "hash_ids": [1]}"#
            .to_owned(),
        r#"{"session_id": "conv a é", "input_length": 8, "output_length": 2, "hash_ids": [2]}"#
            .to_owned(),
        r#"{"session_id": "conv-a", "input_length": 8, "output_length": 2, "hash_ids": [3]}"#
            .to_owned(),
    ];
    let path = trace_file("keys.jsonl", &lines);
    for (mode, header) in [
        ("smg_routing_key", Some("x-smg-routing-key")),
        ("session_id_header", Some("x-session-id")),
        ("dynamo_headers", Some("x-dynamo-session-id")),
        ("rid", None),
    ] {
        let sim = sim().await;
        let out = bench(
            &sim.url(),
            &path,
            &[
                "--custom-dataset-type",
                "mooncake_trace",
                "--session-routing",
                mode,
                "--concurrency",
                "1",
            ],
        )
        .await
        .unwrap();
        assert_eq!(out.summary.ok, 3);
        let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in sim.received() {
            let key = match header {
                Some(h) => r.header(h).unwrap().to_owned(),
                None => r.rid.clone().unwrap(),
            };
            got.entry(key.clone()).or_default().push(key);
        }
        let keys: Vec<&String> = got.keys().collect();
        match header {
            Some(_) => {
                assert!(got.contains_key("conv-a"), "{mode}: {keys:?}");
                assert_eq!(got["conv-a"].len(), 2, "{mode}");
                // A session id a header cannot carry becomes a UUID derived from it.
                let other = keys.iter().find(|k| k.as_str() != "conv-a").unwrap();
                assert_eq!(other.len(), 36, "{mode}: {other}");
            }
            None => {
                assert!(got.contains_key("conv-a_t0") && got.contains_key("conv-a_t1"));
            }
        }
        // The bench's own records carry the same keys.
        assert!(out.records.iter().any(|r| r.session_id == "conv-a"));
    }
}

#[tokio::test]
async fn bailian_children_are_turns_of_their_roots_session() {
    let lines = vec![
        r#"{"chat_id": 7, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 40, "output_length": 3, "turn": 1, "hash_ids": [1, 2, 3]}"#.to_owned(),
        r#"{"chat_id": 9, "parent_chat_id": -1, "timestamp": 0.1, "input_length": 40, "output_length": 3, "turn": 1, "hash_ids": [1, 2, 4]}"#.to_owned(),
        r#"{"chat_id": 8, "parent_chat_id": 7, "timestamp": 0.2, "input_length": 20, "output_length": 3, "turn": 2, "hash_ids": [5, 6]}"#.to_owned(),
    ];
    let path = trace_file("bailian.jsonl", &lines);
    let sim = sim().await;
    let out = bench(
        &sim.url(),
        &path,
        &[
            "--custom-dataset-type",
            "bailian_trace",
            "--session-routing",
            "smg_routing_key",
        ],
    )
    .await
    .unwrap();
    assert_eq!(out.summary.ok, 3);
    assert_eq!(out.summary.sessions, 2);
    let child = out
        .records
        .iter()
        .find(|r| r.session_id == "7" && r.turn_index == 1)
        .unwrap();
    // The child resends its parent's exchange: 40 + answer + 20 tokens, most of it cached.
    assert!(child.cached_tokens.unwrap() >= 48, "{child:?}");
    let received = sim.received();
    let last = received
        .iter()
        .find(|r| {
            r.header("x-smg-routing-key") == Some("7")
                && r.json().unwrap()["messages"].as_array().unwrap().len() == 3
        })
        .unwrap();
    assert_eq!(last.json().unwrap()["messages"][1]["role"], "assistant");
}

#[tokio::test]
async fn a_malformed_line_stops_the_run_before_anything_is_sent() {
    let mut lines = agentic_lines();
    lines.insert(
        5,
        r#"{"session_id": "x", "input_length": "many"}"#.to_owned(),
    );
    let path = trace_file("bad.jsonl", &lines);
    let sim = sim().await;
    let err = bench(
        &sim.url(),
        &path,
        &["--custom-dataset-type", "mooncake_trace"],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("trace line 6:"), "{err}");
    assert!(sim.received().is_empty());
    let err = bench(&sim.url(), &path, &[]).await.unwrap_err().to_string();
    assert!(err.contains("--custom-dataset-type"), "{err}");
}

#[tokio::test]
async fn the_ideal_reaches_summary_json_csv_and_the_table() {
    let path = trace_file("artifacts.jsonl", &agentic_lines());
    let dir = std::env::temp_dir().join(format!("berth-trace-art-{}", std::process::id()));
    let sim = sim().await;
    let out = bench(
        &sim.url(),
        &path,
        &[
            "--custom-dataset-type",
            "mooncake_trace",
            "--prompt-input-tokens-block-size",
            "16",
            "--num-sessions",
            "2",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    assert_eq!(out.summary.requests, 8, "the first two sessions only");
    berth_bench::report::files::write_all(&dir, &out).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let ideal = json["summary"]["ideal_cached_ratio"].as_f64().unwrap();
    assert!(ideal > 0.0 && ideal < 1.0, "{json}");
    assert_eq!(json["replay"]["sessions_started"], 2);
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(csv.contains("run,ideal_cached_ratio,"), "{csv}");
    let table = berth_bench::report::console::render(&out);
    assert!(table.contains("ideal cached ratio"), "{table}");
    assert!(table.contains("trace replay"), "{table}");
    let records = std::fs::read_to_string(dir.join("records.jsonl")).unwrap();
    assert!(
        records
            .lines()
            .all(|l| l.contains("\"ideal_cached_tokens\""))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
