//! SPEC.md section 1-2 sentences not covered by `sticky.rs`: which endpoints read a body `rid`,
//! the Responses API's header-only keys, header names configured in any case, per-model pins
//! under the override, per-replica pins, and the body path of every request.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;
use http::Method;
use serde_json::{Value, json};

/// A body for `path` carrying `rid` (or none).
fn body_for(path: &str, rid: Option<Value>) -> Value {
    let mut b = match path {
        "/v1/chat/completions" => chat_body(None),
        "/v1/completions" => json!({"model": "sim-model", "prompt": "hello", "max_tokens": 2}),
        "/v1/messages" => json!({"model": "sim-model", "max_tokens": 2,
                                  "messages": [{"role": "user", "content": "hello"}]}),
        "/generate" => json!({"text": "hello", "sampling_params": {"max_new_tokens": 2}}),
        "/v1/embeddings" => json!({"model": "sim-model", "input": "hello"}),
        "/v1/classify" => json!({"model": "sim-model", "input": "hello"}),
        "/v1/rerank" => json!({"model": "sim-model", "query": "q", "documents": ["a", "b"]}),
        "/v1/responses" => json!({"model": "sim-model", "input": "hello", "max_output_tokens": 2}),
        other => panic!("no body for {other}"),
    };
    if let Some(r) = rid {
        b["rid"] = r;
    }
    b
}

async fn post(client: &TestClient, path: &str, headers: &[(&str, &[u8])], body: Value) -> Resp {
    let mut h = vec![("content-type", &b"application/json"[..])];
    h.extend_from_slice(headers);
    client.send(Method::POST, path, &h, body.to_string()).await
}

const RID_ENDPOINTS: [&str; 7] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/messages",
    "/generate",
    "/v1/embeddings",
    "/v1/classify",
    "/v1/rerank",
];

/// SPEC 1: "`rid` is read from the body of chat completions, completions, messages,
/// `/generate`, embeddings, classify and rerank (for rerank, the first id of a list). The
/// Responses API has no rid: header only."
///
/// `manual` with the override refuses a keyless request, so a 200 without any routing-key header
/// proves the rid was read; landing on the conversation's worker proves it was stripped.
#[tokio::test]
async fn every_rid_endpoint_reads_the_rid_and_responses_reads_only_headers() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let home = g
        .client
        .chat(&[], chat_body(Some("conv_t1")))
        .await
        .worker()
        .unwrap();
    for (turn, path) in RID_ENDPOINTS.iter().enumerate() {
        let rid = format!("conv_t{}", turn + 2);
        let rid_value = if *path == "/v1/rerank" {
            json!([rid.clone(), "other-conversation_t1"])
        } else {
            json!(rid.clone())
        };
        let r = post(&g.client, path, &[], body_for(path, Some(rid_value))).await;
        assert_eq!(r.status, 200, "{path}: {:?}", r.body);
        assert_eq!(r.worker().unwrap(), home, "{path} followed the rid's key");
        let got = w
            .iter()
            .flat_map(|s| s.received())
            .any(|rec| rec.path == *path && rec.rid.as_deref() == Some(rid.as_str()));
        assert!(got, "{path}: forwarded with its full rid");
    }
    // The Responses API: a body rid is not a key ...
    let r = post(
        &g.client,
        "/v1/responses",
        &[],
        body_for("/v1/responses", Some(json!("conv_t9"))),
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    // ... a header is, with the same lineage stripping as a rid.
    let r = post(
        &g.client,
        "/v1/responses",
        &[("x-smg-routing-key", b"conv_t9")],
        body_for("/v1/responses", Some(json!("unrelated_t1"))),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.worker().unwrap(), home);
    g.gw.shutdown().await;
}

