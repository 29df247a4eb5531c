//! Data-parallel workers registered as `<url>@<rank>` (SMG's dp-aware mode): each rank is its own
//! routing target, requests go to the base URL with `data_parallel_rank` in the body, and the
//! response names the rank worker (SPEC.md section 3).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use berth_gateway::{Gateway, GatewayConfig, GatewayError};
use berth_sim::SimHandle;
use common::*;
use http::Method;
use serde_json::Value;

/// A config registering these URLs (fast health checks, like `common::config`).
fn config_for(urls: Vec<String>, workers: &[SimHandle]) -> GatewayConfig {
    let mut c = config(workers);
    c.worker_urls = urls;
    c
}

/// The rank a routed-worker header names (`...@<rank>`).
fn rank_of(worker: &str) -> u64 {
    worker.rsplit_once('@').unwrap().1.parse().unwrap()
}

/// The bodies the sim received, parsed, in arrival order.
fn received_json(sim: &SimHandle) -> Vec<Value> {
    sim.received().iter().map(|r| r.json().unwrap()).collect()
}

#[tokio::test]
async fn two_ranks_of_one_worker_are_two_targets_and_each_request_carries_its_rank() {
    let w = sims(1).await;
    let base = w[0].url();
    let (r0, r1) = (format!("{base}@0"), format!("{base}@1"));
    let mut c = config_for(vec![r0.clone(), r1.clone()], &w);
    c.router.policy = PolicyKind::RoundRobin;
    let g = start(c).await;

    let list = g.client.get("/workers", &[]).await.json();
    let listed: Vec<&Value> = list["workers"].as_array().unwrap().iter().collect();
    assert_eq!(listed.len(), 2);
    for (entry, url) in listed.iter().zip([&r0, &r1]) {
        assert_eq!(entry["url"], url.as_str());
        assert_eq!(entry["is_healthy"], true, "probed on the base URL: {entry}");
        assert_eq!(entry["models"], serde_json::json!([{"id": "sim-model"}]));
    }
    assert_ne!(listed[0]["id"], listed[1]["id"]);

    let mut routed = Vec::new();
    for _ in 0..6 {
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        routed.push(r.worker().unwrap());
    }
    for pair in routed.windows(2) {
        assert_ne!(pair[0], pair[1], "round robin alternates ranks: {routed:?}");
    }
    assert!(routed.iter().all(|u| *u == r0 || *u == r1), "{routed:?}");

    let got = received_json(&w[0]);
    assert_eq!(
        got.len(),
        routed.len(),
        "every request reached the base URL"
    );
    for (body, worker) in got.iter().zip(&routed) {
        assert_eq!(
            body["data_parallel_rank"],
            rank_of(worker),
            "{body} via {worker}"
        );
        let mut rest = body.clone();
        rest.as_object_mut().unwrap().remove("data_parallel_rank");
        assert_eq!(rest, chat_body(None), "the rest of the body is unchanged");
    }
    let text = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &text,
            r#"smg_router_request_body_path_total{path="buffered",reason="data_parallel_rank"}"#
        ),
        Some(6.0),
        "{text}"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn manual_pins_keys_to_ranks_and_the_body_rank_follows_the_pin() {
    let w = sims(1).await;
    let base = w[0].url();
    let ranks: Vec<String> = (0..2).map(|r| format!("{base}@{r}")).collect();
    let mut c = config_for(ranks.clone(), &w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;

    let mut first = Vec::new();
    for i in 0..16 {
        first.push(g.client.keyed(&format!("key-{i}")).await);
    }
    for rank in &ranks {
        assert!(first.contains(rank), "{rank} got no key: {first:?}");
    }
    for (i, worker) in first.iter().enumerate() {
        assert_eq!(
            &g.client.keyed(&format!("key-{i}")).await,
            worker,
            "key-{i} stays on its rank"
        );
    }
    let got = received_json(&w[0]);
    assert_eq!(got.len(), 32);
    let expected = first.iter().chain(first.iter());
    for (body, worker) in got.iter().zip(expected) {
        assert_eq!(body["data_parallel_rank"], rank_of(worker));
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_rank_in_the_body_is_replaced_and_a_body_that_is_not_json_goes_unchanged() {
    let w = sims(1).await;
    let rank = format!("{}@3", w[0].url());
    let g = start(config_for(vec![rank.clone()], &w)).await;

    let mut body = chat_body(None);
    body["data_parallel_rank"] = Value::from(7);
    let r = g.client.chat(&[], body).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.worker().as_deref(), Some(rank.as_str()));
    assert_eq!(received_json(&w[0])[0]["data_parallel_rank"], 3);

    // cache_aware reads the body for its text, so a body that is not JSON is refused there;
    // under round_robin it is held only for the rank and forwarded as it came.
    let mut c = config_for(vec![rank.clone()], &w);
    c.router.policy = PolicyKind::RoundRobin;
    let g2 = start(c).await;
    w[0].clear_received();
    let raw = "this is not json";
    let r = g2
        .client
        .send(
            Method::POST,
            "/v1/completions",
            &[("content-type", b"text/plain")],
            raw,
        )
        .await;
    assert_eq!(r.worker().as_deref(), Some(rank.as_str()), "{:?}", r.status);
    let got = w[0].received();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].body[..], raw.as_bytes());
    g.gw.shutdown().await;
    g2.gw.shutdown().await;
}

