//! The demo end to end on tiny workloads, both row sets.
#![allow(clippy::unwrap_used)]

use super::scenario::{AGENTIC_SCENARIOS, PD_SCENARIO, SCENARIOS, TRACE_SCENARIOS, available};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_every_scenario_and_writes_the_report() {
    let dir = std::env::temp_dir().join(format!("berth-demo-test-{}", std::process::id()));
    let args = Args {
        sessions: 4,
        agentic_sessions: 3,
        seed: 3,
        time_scale: 0.0,
        kv_capacity_tokens: 16_384,
        agentic_kv_capacity_tokens: 1_024,
        artifact_dir: dir.clone(),
        trace_sessions: 3,
        trace_speedup: 50.0,
        trace_kv_capacity_tokens: 4_096,
        quick: true,
    };
    let tables = run_and_report(args).await.unwrap();
    assert_eq!(
        tables.len(),
        3,
        "the original rows, the agentic set, the trace set"
    );
    assert!(tables[1].contains("agentic set"), "{}", tables[1]);
    assert!(tables[2].contains("trace set"), "{}", tables[2]);
    assert!(tables[2].contains("ideal"), "{}", tables[2]);
    assert!(!tables[0].contains("ideal") && !tables[1].contains("ideal"));
    for t in &tables {
        assert!(t.contains("\nrecommendation: "), "{t}");
        assert!(t.contains("uncached"), "{t}");
    }

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let agentic: Vec<String> = AGENTIC_SCENARIOS
        .iter()
        .filter(|s| available(s))
        .map(|s| format!("agentic: {}", s.label))
        .collect();
    let trace: Vec<String> = TRACE_SCENARIOS
        .iter()
        .filter(|s| available(s))
        .map(|s| format!("trace: {}", s.label))
        .collect();
    let labels = SCENARIOS
        .iter()
        .chain([&PD_SCENARIO])
        .map(|s| s.label.to_owned())
        .chain(agentic)
        .chain(trace.iter().cloned());
    for label in labels {
        assert!(html.contains(&label), "{label}");
        let m = &summary[&label];
        assert_eq!(m["failed"], 0, "{label}: {m}");
        assert!(m["ok"].as_u64().unwrap() > 0, "{label}");
        let fleet = if label == PD_SCENARIO.label { 2 } else { 4 };
        assert_eq!(m["fleet_size"], fleet, "{label}");
        assert!(
            m["uncached_max_over_mean"].as_f64().unwrap() >= 1.0,
            "{label}"
        );
    }
    // A policy the gateway does not know yet has no row, and the table says so.
    for s in AGENTIC_SCENARIOS.iter().filter(|s| !available(s)) {
        assert!(summary.get(format!("agentic: {}", s.label)).is_none());
        assert!(tables[1].contains(&format!("--policy {}", s.policy)));
    }
    // Key-based routing keeps every session on one worker, in both sets.
    assert_eq!(summary[PD_SCENARIO.label]["stickiness"]["ratio"], 1.0);
    for label in [
        "manual",
        "consistent_hashing",
        "cache_aware + override (rid)",
    ] {
        assert_eq!(summary[label]["stickiness"]["ratio"], 1.0, "{label}");
        let agentic = format!("agentic: {label}");
        assert_eq!(summary[&agentic]["stickiness"]["ratio"], 1.0, "{agentic}");
    }
    // The trace rows replay the committed trace's first 3 sessions and report its ideal; a
    // single sticky worker per session gets as close to it as the fleet's caches allow.
    for label in &trace {
        let m = &summary[label];
        let ideal = m["ideal_cached_ratio"].as_f64().unwrap();
        assert!(ideal > 0.5 && ideal <= 1.0, "{label}: {m}");
        assert!(
            m["cached_ratio"].as_f64().unwrap() <= ideal + 1e-9,
            "{label}: {m}"
        );
        assert_eq!(m["sessions"], 3, "{label}");
    }
    assert_eq!(summary["trace: manual"]["stickiness"]["ratio"], 1.0);
    // The agentic set is heavier: four long prompts, children carrying their parents' turns.
    let tokens = |label: &str| {
        summary[label]["prompt_tokens"].as_f64().unwrap() / summary[label]["ok"].as_f64().unwrap()
    };
    assert!(tokens("agentic: round_robin") > tokens("round_robin"));
    std::fs::remove_dir_all(&dir).unwrap();
}