/// SPEC 2 "Missing key": under `consistent_hashing` and `manual` a keyless request is refused
/// on every generation endpoint, not only chat completions.
#[tokio::test]
async fn keyless_generation_requests_are_refused_on_every_generation_endpoint() {
    let w = sims(2).await;
    for policy in [PolicyKind::ConsistentHashing, PolicyKind::Manual] {
        let mut c = config(&w);
        c.router.policy = policy;
        let g = start(c).await;
        for path in [
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/messages",
            "/generate",
            "/v1/responses",
        ] {
            let r = post(&g.client, path, &[], body_for(path, None)).await;
            assert_eq!(r.status, 400, "{policy} {path}");
            assert_eq!(
                r.error_code().as_deref(),
                Some("missing_routing_key"),
                "{policy} {path}"
            );
            let r = post(
                &g.client,
                path,
                &[("x-smg-routing-key", b"k")],
                body_for(path, None),
            )
            .await;
            assert_eq!(r.status, 200, "{policy} {path}: {:?}", r.body);
        }
        g.gw.shutdown().await;
    }
}

/// SPEC 1: "Names match case-insensitively": names configured in any case find the header.
#[tokio::test]
async fn configured_header_names_match_in_any_case() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.routing_key_headers = vec!["X-Conversation-ID".into(), "X-SMG-ROUTING-KEY".into()];
    let g = start(c).await;
    let r = g
        .client
        .chat(&[("x-conversation-id", b"case-key")], chat_body(None))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let home = r.worker().unwrap();
    for _ in 0..4 {
        let r = g
            .client
            .chat(&[("X-Conversation-Id", b"case-key")], chat_body(None))
            .await;
        assert_eq!(r.worker().unwrap(), home);
    }
    // The second name, configured upper-case, is read too (`keyed` asserts a 200: `manual`
    // would refuse a request whose key it did not find).
    g.client.keyed("second-name").await;
    g.gw.shutdown().await;
}

/// SPEC 2 "Scoping": "under the override a key has an independent pin per model; the manual
/// map is not scoped by model".
#[tokio::test]
async fn the_override_pins_per_model_and_manual_does_not() {
    let a = sims_with_model(1, "model-a").await;
    let b = sims_with_model(1, "model-b").await;
    let all: Vec<_> = a.into_iter().chain(b).collect();
    for (policy, override_on, pins) in [
        (PolicyKind::RoundRobin, true, 2.0),
        (PolicyKind::Manual, false, 1.0),
    ] {
        let mut c = config(&all);
        c.router.policy = policy;
        c.router.routing_key_override = override_on;
        let g = start(c).await;
        for model in ["model-a", "model-b", "model-a", "model-b"] {
            let r = g
                .client
                .chat(
                    &[("x-smg-routing-key", b"one-key")],
                    json!({"model": model, "messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": 2}),
                )
                .await;
            assert_eq!(r.status, 200, "{policy} {model}: {:?}", r.body);
        }
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(&m, "smg_manual_policy_cache_entries"),
            Some(pins),
            "{policy} override={override_on}: {m}"
        );
        g.gw.shutdown().await;
    }
}

/// SPEC 2: "Pins live in each gateway replica's memory": a key pinned through one replica is
/// unknown to another in front of the same workers.
#[tokio::test]
async fn pins_live_in_each_replica() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let a = start(c.clone()).await;
    let b = start(c).await;
    for k in ["r1", "r2", "r3"] {
        a.client.keyed(k).await;
    }
    assert_eq!(
        sample(&metrics(&a.gw).await, "smg_manual_policy_cache_entries"),
        Some(3.0)
    );
    let m = metrics(&b.gw).await;
    assert_eq!(
        sample(&m, "smg_manual_policy_cache_entries"),
        Some(0.0),
        "{m}"
    );
    b.client.keyed("r1").await;
    let m = metrics(&b.gw).await;
    assert_eq!(
        sample(&m, r#"smg_manual_policy_branch_total{branch="vacant"}"#),
        Some(1.0),
        "replica b placed r1 as a new key: {m}"
    );
    a.gw.shutdown().await;
    b.gw.shutdown().await;
}

