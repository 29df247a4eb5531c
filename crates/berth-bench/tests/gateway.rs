//! Through a real gateway: refusals are attributed to the gateway, keys keep sessions pinned.
#![allow(clippy::unwrap_used)]

use berth_bench::cli::Args;
use berth_bench::{BenchConfig, RunOutput, execute};
use berth_gateway::{Gateway, GatewayConfig, GatewayHandle};
use berth_sim::{SimHandle, SimWorker};

async fn fleet(policy: &str, routing_key_override: bool) -> (Vec<SimHandle>, GatewayHandle) {
    fleet_with(policy, routing_key_override, false).await
}

async fn fleet_with(
    policy: &str,
    routing_key_override: bool,
    allow_requests_without_routing_key: bool,
) -> (Vec<SimHandle>, GatewayHandle) {
    let mut sims = Vec::new();
    for _ in 0..3 {
        sims.push(
            SimWorker::builder()
                .time_scale(0.0)
                .record_capacity(0)
                .spawn_on_loopback()
                .await,
        );
    }
    let args = berth_gateway::cli::Args {
        worker_urls: sims.iter().map(SimHandle::url).collect(),
        policy: Some(policy.to_owned()),
        routing_key_override,
        allow_requests_without_routing_key,
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let mut config = GatewayConfig::from_args(&args).unwrap();
    config.prometheus_addr = None; // no fixed port: tests run in parallel
    let gw = Gateway::builder(config)
        .listener(listener)
        .start()
        .await
        .unwrap();
    (sims, gw)
}

async fn bench(gw: &GatewayHandle, routing: &str) -> RunOutput {
    bench_with(gw, routing, "3").await
}

async fn bench_with(gw: &GatewayHandle, routing: &str, concurrency: &str) -> RunOutput {
    bench_on(gw, routing, concurrency, "chat").await
}

async fn bench_on(
    gw: &GatewayHandle,
    routing: &str,
    concurrency: &str,
    endpoint: &str,
) -> RunOutput {
    let url = format!("http://{}", gw.addr());
    let flags = [
        "--endpoint-type",
        endpoint,
        "--url",
        &url,
        "--num-sessions",
        "6",
        "--concurrency",
        concurrency,
        "--session-turns-mean",
        "4",
        "--quiet",
        "--streaming",
        "--session-routing",
        routing,
        "--expected-workers",
        "3",
        "--random-seed",
        "11",
    ];
    execute(
        BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap(),
        std::future::pending(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn keyless_requests_under_manual_are_gateway_refusals() {
    let (_sims, gw) = fleet("manual", false).await;
    let out = bench(&gw, "none").await;
    // Each session stops at its refused first turn.
    assert_eq!(out.summary.requests, 6);
    assert_eq!(out.summary.ok, 0);
    assert_eq!(
        out.summary.errors.get("400 missing_routing_key"),
        Some(&6),
        "{:?}",
        out.summary.errors
    );
    assert!(
        out.records
            .iter()
            .all(|r| r.routed_worker.is_none() && r.sim_worker.is_none())
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn routing_keys_pin_sessions_under_manual_and_consistent_hashing() {
    for policy in ["manual", "consistent_hashing"] {
        let (_sims, gw) = fleet(policy, false).await;
        let out = bench(&gw, "smg_routing_key").await;
        assert_eq!((out.summary.ok, out.summary.failed), (24, 0), "{policy}");
        assert_eq!(out.summary.stickiness.ratio, Some(1.0), "{policy}");
        assert_eq!(out.summary.stickiness.eligible, 18, "{policy}");
        assert!(
            out.records.iter().all(|r| r.routed_worker.is_some()),
            "{policy}"
        );
        gw.shutdown().await;
    }
}

#[tokio::test]
async fn rid_lineage_pins_sessions_under_the_override() {
    let (_sims, gw) = fleet("round_robin", true).await;
    let out = bench(&gw, "rid").await;
    assert_eq!(out.summary.failed, 0);
    assert_eq!(out.summary.stickiness.ratio, Some(1.0));
    gw.shutdown().await;
    // One session at a time: with 3 sessions in lockstep over 3 workers, round robin could
    // hand every session the same worker on each turn by coincidence.
    let (_sims, gw) = fleet("round_robin", false).await;
    let out = bench_with(&gw, "rid", "1").await;
    assert_eq!(
        out.summary.stickiness.ratio,
        Some(0.0),
        "without the override round robin moves every turn to the next worker"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn responses_chains_stay_on_one_worker_through_previous_response_id() {
    // Turn 1 of each session is keyless (placed at random, its answer's id pinned by the
    // gateway); every later turn names the previous answer's id and follows it.
    let (_sims, gw) = fleet_with("manual", false, true).await;
    let out = bench_on(&gw, "previous_response_id", "3", "responses").await;
    assert_eq!((out.summary.ok, out.summary.failed), (24, 0));
    assert_eq!(out.summary.stickiness.eligible, 18);
    assert_eq!(out.summary.stickiness.ratio, Some(1.0));
    gw.shutdown().await;
    // The same run naming nothing: each turn is placed at random again.
    let (_sims, gw) = fleet_with("manual", false, true).await;
    let out = bench_on(&gw, "none", "3", "responses").await;
    assert_eq!(out.summary.ok, 24);
    assert!(
        out.summary.stickiness.ratio < Some(1.0),
        "{:?}",
        out.summary.stickiness
    );
    gw.shutdown().await;
}
