//! Summary arithmetic on scripted records with known answers.

use super::*;

fn rec(session: &str, turn: u32, worker: &str, prompt: u64, cached: u64) -> RequestRecord {
    RequestRecord {
        session_id: session.into(),
        root_id: session.into(),
        turn_index: turn,
        ok: true,
        status: Some(200),
        start_ms: f64::from(turn) * 100.0,
        e2e_ms: 50.0,
        ttft_ms: Some(10.0),
        prompt_tokens: Some(prompt),
        cached_tokens: Some(cached),
        output_tokens: Some(10),
        routed_worker: Some(worker.into()),
        ..Default::default()
    }
}

#[test]
fn stickiness_counts_consecutive_turns() {
    // Session a: w1, w1, w2, w2 -> 2 of 3 sticky. Session b: w3, w3 -> 1 of 1.
    let records = vec![
        rec("a", 0, "w1", 10, 0),
        rec("a", 1, "w1", 20, 10),
        rec("a", 2, "w2", 30, 0),
        rec("a", 3, "w2", 40, 30),
        rec("b", 1, "w3", 20, 10),
        rec("b", 0, "w3", 10, 0),
    ];
    let s = stickiness(&records);
    assert_eq!((s.eligible, s.same), (4, 3));
    assert_eq!(s.ratio, Some(0.75));
}

#[test]
fn failures_unknown_workers_and_warmup() {
    let mut failed = rec("a", 1, "w9", 0, 0);
    failed.ok = false;
    let mut no_worker = rec("a", 2, "w1", 10, 0);
    no_worker.routed_worker = None;
    let mut warm = rec("b", 0, "w1", 10, 0);
    warm.warmup = true;
    let records = vec![
        rec("a", 0, "w1", 10, 0),
        failed,
        no_worker,
        rec("a", 3, "w2", 10, 0),
        warm,
        rec("b", 1, "w1", 10, 0),
    ];
    // a: turn 0 -> turn 2 has no worker (not eligible), turn 2 -> 3 not eligible either;
    // b: warm-up turn 0 on w1 then turn 1 on w1: eligible and sticky.
    let s = stickiness(&records);
    assert_eq!((s.eligible, s.same), (1, 1));
}

#[test]
fn cached_ratio_is_token_weighted_and_per_turn() {
    let mut unreported = rec("c", 0, "w1", 1000, 0);
    unreported.cached_tokens = None;
    let records = vec![
        rec("a", 0, "w1", 100, 0),
        rec("a", 1, "w1", 300, 200),
        rec("b", 0, "w2", 100, 50),
        rec("b", 1, "w2", 500, 0),
        unreported,
    ];
    let s = Summary::from_records(&records, None);
    assert_eq!(s.cached_tokens, 250);
    // Unreported cached tokens are left out of the ratio's denominator.
    assert_eq!(s.cached_ratio, Some(250.0 / 1000.0));
    assert_eq!(s.prompt_tokens, 2000);
    assert_eq!(s.by_turn.len(), 2);
    assert_eq!(s.by_turn[0].cached_ratio, Some(50.0 / 200.0));
    assert_eq!(s.by_turn[0].mean_prompt_tokens, Some(1200.0 / 3.0));
    assert_eq!(s.by_turn[1].cached_ratio, Some(200.0 / 800.0));
}

#[test]
fn load_errors_and_throughput() {
    let mut refused = rec("x", 0, "gw", 0, 0);
    refused.ok = false;
    refused.status = Some(400);
    refused.routed_worker = None;
    refused.error_code = Some("missing_routing_key".into());
    let mut dropped = rec("y", 0, "gw", 0, 0);
    dropped.ok = false;
    dropped.status = None;
    dropped.routed_worker = None;
    dropped.error_code = Some("transport".into());
    let records = vec![
        rec("a", 0, "w1", 10, 0), // 0..50 ms
        rec("a", 1, "w1", 10, 0), // 100..150
        rec("a", 2, "w1", 10, 0), // 200..250
        rec("b", 0, "w2", 10, 0),
        refused,
        dropped,
    ];
    let s = Summary::from_records(&records, None);
    assert_eq!((s.requests, s.ok, s.failed), (6, 4, 2));
    assert_eq!(s.workers.get("w1"), Some(&3));
    assert_eq!(s.workers.get("w2"), Some(&1));
    assert_eq!(s.load_max_over_mean, Some(1.5));
    // Told the fleet has 4 workers, two of them idle: mean 1, max 3.
    let fleet = Summary::from_records(&records, Some(4));
    assert_eq!((fleet.fleet_size, fleet.load_max_over_mean), (4, Some(3.0)));
    // A smaller expected fleet than seen is ignored.
    assert_eq!(Summary::from_records(&records, Some(1)).fleet_size, 2);
    assert_eq!(s.errors.get("400 missing_routing_key"), Some(&1));
    assert_eq!(s.errors.get("transport"), Some(&1));
    assert!((s.duration_s - 0.25).abs() < 1e-9);
    assert!((s.request_throughput - 16.0).abs() < 1e-9);
    assert!((s.output_token_throughput - 160.0).abs() < 1e-9);
    assert_eq!(s.ttft_ms.unwrap().count, 4);
    assert_eq!(s.sessions, 4);
}
