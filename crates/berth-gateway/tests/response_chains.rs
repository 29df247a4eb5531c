//! Issue #19: Responses chains. A turn's `previous_response_id` keys it as the response it
//! continues (source `previous_response_id`), non-streamed and streamed, keyed and keyless
//! first turns, on one gateway and across two replicas sharing a real Redis.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_gateway::{GatewayConfig, StoreSettings};
use common::redis::RedisServer;
use common::*;
use http::Method;
use serde_json::{Value, json};

/// Sessions per case: a chain that were not followed would land on its first worker by
/// chance with probability (1/4)^SESSIONS per turn.
const SESSIONS: usize = 6;

async fn responses(client: &TestClient, headers: &[(&str, &[u8])], body: Value) -> Resp {
    let mut h = vec![("content-type", &b"application/json"[..])];
    h.extend_from_slice(headers);
    client
        .send(Method::POST, "/v1/responses", &h, body.to_string())
        .await
}

fn body(stream: bool, previous: Option<&str>) -> Value {
    let mut b = json!({"model": "sim-model", "input": "hello", "max_output_tokens": 2});
    if stream {
        b["stream"] = json!(true);
    }
    if let Some(p) = previous {
        b["previous_response_id"] = json!(p);
    }
    b
}

/// The response id: the body's `id`, or (streamed) the first event's `response.id`.
fn response_id(r: &Resp, stream: bool) -> String {
    assert_eq!(r.status, 200, "{:?}", r.body);
    if !stream {
        return r.json()["id"].as_str().unwrap().to_owned();
    }
    let text = std::str::from_utf8(&r.body).unwrap();
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let ev: Value = serde_json::from_str(data).unwrap();
    assert_eq!(ev["type"], "response.created", "{text}");
    ev["response"]["id"].as_str().unwrap().to_owned()
}

fn manual(c: &mut GatewayConfig, keyless_ok: bool) {
    c.router.policy = PolicyKind::Manual;
    c.router.allow_requests_without_routing_key = keyless_ok;
}

/// Three-turn chains: turn 1 through `first` (keyed by a `session_id` header, or keyless),
/// turns 2 and 3 through `next` naming only the previous response. Each chain stays on its
/// first worker.
async fn chains_stay(first: &TestClient, next: &TestClient, stream: bool, keyed: bool) {
    for s in 0..SESSIONS {
        let key = format!("sess-{stream}-{keyed}-{s}");
        let h: Vec<(&str, &[u8])> = if keyed {
            vec![("session_id", key.as_bytes())]
        } else {
            vec![]
        };
        let r = responses(first, &h, body(stream, None)).await;
        let worker = r.worker().unwrap();
        let mut id = response_id(&r, stream);
        for turn in 2..=3 {
            let r = responses(next, &[], body(stream, Some(&id))).await;
            assert_eq!(
                r.worker().unwrap(),
                worker,
                "session {s} turn {turn} (stream {stream}, keyed {keyed})"
            );
            id = response_id(&r, stream);
        }
    }
}

#[tokio::test]
async fn a_chain_follows_its_first_turn_on_one_gateway() {
    let w = sims(4).await;
    let mut c = config(&w);
    manual(&mut c, true);
    let g = start(c).await;
    for stream in [false, true] {
        for keyed in [true, false] {
            chains_stay(&g.client, &g.client, stream, keyed).await;
        }
    }
    let m = metrics(&g.gw).await;
    // turns 2 and 3 of every session, in four cases
    let turns = (SESSIONS * 2 * 4) as f64;
    assert_eq!(
        sample(
            &m,
            r#"smg_routing_key_source_total{source="previous_response_id"}"#
        ),
        Some(turns)
    );
    assert_eq!(
        sample(&m, r#"berth_response_chain_events_total{event="hit"}"#),
        Some(turns)
    );
    assert_eq!(
        sample(&m, "berth_response_chain_entries "),
        Some((SESSIONS * 3 * 4) as f64)
    );
    // A keyless first turn's id became its key, pinned to its worker.
    let r = responses(&g.client, &[], body(false, None)).await;
    let id = response_id(&r, false);
    let s = g.client.get(&format!("/sticky/{id}"), &[]).await.json();
    assert_eq!(s["local"][0], json!(r.worker().unwrap()), "{s}");
}

#[tokio::test]
async fn an_unknown_or_unlisted_chain_gives_no_key() {
    let w = sims(2).await;
    let mut c = config(&w);
    manual(&mut c, false);
    let g = start(c.clone()).await;
    // Unknown id: keyless, refused under `manual` as any keyless request.
    let r = responses(&g.client, &[], body(false, Some("resp_unknown"))).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    // Known id, but the source left out of the list: keyless too.
    c.router.routing_key_sources = vec!["routing_key_headers".into()];
    let g = start(c).await;
    let r = responses(
        &g.client,
        &[("x-smg-routing-key", b"k1")],
        body(false, None),
    )
    .await;
    let id = response_id(&r, false);
    let r = responses(&g.client, &[], body(false, Some(&id))).await;
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
}

#[tokio::test]
async fn chain_entries_idle_out_with_the_pins() {
    let w = sims(2).await;
    let mut c = config(&w);
    manual(&mut c, false);
    c.router.max_idle_secs = 60;
    let g = start(c).await;
    let r = responses(&g.client, &[("session_id", b"s1")], body(false, None)).await;
    let id = response_id(&r, false);
    g.gw.clock().advance(Duration::from_secs(61));
    let r = responses(&g.client, &[], body(false, Some(&id))).await;
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, r#"berth_response_chain_events_total{event="expired"}"#),
        Some(1.0)
    );
}

#[tokio::test]
async fn a_chain_crosses_replicas_through_the_store() {
    let Some(redis) = RedisServer::start("responses chain across replicas") else {
        return;
    };
    let w = sims(4).await;
    let mut c = config(&w);
    manual(&mut c, true);
    let mut s = StoreSettings::new(redis.url());
    s.timeout = Duration::from_secs(3);
    s.sync_every = Duration::from_millis(100);
    c.sticky_store = Some(s);
    let a = start(c.clone()).await;
    let b = start(c).await;
    for stream in [false, true] {
        for keyed in [true, false] {
            // turn 1 on A, turns 2 and 3 on B (B never saw the first response)
            chains_stay(&a.client, &b.client, stream, keyed).await;
        }
    }
    let m = metrics(&b.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"berth_response_chain_events_total{event="store_hit"}"#
        ),
        Some((SESSIONS * 4) as f64)
    );
    assert!(redis.command("KEYS berth:chain:*").contains("berth:chain:"));
}
