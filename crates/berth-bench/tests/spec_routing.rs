//! SPEC.md section 4 sentences `wire.rs` and `gateway.rs` leave open: the key is kept across
//! retries in the header modes too, exactly one mode per run, the client library strips rids
//! exactly as the gateway does, and (the introduction) what routing is worth shows up as cache
//! hits on the simulated workers.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use berth_bench::cli::Args;
use berth_bench::{BenchConfig, RunOutput, execute};
use berth_gateway::{Gateway, GatewayConfig, GatewayHandle};
use berth_sim::{SimHandle, SimWorker};

async fn sim() -> SimHandle {
    SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(4096)
        .spawn_on_loopback()
        .await
}

async fn run(flags: &[&str]) -> RunOutput {
    let config = BenchConfig::try_from_args(&Args::from_flags(flags).unwrap()).unwrap();
    execute(config, std::future::pending()).await.unwrap()
}

/// SPEC 4: "A routing key per sample/session, minted once (a uuid), kept across retries of that
/// sample": in every header mode, each retry of a turn carries the session's header unchanged.
#[tokio::test]
async fn header_modes_keep_the_key_across_retries() {
    for (mode, header) in [
        ("smg_routing_key", "x-smg-routing-key"),
        ("session_id_header", "x-session-id"),
        ("dynamo_headers", "x-dynamo-session-id"),
    ] {
        let sim = sim().await;
        sim.set_error_rate(1.0, 503);
        let url = sim.url();
        let out = run(&[
            "--url",
            &url,
            "--num-sessions",
            "2",
            "--concurrency",
            "1",
            "--session-turns-mean",
            "2",
            "--max-retries",
            "2",
            "--session-routing",
            mode,
            "--quiet",
        ])
        .await;
        let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
        for r in sim.received() {
            let key = r.header(header).unwrap().to_owned();
            assert!(
                uuid::Uuid::parse_str(&key).is_ok(),
                "{mode}: {key} is a uuid"
            );
            *per_key.entry(key).or_default() += 1;
        }
        // Two sessions, each: first attempt + 2 retries of turn 0, then it stops.
        assert_eq!(per_key.len(), 2, "{mode}: {per_key:?}");
        assert!(per_key.values().all(|n| *n == 3), "{mode}: {per_key:?}");
        let sessions: Vec<&str> = out.records.iter().map(|r| r.session_id.as_str()).collect();
        assert!(per_key.keys().all(|k| sessions.contains(&k.as_str())));
    }
}

/// SPEC 4: "Session-routing modes of the benchmark, exactly one per run".
#[test]
fn exactly_one_session_routing_mode_per_run() {
    let two = Args::from_flags([
        "--session-routing",
        "smg_routing_key",
        "--session-routing",
        "dynamo_headers",
    ]);
    assert!(two.is_err(), "two modes in one run were accepted");
    let one = Args::from_flags(["--session-routing", "dynamo_headers"]).unwrap();
    let c = BenchConfig::try_from_args(&one).unwrap();
    assert_eq!(c.routing.name(), "dynamo_headers");
}

/// SPEC 1's lineage rule, as the client library states it (`berth_client::strip_lineage`, what
/// `RequestId` relies on) and as the gateway applies it (`berth_routing::key::strip_lineage`):
/// the two agree on every string of up to 6 characters over the alphabet that matters.
#[test]
fn client_and_gateway_strip_lineage_identically() {
    const ALPHABET: [char; 7] = ['a', '_', 't', 'r', '1', '0', 'T'];
    let mut checked = 0usize;
    let mut frontier = vec![String::new()];
    for _ in 0..=6 {
        let mut next = Vec::with_capacity(frontier.len() * ALPHABET.len());
        for s in &frontier {
            assert_eq!(
                berth_client::strip_lineage(s),
                berth_gateway::routing::key::strip_lineage(s),
                "rid {s:?}"
            );
            checked += 1;
            for c in ALPHABET {
                next.push(format!("{s}{c}"));
            }
        }
        frontier = next;
    }
    assert!(checked > 100_000, "{checked}");
}

async fn fleet(routing_key_override: bool) -> (Vec<SimHandle>, GatewayHandle) {
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
        policy: Some("round_robin".to_owned()),
        routing_key_override,
        ..Default::default()
    };
    let mut config = GatewayConfig::from_args(&args).unwrap();
    config.prometheus_addr = None;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let gw = Gateway::builder(config)
        .listener(listener)
        .start()
        .await
        .unwrap();
    (sims, gw)
}

/// The introduction: the simulated worker's KV prefix cache makes "what routing is worth show up
/// as cache hits". The same seeded workload through round robin, with and without the override
/// pinning each session's rid: pinned sessions get a larger share of cached prompt tokens.
#[tokio::test]
async fn pinning_sessions_shows_up_as_cache_hits() {
    let mut ratios = Vec::new();
    for routing_key_override in [true, false] {
        let (sims, gw) = fleet(routing_key_override).await;
        let url = format!("http://{}", gw.addr());
        let out = run(&[
            "--url",
            &url,
            "--num-sessions",
            "6",
            "--concurrency",
            "1",
            "--session-turns-mean",
            "4",
            "--synthetic-input-tokens-mean",
            "64",
            "--output-tokens-mean",
            "8",
            "--session-routing",
            "rid",
            "--random-seed",
            "5",
            "--quiet",
        ])
        .await;
        assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
        let served: u64 = sims.iter().map(SimHandle::cached_tokens).sum();
        assert_eq!(
            served, out.summary.cached_tokens,
            "the bench reads the sims' counts"
        );
        ratios.push(out.summary.cached_ratio.unwrap());
        gw.shutdown().await;
    }
    let (pinned, scattered) = (ratios[0], ratios[1]);
    assert!(
        pinned > scattered + 0.2,
        "pinned {pinned:.3} vs scattered {scattered:.3}"
    );
}
