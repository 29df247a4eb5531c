//! `--routing-seed`: gateways given one seed make the same random choices on one scripted
//! sequence; another seed (or none: clock-seeded) makes others.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::GatewayConfig;
use berth_gateway::cli::Args;
use berth_gateway::routing::PolicyKind;
use clap::{Args as _, FromArgMatches as _};
use common::*;

/// The workers (by index into `urls`) a fresh gateway with this policy and seed sends a scripted
/// sequence of keyless requests to, one after another.
async fn choices(
    urls: &[String],
    w: &[berth_sim::SimHandle],
    policy: PolicyKind,
    seed: Option<u64>,
) -> Vec<usize> {
    let mut c = config(w);
    c.router.policy = policy;
    c.routing_seed = seed;
    let g = start(c).await;
    let mut out = Vec::new();
    for i in 0..32 {
        let mut body = chat_body(None);
        body["messages"][0]["content"] = format!("request {i}").into();
        let r = g.client.chat(&[], body).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let worker = r.worker().unwrap();
        out.push(urls.iter().position(|u| *u == worker).unwrap());
    }
    g.gw.shutdown().await;
    out
}

#[tokio::test]
async fn two_gateways_with_one_seed_make_the_same_choices() {
    let w = sims(4).await;
    let urls: Vec<String> = w.iter().map(|s| s.url()).collect();
    for policy in [PolicyKind::Random, PolicyKind::PowerOfTwo] {
        let a = choices(&urls, &w, policy, Some(7)).await;
        let b = choices(&urls, &w, policy, Some(7)).await;
        assert_eq!(a, b, "{policy:?}: one seed, one sequence");
        let spread = (0..4).filter(|i| a.contains(i)).count();
        assert!(
            spread >= 3,
            "{policy:?}: still random over the fleet: {a:?}"
        );
        let other = choices(&urls, &w, policy, Some(8)).await;
        assert_ne!(a, other, "{policy:?}: another seed, another sequence");
        let clock = choices(&urls, &w, policy, None).await;
        assert_ne!(a, clock, "{policy:?}: unseeded draws from the clock");
    }
}

#[test]
fn the_flag_sets_the_seed_and_the_default_is_the_clock() {
    let parse = |argv: &[&str]| {
        let m = Args::augment_args(clap::Command::new("serve"))
            .try_get_matches_from(std::iter::once("serve").chain(argv.iter().copied()))
            .unwrap();
        GatewayConfig::from_args(&Args::from_arg_matches(&m).unwrap().resolve().unwrap()).unwrap()
    };
    let w = ["--worker-urls", "http://127.0.0.1:1"];
    assert_eq!(parse(&w).routing_seed, None);
    let seeded = parse(&[w[0], w[1], "--routing-seed", "42"]);
    assert_eq!(seeded.routing_seed, Some(42));
}
