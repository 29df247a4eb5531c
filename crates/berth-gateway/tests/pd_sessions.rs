//! Issue #19 in PD mode: Responses chains recorded and followed on both legs, and
//! `nvext.session_control` bind and close applied to both legs' pins.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::GatewayConfig;
use berth_gateway::routing::PolicyKind;
use berth_sim::SimHandle;
use common::pd::{Fleet, fleet};
use common::*;
use serde_json::{Value, json};

/// `manual` on both legs; keyless requests placed, not refused.
fn pd_config(f: &Fleet) -> GatewayConfig {
    let mut c = common::pd::pd_config(f, PolicyKind::Manual);
    c.router.allow_requests_without_routing_key = true;
    c
}

/// The prefill worker that received the request the decode worker answering `r` got last.
fn prefill_of(f: &Fleet, r: &Resp) -> String {
    let url = r.worker().unwrap();
    let sim = f.decode.iter().find(|d| d.url() == url).unwrap();
    let last = sim.received().pop().unwrap();
    let room = serde_json::from_slice::<Value>(&last.body).unwrap()["bootstrap_room"].clone();
    f.prefill
        .iter()
        .find(|p| {
            p.received().iter().any(|q| {
                serde_json::from_slice::<Value>(&q.body).unwrap()["bootstrap_room"] == room
            })
        })
        .map(SimHandle::url)
        .unwrap()
}

async fn respond(g: &Running, previous: Option<&str>) -> Resp {
    let mut body = json!({"model": "sim-model", "input": "tell me more", "max_output_tokens": 2});
    if let Some(p) = previous {
        body["previous_response_id"] = json!(p);
    }
    let json = [("content-type", &b"application/json"[..])];
    let r = g
        .client
        .send(http::Method::POST, "/v1/responses", &json, body.to_string())
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r
}

#[tokio::test]
async fn responses_chains_keep_their_prefill_and_decode_pair() {
    let f = fleet(3, 3).await;
    let g = start(pd_config(&f)).await;
    for _ in 0..4 {
        // A keyless first turn: placed on both legs, its id pinned to the pair.
        let r = respond(&g, None).await;
        let pair = (r.worker().unwrap(), prefill_of(&f, &r));
        let mut id = r.json()["id"].as_str().unwrap().to_owned();
        for turn in 1..4 {
            let r = respond(&g, Some(&id)).await;
            assert_eq!(
                (r.worker().unwrap(), prefill_of(&f, &r)),
                pair,
                "turn {turn}"
            );
            id = r.json()["id"].as_str().unwrap().to_owned();
        }
    }
    // 12 chained turns, each routed on both legs by the chain's key.
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_routing_key_source_total{source="previous_response_id"}"#
        ),
        Some(24.0)
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn bind_and_close_apply_to_both_legs() {
    let f = fleet(2, 2).await;
    let g = start(pd_config(&f)).await;
    let nv = |action: &str| {
        let mut b = chat_body(None);
        b["nvext"] =
            json!({"session_control": {"session_id": "pd-s", "action": action, "timeout": 600}});
        b
    };
    assert_eq!(g.client.chat(&[], nv("bind")).await.status, 200);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="bind",outcome="timeout_set"}"#
        ),
        Some(1.0)
    );
    // One timeout per leg's pin.
    assert_eq!(sample(&m, "berth_session_idle_timeouts"), Some(2.0));
    assert_eq!(g.client.chat(&[], nv("close")).await.status, 200);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="close",outcome="dropped"}"#
        ),
        Some(1.0)
    );
    // Both legs' pins (and their timeouts) are gone.
    assert_eq!(sample(&m, "berth_session_idle_timeouts"), Some(0.0));
    g.gw.shutdown().await;
}
