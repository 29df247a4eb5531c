//! The launcher stops: by session count, by duration, by the shutdown signal; rate-limited
//! starts. No timing assertions, only that runs end and their counts add up.
#![allow(clippy::unwrap_used)]

use berth_bench::cli::Args;
use berth_bench::{BenchConfig, execute};
use berth_sim::SimWorker;

fn config(url: &str, extra: &[&str]) -> BenchConfig {
    let mut flags = vec![
        "--url",
        url,
        "--quiet",
        "--synthetic-input-tokens-mean",
        "4",
        "--output-tokens-mean",
        "2",
    ];
    flags.extend_from_slice(extra);
    BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap()
}

#[tokio::test]
async fn duration_bounds_an_unbounded_session_count() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(0)
        .spawn_on_loopback()
        .await;
    let cfg = config(
        &sim.url(),
        &[
            "--benchmark-duration",
            "0.3",
            "--concurrency",
            "4",
            "--session-turn-delay-mean",
            "5",
        ],
    );
    assert_eq!(cfg.num_sessions, None);
    let out = execute(cfg, std::future::pending()).await.unwrap();
    assert!(!out.interrupted);
    assert!(out.roots_started > 0);
    assert_eq!(out.summary.failed, 0);
    assert_eq!(out.summary.requests as usize, out.records.len());
}

#[tokio::test]
async fn shutdown_signal_stops_the_run() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(0)
        .spawn_on_loopback()
        .await;
    let cfg = config(
        &sim.url(),
        &[
            "--num-sessions",
            "1000000",
            "--session-turn-delay-mean",
            "10",
        ],
    );
    let out = execute(cfg, async {}).await.unwrap();
    assert!(out.interrupted);
    assert!(out.roots_started < 1_000_000);
}

#[tokio::test]
async fn rate_limited_starts_run_every_session() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(0)
        .spawn_on_loopback()
        .await;
    for pattern in ["constant", "poisson"] {
        let cfg = config(
            &sim.url(),
            &[
                "--num-sessions",
                "5",
                "--request-rate",
                "200",
                "--arrival-pattern",
                pattern,
                "--random-seed",
                "3",
                "--session-turns-mean",
                "2",
            ],
        );
        let out = execute(cfg, std::future::pending()).await.unwrap();
        assert_eq!(out.roots_started, 5, "{pattern}");
        assert_eq!(out.summary.ok, 10, "{pattern}");
        assert_eq!(out.summary.sessions, 5, "{pattern}");
    }
}

#[tokio::test]
async fn deeper_trees_run_every_session_and_quote_children() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(4096)
        .spawn_on_loopback()
        .await;
    let cfg = config(
        &sim.url(),
        &[
            "--num-sessions",
            "1",
            "--agent-fanout",
            "2",
            "--agent-depth",
            "2",
            "--session-turns-mean",
            "1",
            "--random-seed",
            "5",
            "--session-routing",
            "dynamo_nvext",
            "--session-routing-opt",
            "scope=lineage",
        ],
    );
    let out = execute(cfg, std::future::pending()).await.unwrap();
    // 1 root + 2 children + 4 grandchildren; agents plan at least 2 turns, leaves 1.
    assert_eq!(out.summary.sessions, 7);
    assert_eq!(out.records.len(), 2 + 2 * 2 + 4);
    let mut received = sim.received();
    received.sort_by_key(|r| r.seq);
    let closes: Vec<u64> = received
        .iter()
        .filter(|r| r.json().unwrap()["nvext"]["session_control"]["action"] == "close")
        .map(|r| r.seq)
        .collect();
    assert_eq!(
        closes,
        [received.last().unwrap().seq],
        "one close, on the tree's last request"
    );
    let root = &out
        .records
        .iter()
        .find(|r| r.depth == 0)
        .unwrap()
        .session_id;
    assert!(
        received
            .iter()
            .all(|r| r.json().unwrap()["nvext"]["session_control"]["session_id"] == root.as_str())
    );
    // The root's second turn quotes its children's answers.
    let last = received.last().unwrap().json().unwrap();
    let user = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert!(
        user["content"]
            .as_str()
            .unwrap()
            .starts_with("Sub-agent results:")
    );
}
