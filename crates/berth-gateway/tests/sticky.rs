//! SPEC.md section 1-2 through HTTP: key derivation, pinning, the missing-key contract.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;

#[tokio::test]
async fn a_header_key_sticks_to_one_worker_and_the_header_names_it() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    for key in ["alpha", "beta", "gamma", "delta"] {
        let first = g.client.keyed(key).await;
        assert!(
            w.iter().any(|s| s.url() == first),
            "routed-worker header is a registered URL"
        );
        for _ in 0..5 {
            assert_eq!(g.client.keyed(key).await, first);
        }
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn rid_lineage_pins_every_turn_and_retry_and_forwards_the_full_rid() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let mut seen = Vec::new();
    for rid in ["conv_t1", "conv_t2", "conv_t2_r1", "conv_r3", "conv"] {
        let r = g.client.chat(&[], chat_body(Some(rid))).await;
        assert_eq!(r.status, 200);
        seen.push(r.worker().unwrap());
    }
    assert!(seen.iter().all(|s| *s == seen[0]), "{seen:?}");
    // `conv_r1_t2` strips to `conv_r1`: a different key (round robin moves it on).
    let rids: Vec<String> = w
        .iter()
        .flat_map(|s| s.received())
        .filter_map(|r| r.rid)
        .collect();
    for rid in ["conv_t1", "conv_t2", "conv_t2_r1", "conv_r3"] {
        assert!(
            rids.iter().any(|r| r == rid),
            "full rid {rid} forwarded: {rids:?}"
        );
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn header_order_and_invalid_values_are_skipped() {
    let w = sims(4).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.routing_key_headers = vec!["x-first".into(), "x-second".into()];
    let g = start(c).await;
    let body = chat_body(None);
    // Pin "k2" via the second header alone.
    let base = g
        .client
        .chat(&[("x-second", b"k2")], body.clone())
        .await
        .worker()
        .unwrap();
    let long = vec![b'a'; 129];
    let invalid_first: [&[u8]; 3] = [b"", &long, b"\xff\xfe"];
    for bad in invalid_first {
        for _ in 0..3 {
            let r = g
                .client
                .chat(&[("x-first", bad), ("x-second", b"k2")], body.clone())
                .await;
            assert_eq!(r.status, 200);
            assert_eq!(r.worker().unwrap(), base, "invalid x-first value skipped");
        }
    }
    // A valid first header wins over the second.
    let k1 = g
        .client
        .chat(&[("x-first", b"k1")], body.clone())
        .await
        .worker()
        .unwrap();
    for _ in 0..3 {
        let r = g
            .client
            .chat(&[("x-first", b"k1"), ("x-second", b"k2")], body.clone())
            .await;
        assert_eq!(r.worker().unwrap(), k1);
    }
    // Routing-key headers are forwarded to the worker (end-to-end).
    let got = w
        .iter()
        .flat_map(|s| s.received())
        .any(|r| r.header("x-second") == Some("k2"));
    assert!(got);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_body_rid_beats_a_header_key_on_manual_with_the_override() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let pinned = g
        .client
        .chat(&[], chat_body(Some("session_t1")))
        .await
        .worker()
        .unwrap();
    // A proxy stamping a unique header on each request cannot split the conversation.
    for i in 0..8 {
        let h = format!("unique-{i}");
        let r = g
            .client
            .chat(
                &[("x-smg-routing-key", h.as_bytes())],
                chat_body(Some("session_t2")),
            )
            .await;
        assert_eq!(r.worker().unwrap(), pinned);
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn keyless_requests_get_missing_routing_key_under_keyed_policies() {
    let w = sims(2).await;
    for policy in [PolicyKind::Manual, PolicyKind::ConsistentHashing] {
        let mut c = config(&w);
        c.router.policy = policy;
        let g = start(c).await;
        // Authorization, X-Forwarded-For and Cookie never make a key.
        let r = g
            .client
            .chat(
                &[
                    ("authorization", b"Bearer x"),
                    ("x-forwarded-for", b"1.2.3.4"),
                    ("cookie", b"a=b"),
                ],
                chat_body(None),
            )
            .await;
        assert_eq!(r.status, 400);
        assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
        let e = r.json();
        assert_eq!(e["error"]["code"], "missing_routing_key");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("X-SMG-Routing-Key")
                && msg.contains("--allow-requests-without-routing-key")
        );
        // The next request is served.
        assert_eq!(
            g.client
                .chat(&[("x-smg-routing-key", b"k")], chat_body(None))
                .await
                .status,
            200
        );
        g.gw.shutdown().await;

        let mut c = config(&w);
        c.router.policy = policy;
        c.router.allow_requests_without_routing_key = true;
        let g = start(c).await;
        assert_eq!(
            g.client.chat(&[], chat_body(None)).await.status,
            200,
            "escape flag"
        );
        g.gw.shutdown().await;
    }
}

#[tokio::test]
async fn consistent_hashing_places_keys_the_same_on_two_replicas() {
    let w = sims(4).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::ConsistentHashing;
    let a = start(c.clone()).await;
    let b = start(c).await;
    for i in 0..16 {
        let key = format!("user-{i}");
        assert_eq!(a.client.keyed(&key).await, b.client.keyed(&key).await);
    }
    a.gw.shutdown().await;
    b.gw.shutdown().await;
}

#[tokio::test]
async fn routing_tokens_hint_is_consumed_and_lets_the_body_stream() {
    let w = sims(2).await;
    let g = start(config(&w)).await; // cache_aware, no override
    let r = g
        .client
        .chat(&[("x-smg-routing-tokens", b"1,2,3")], chat_body(None))
        .await;
    assert_eq!(r.status, 200);
    let r = g
        .client
        .chat(&[("x-smg-routing-tokens", b"1, 2")], chat_body(None))
        .await;
    assert_eq!(r.status, 200, "a malformed hint is ignored, never an error");
    assert!(
        w.iter()
            .flat_map(|s| s.received())
            .all(|r| r.header("x-smg-routing-tokens").is_none())
    );
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="streamed",reason="routing_tokens_hint"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="buffered",reason="cache_aware_text"}"#
        ),
        Some(1.0)
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_responses_api_pins_by_header_only() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let body =
        serde_json::json!({"model": "sim-model", "input": "hi", "rid": "conv_t1"}).to_string();
    let json = ("content-type", &b"application/json"[..]);
    let r = g
        .client
        .send(http::Method::POST, "/v1/responses", &[json], body.clone())
        .await;
    assert_eq!(r.status, 400, "a body rid is not a key on /v1/responses");
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    let r = g
        .client
        .send(
            http::Method::POST,
            "/v1/responses",
            &[json, ("x-smg-routing-key", b"conv")],
            body,
        )
        .await;
    assert_eq!(r.status, 200);
    // The header key `conv` and a chat rid `conv_t2` share one pin.
    let chat = g.client.chat(&[], chat_body(Some("conv_t2"))).await;
    assert_eq!(chat.worker(), r.worker());
    g.gw.shutdown().await;
}
