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

#[test]
fn uncached_tokens_per_worker_is_the_prefill_work_and_counts_idle_workers() {
    let mut failed = rec("c", 0, "w2", 900, 0);
    failed.ok = false;
    let mut unreported = rec("c", 1, "w2", 700, 0);
    unreported.cached_tokens = None;
    let mut warm = rec("d", 0, "w2", 5000, 0);
    warm.warmup = true;
    let records = vec![
        rec("a", 0, "w1", 1000, 0),   // 1000 uncached
        rec("a", 1, "w1", 1200, 992), // 208
        rec("b", 0, "w2", 1000, 0),   // 1000
        rec("b", 1, "w2", 1300, 0),   // 1300: the turn landed cold
        rec("e", 0, "w3", 100, 96),   // 4
        failed,
        unreported,
        warm,
    ];
    let s = Summary::from_records(&records, None);
    let per: Vec<(&str, u64)> = s
        .uncached_tokens_per_worker
        .iter()
        .map(|(w, n)| (w.as_str(), *n))
        .collect();
    assert_eq!(per, [("w1", 1208), ("w2", 2300), ("w3", 4)]);
    // Total 3512 over 3 workers: mean 1170.67, max 2300.
    let expected = 2300.0 / (3512.0 / 3.0);
    assert!((s.uncached_max_over_mean.unwrap() - expected).abs() < 1e-9);
    // Requests: w1 2, w2 4 (failed and unreported ones count as load), w3 1.
    assert!((s.load_max_over_mean.unwrap() - 4.0 / (7.0 / 3.0)).abs() < 1e-9);
    // A fleet of 5, two idle: the mean is over 5.
    let fleet = Summary::from_records(&records, Some(5));
    assert!((fleet.uncached_max_over_mean.unwrap() - 2300.0 / (3512.0 / 5.0)).abs() < 1e-9);
    assert!((fleet.load_max_over_mean.unwrap() - 4.0 / (7.0 / 5.0)).abs() < 1e-9);
    // Everything cached: no prefill to compare.
    let all_cached = vec![rec("a", 1, "w1", 100, 100)];
    assert_eq!(
        Summary::from_records(&all_cached, Some(2)).uncached_max_over_mean,
        None
    );
}