#[tokio::test]
async fn a_worker_without_a_rank_still_gets_the_body_byte_exact() {
    let w = sims(2).await;
    let ranked = format!("{}@1", w[0].url());
    let plain = w[1].url();
    let mut c = config_for(vec![ranked.clone(), plain.clone()], &w);
    c.router.policy = PolicyKind::RoundRobin;
    let g = start(c).await;

    // Odd spacing, key order and escapes: any re-serialization would show.
    let raw = "{ \"max_tokens\":2,  \"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9llo\"}],\n \"model\":\"sim-model\" }";
    let mut served = Vec::new();
    for _ in 0..4 {
        let r = g
            .client
            .send(
                Method::POST,
                "/v1/chat/completions",
                &[("content-type", b"application/json")],
                raw,
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        served.push(r.worker().unwrap());
    }
    assert!(
        served.contains(&ranked) && served.contains(&plain),
        "{served:?}"
    );

    let plain_got = w[1].received();
    assert_eq!(plain_got.len(), 2);
    for rec in &plain_got {
        assert_eq!(
            &rec.body[..],
            raw.as_bytes(),
            "byte-exact to the plain worker"
        );
        assert!(rec.json().unwrap().get("data_parallel_rank").is_none());
    }
    let ranked_got = w[0].received();
    assert_eq!(ranked_got.len(), 2);
    for rec in &ranked_got {
        let v = rec.json().unwrap();
        assert_eq!(v["data_parallel_rank"], 1);
        assert_eq!(v["messages"][0]["content"], "h\u{e9}llo");
        assert_eq!(
            rec.header("content-length"),
            Some(rec.body.len().to_string().as_str())
        );
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn invalid_rank_urls_refuse_start_up_and_the_admin_api() {
    let w = sims(1).await;
    let base = w[0].url();
    for suffix in ["@", "@x", "@-1"] {
        let bad = format!("{base}{suffix}");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = Gateway::builder(config_for(vec![bad.clone()], &w))
            .listener(listener)
            .start()
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Config(_)), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("--worker-urls") && msg.contains(&bad), "{msg}");
    }

    let g = start(config_for(vec![format!("{base}@0")], &w)).await;
    for suffix in ["@", "@x", "@-1"] {
        let bad = format!("{base}{suffix}");
        let body = serde_json::json!({ "url": bad }).to_string();
        let r = g.client.send(Method::POST, "/workers", &[], body).await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.error_code().as_deref(), Some("bad_request"));
        let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains(&bad), "{msg}");
    }

    // A valid rank of the same base is added, serves, and is removed by its percent-encoded URL.
    let r1 = format!("{base}@1");
    let body = serde_json::json!({ "url": r1 }).to_string();
    let added = g.client.send(Method::POST, "/workers", &[], body).await;
    assert_eq!(added.status, 201, "{:?}", added.body);
    assert_eq!(added.json()["url"], r1.as_str());
    assert_eq!(added.json()["is_healthy"], true);
    let encoded = r1
        .replace(':', "%3A")
        .replace('/', "%2F")
        .replace('@', "%40");
    let removed = g
        .client
        .send(Method::DELETE, &format!("/workers/{encoded}"), &[], "")
        .await;
    assert_eq!(removed.status, 200, "{:?}", removed.body);
    assert_eq!(removed.json()["url"], r1.as_str());
    g.gw.shutdown().await;
}
