//! `--artifact-dir` outputs of a small run against a simulated worker.
#![allow(clippy::unwrap_used)]

use berth_bench::cli::Args;
use berth_bench::report::files::write_all;
use berth_bench::{BenchConfig, execute};
use berth_sim::SimWorker;
use serde_json::Value;

#[tokio::test]
async fn artifacts_are_written_and_self_contained() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let dir = std::env::temp_dir().join(format!("berth-bench-artifacts-{}", std::process::id()));
    let url = sim.url();
    let dir_s = dir.to_string_lossy().into_owned();
    let flags = [
        "--url",
        &url,
        "--num-sessions",
        "3",
        "--session-turns-mean",
        "3",
        "--streaming",
        "--quiet",
        "--session-routing",
        "smg_routing_key",
        "--artifact-dir",
        &dir_s,
        "--export-level",
        "raw",
        "--warmup-requests",
        "2",
    ];
    let config = BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap();
    let out = execute(config, std::future::pending()).await.unwrap();
    write_all(&dir, &out).unwrap();

    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["summary"]["requests"], 7, "9 sent, 2 warm-up");
    assert_eq!(summary["summary"]["warmup"], 2);
    assert_eq!(summary["config"]["routing"]["mode"], "smg_routing_key");

    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(csv.starts_with("run,metric,value\n"));
    assert!(csv.contains("run,cached_ratio,"));
    // One worker did all the prefill: max/mean is exactly 1 and its tokens are listed.
    assert!(
        csv.contains("run,uncached_max_over_mean,1.000000\n"),
        "{csv}"
    );
    assert!(csv.contains(&format!(
        "run,uncached_tokens_worker[{}],",
        out.records[0].sim_worker.as_deref().unwrap()
    )));
    let uncached = &summary["summary"]["uncached_tokens_per_worker"];
    let total: u64 = out
        .records
        .iter()
        .filter(|r| r.ok && !r.warmup)
        .map(|r| r.prompt_tokens.unwrap() - r.cached_tokens.unwrap())
        .sum();
    assert_eq!(uncached.as_object().unwrap().len(), 1);
    assert_eq!(
        uncached.as_object().unwrap().values().next().unwrap(),
        total
    );
    let console = berth_bench::report::console::render(&out);
    assert!(console.contains("uncached max/mean"), "{console}");
    assert!(console.contains("uncached tokens"), "{console}");

    let lines: Vec<Value> = std::fs::read_to_string(dir.join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 9);
    let raw = &lines[0]["raw"];
    assert_eq!(raw["headers"][0][0], "X-SMG-Routing-Key");
    assert_eq!(raw["headers"][0][1], lines[0]["session_id"]);
    assert!(raw["body"]["messages"].is_array());

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg").count(), 5);
    assert!(html.contains("uncached tokens max/mean"));
    assert!(html.contains("uncached prompt tokens per worker"));
    assert!(!html.contains("<script"), "no scripts");
    assert!(!html.contains("src=\"http"), "no external assets");
    std::fs::remove_dir_all(&dir).unwrap();
}