/// SPEC 2 "Body streaming": "with the override on, every request body is buffered so the rid can
/// be read" (a valid tokens hint included); without it, "a routing-key header does not lift
/// that need" under `cache_aware`.
#[tokio::test]
async fn body_path_under_the_override_and_with_a_routing_key_header() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.routing_key_override = true; // cache_aware underneath
    let g = start(c).await;
    for headers in [
        &[][..],
        &[("x-smg-routing-tokens", &b"1,2,3"[..])][..],
        &[("x-smg-routing-key", &b"k"[..])][..],
    ] {
        assert_eq!(g.client.chat(headers, chat_body(None)).await.status, 200);
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="buffered",reason="routing_key_override"}"#
        ),
        Some(3.0),
        "{m}"
    );
    assert!(!m.contains(r#"path="streamed""#), "{m}");
    g.gw.shutdown().await;

    let g = start(config(&w)).await; // cache_aware, override off
    let r = g
        .client
        .chat(&[("x-smg-routing-key", b"k")], chat_body(None))
        .await;
    assert_eq!(r.status, 200);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="buffered",reason="cache_aware_text"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert!(!m.contains(r#"path="streamed""#), "{m}");
    g.gw.shutdown().await;
}

/// SPEC 1: "If nothing would be left, the whole rid is the key. If the resulting key is over
/// 128 bytes, the rid is ignored and the headers are tried."
#[tokio::test]
async fn an_overlong_rid_falls_back_to_the_header_and_an_all_suffix_rid_is_its_own_key() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let long = format!("{}_t1", "a".repeat(129));
    // No header: the rid is ignored, so `manual` finds no key.
    let r = g.client.chat(&[], chat_body(Some(&long))).await;
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    // With a header: the header's key decides, and it is the same pin as the header alone.
    let home = g.client.keyed("fallback").await;
    for _ in 0..3 {
        let r = g
            .client
            .chat(
                &[("x-smg-routing-key", b"fallback")],
                chat_body(Some(&long)),
            )
            .await;
        assert_eq!(r.worker().unwrap(), home);
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "smg_manual_policy_cache_entries"),
        Some(1.0),
        "{m}"
    );
    // `_t2` strips to nothing: the whole rid is the key, so the request is keyed and served,
    // and it shares the pin of a header carrying the same value.
    let r = g.client.chat(&[], chat_body(Some("_t2"))).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let pinned = r.worker().unwrap();
    for _ in 0..3 {
        assert_eq!(g.client.keyed("_t2").await, pinned);
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "smg_manual_policy_cache_entries"),
        Some(2.0),
        "{m}"
    );
    g.gw.shutdown().await;
}

/// SPEC 2 "Body streaming", observed without metrics: a body the gateway cannot parse is a
/// gateway `json_parse_error` when it is read, and reaches the worker untouched when it streams.
/// A valid `x-smg-routing-tokens` hint under `cache_aware` streams it; a routing-key header does
/// not; the override reads it even with the hint.
#[tokio::test]
async fn a_hinted_body_streams_unread_and_a_key_header_does_not_lift_the_read() {
    let w = sims(2).await;
    let not_json = "{this is not json";
    let send = |client: TestClient, header: (&'static str, &'static [u8])| async move {
        client
            .send(
                Method::POST,
                "/v1/chat/completions",
                &[("content-type", b"application/json"), header],
                not_json,
            )
            .await
    };
    let g = start(config(&w)).await; // cache_aware, override off
    let r = send(g.client.clone(), ("x-smg-routing-tokens", b"1,2,3")).await;
    assert_eq!(r.error_code(), None, "the gateway did not read it");
    assert!(r.worker().is_some(), "the worker answered: {:?}", r.body);
    let r = send(g.client.clone(), ("x-smg-routing-key", b"k")).await;
    assert_eq!(r.error_code().as_deref(), Some("json_parse_error"));
    assert_eq!(r.worker(), None);
    g.gw.shutdown().await;

    let mut c = config(&w);
    c.router.routing_key_override = true;
    let g = start(c).await;
    let r = send(g.client.clone(), ("x-smg-routing-tokens", b"1,2,3")).await;
    assert_eq!(r.error_code().as_deref(), Some("json_parse_error"));
    g.gw.shutdown().await;
}
