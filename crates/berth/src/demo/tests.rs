//! The demo end to end on a tiny workload.
#![allow(clippy::unwrap_used)]

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_every_scenario_and_writes_the_report() {
    let dir = std::env::temp_dir().join(format!("berth-demo-test-{}", std::process::id()));
    let args = Args {
        sessions: 4,
        seed: 3,
        time_scale: 0.0,
        kv_capacity_tokens: 16_384,
        artifact_dir: dir.clone(),
        quick: true,
    };
    run(args).await.unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for s in SCENARIOS {
        assert!(html.contains(s.label), "{}", s.label);
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for s in SCENARIOS {
        let m = &summary[s.label];
        assert_eq!(m["failed"], 0, "{}: {m}", s.label);
        assert!(m["ok"].as_u64().unwrap() > 0, "{}", s.label);
    }
    // Key-based routing keeps every session on one worker.
    for label in [
        "manual",
        "consistent_hashing",
        "cache_aware + override (rid)",
    ] {
        assert_eq!(summary[label]["stickiness"]["ratio"], 1.0, "{label}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
