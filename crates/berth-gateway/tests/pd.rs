//! Prefill/decode disaggregation end to end: sim workers in prefill and decode mode on loopback,
//! a gateway in PD mode in front.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::GatewayConfig;
use berth_gateway::routing::PolicyKind;
use berth_sim::SimHandle;
use common::pd::{Fleet, fleet};
use common::*;
use serde_json::{Value, json};

/// A PD gateway config with `policy` on both legs and up to three retries.
fn pd_config(f: &Fleet, policy: PolicyKind) -> GatewayConfig {
    let mut c = common::pd::pd_config(f, policy);
    c.retry_max_retries = 3;
    c
}

fn key(k: &str) -> [(&'static str, Vec<u8>); 1] {
    [("x-smg-routing-key", k.as_bytes().to_vec())]
}

async fn chat_keyed(g: &Running, k: &str, body: Value) -> Resp {
    let h = key(k);
    let headers: Vec<(&str, &[u8])> = h.iter().map(|(n, v)| (*n, v.as_slice())).collect();
    g.client.chat(&headers, body).await
}

/// Which of `sims` received a request with this bootstrap room.
fn holder(sims: &[SimHandle], room: u64) -> Option<String> {
    sims.iter()
        .find(|s| {
            s.received().iter().any(|r| {
                serde_json::from_slice::<Value>(&r.body).unwrap()["bootstrap_room"] == room
            })
        })
        .map(SimHandle::url)
}

/// The bootstrap room of the last request the decode worker that answered `r` received.
fn room_of(decode: &[SimHandle], r: &Resp) -> u64 {
    let url = r.worker().unwrap();
    let sim = decode.iter().find(|d| d.url() == url).unwrap();
    let last = sim.received().pop().unwrap();
    serde_json::from_slice::<Value>(&last.body).unwrap()["bootstrap_room"]
        .as_u64()
        .unwrap()
}

async fn no_requests_active(g: &Running) {
    eventually("no request still counted in flight", || async {
        let r = g.client.get("/workers", &[]).await;
        r.json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["requests_active"] == 0)
    })
    .await;
}

#[tokio::test]
async fn a_keyed_conversation_keeps_its_pair_and_its_prefill_cache_grows() {
    let f = fleet(2, 2).await;
    let g = start(pd_config(&f, PolicyKind::Manual)).await;
    let mut messages = vec![
        json!({"role": "user", "content": "Tell me about the tides, at length please. ".repeat(8)}),
    ];
    let (mut decode_home, mut prefill_home) = (None, None);
    let mut cached = Vec::new();
    for turn in 0..4 {
        let r = chat_keyed(
            &g,
            "conv-1",
            json!({"model": "sim-model", "messages": messages, "max_tokens": 8}),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let decode = r.worker().unwrap();
        assert!(
            f.decode.iter().any(|d| d.url() == decode),
            "names the decode worker"
        );
        assert_eq!(
            *decode_home.get_or_insert(decode.clone()),
            decode,
            "turn {turn}"
        );
        let prefill = holder(&f.prefill, room_of(&f.decode, &r)).unwrap();
        assert_eq!(
            *prefill_home.get_or_insert(prefill.clone()),
            prefill,
            "turn {turn}"
        );
        let body = r.json();
        cached.push(
            body["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap(),
        );
        let answer = body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        messages.push(json!({"role": "assistant", "content": answer}));
        messages.push(json!({"role": "user", "content": format!("And then, part {turn}? Go on.")}));
    }
    assert_eq!(cached[0], 0, "first turn is cold: {cached:?}");
    assert!(
        cached.windows(2).all(|w| w[1] > w[0]),
        "the prefill worker's cached tokens grow turn by turn: {cached:?}"
    );
    no_requests_active(&g).await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn both_legs_get_the_three_bootstrap_fields_and_nothing_else_changes() {
    let f = fleet(1, 1).await;
    let g = start(pd_config(&f, PolicyKind::RoundRobin)).await;
    let sent = json!({"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "seed": 7});
    let r = g.client.chat(&[], sent.clone()).await;
    assert_eq!(r.status, 200);
    let p: Value = serde_json::from_slice(&f.prefill[0].received()[0].body).unwrap();
    let d: Value = serde_json::from_slice(&f.decode[0].received()[0].body).unwrap();
    assert_eq!(p, d, "both legs get the same body");
    let mut p = p.as_object().unwrap().clone();
    assert_eq!(p.remove("bootstrap_host"), Some(json!("127.0.0.1")));
    assert_eq!(
        p.remove("bootstrap_port"),
        Some(json!(f.prefill[0].bootstrap_port().unwrap()))
    );
    let room = p.remove("bootstrap_room").unwrap().as_u64().unwrap();
    assert!(room <= i64::MAX as u64);
    assert_eq!(Value::Object(p), sent);
    // a second request gets a fresh room
    let r = g.client.chat(&[], sent).await;
    assert_ne!(room_of(&f.decode, &r), room);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn streaming_returns_the_decode_workers_stream() {
    let f = fleet(2, 2).await;
    let g = start(pd_config(&f, PolicyKind::Manual)).await;
    let r = chat_keyed(
        &g,
        "s",
        json!({"model": "sim-model", "messages": [{"role": "user", "content": "stream please"}], "max_tokens": 5, "stream": true}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    assert!(text.matches("\"delta\"").count() >= 5, "{text}");
    let decode = r.worker().unwrap();
    assert!(f.decode.iter().any(|d| d.url() == decode));
    no_requests_active(&g).await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_killed_prefill_worker_fails_over_and_the_decode_pin_stays() {
    let f = fleet(2, 2).await;
    let mut c = pd_config(&f, PolicyKind::Manual);
    c.health.interval = Duration::from_secs(60);
    let g = start(c).await;
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4});
    let first = chat_keyed(&g, "k", body.clone()).await;
    let decode_home = first.worker().unwrap();
    let prefill_home = holder(&f.prefill, room_of(&f.decode, &first)).unwrap();
    let dead = f.prefill.iter().find(|p| p.url() == prefill_home).unwrap();
    dead.kill();
    for stream in [false, true] {
        let mut b = body.clone();
        b["stream"] = json!(stream);
        let r = chat_keyed(&g, "k", b).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.worker().unwrap(), decode_home, "the decode pin stays");
        let prefill = holder(&f.prefill, room_of(&f.decode, &r)).unwrap();
        assert_ne!(prefill, prefill_home, "the prefill leg failed over");
    }
    no_requests_active(&g).await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_killed_decode_worker_fails_over_and_the_prefill_pin_stays() {
    let f = fleet(2, 2).await;
    let mut c = pd_config(&f, PolicyKind::Manual);
    c.health.interval = Duration::from_secs(60);
    let g = start(c).await;
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4});
    let first = chat_keyed(&g, "k", body.clone()).await;
    let decode_home = first.worker().unwrap();
    let prefill_home = holder(&f.prefill, room_of(&f.decode, &first)).unwrap();
    f.decode
        .iter()
        .find(|d| d.url() == decode_home)
        .unwrap()
        .kill();
    for stream in [false, true] {
        let mut b = body.clone();
        b["stream"] = json!(stream);
        let r = chat_keyed(&g, "k", b).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_ne!(
            r.worker().unwrap(),
            decode_home,
            "the decode leg failed over"
        );
        let prefill = holder(&f.prefill, room_of(&f.decode, &r)).unwrap();
        assert_eq!(prefill, prefill_home, "the prefill pin stays");
    }
    no_requests_active(&g).await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn prefill_errors_are_the_gateways_json_errors_and_leak_no_lease() {
    let f = fleet(2, 1).await;
    let g = start(pd_config(&f, PolicyKind::RoundRobin)).await;
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2});
    for p in &f.prefill {
        p.set_error_rate(1.0, 503);
    }
    let r = g.client.chat(&[], body.clone()).await;
    assert_eq!(r.status, 502);
    assert_eq!(r.error_code().as_deref(), Some("prefill_server_error"));
    assert_eq!(r.json()["error"]["code"], "prefill_server_error");
    for p in &f.prefill {
        p.set_error_rate(1.0, 400);
    }
    let r = g.client.chat(&[], body.clone()).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code().as_deref(), Some("prefill_bad_request"));
    for p in &f.prefill {
        p.set_error_rate(0.0, 500);
    }
    // one prefill worker failing: the pair is retried on the other one
    f.prefill[0].set_error_rate(1.0, 503);
    for _ in 0..4 {
        assert_eq!(g.client.chat(&[], body.clone()).await.status, 200);
    }
    no_requests_active(&g).await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_admin_api_adds_and_removes_prefill_and_decode_workers() {
    let f = fleet(1, 1).await;
    let g = start(pd_config(&f, PolicyKind::RoundRobin)).await;
    let extra = fleet(1, 1).await;
    let add = |body: Value| {
        let client = g.client.clone();
        async move {
            client
                .send(
                    http::Method::POST,
                    "/workers",
                    &[],
                    serde_json::to_vec(&body).unwrap(),
                )
                .await
        }
    };
    let port = extra.prefill[0].bootstrap_port().unwrap();
    let r = add(
        json!({"url": extra.prefill[0].url(), "worker_type": "prefill", "bootstrap_port": port}),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.json()["worker_type"], "prefill");
    assert_eq!(r.json()["bootstrap_port"], port);
    let r = add(json!({"url": extra.decode[0].url(), "worker_type": "decode"})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["worker_type"], "decode");
    let r = add(json!({"url": "http://127.0.0.1:1", "worker_type": "regular"})).await;
    assert_eq!(r.status, 400);
    let list = g.client.get("/workers", &[]).await.json();
    let types: Vec<_> = list["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["worker_type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(types.iter().filter(|t| *t == "prefill").count(), 2);
    assert_eq!(types.iter().filter(|t| *t == "decode").count(), 2);
    // requests reach the new prefill worker (round robin)
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2});
    for _ in 0..4 {
        assert_eq!(g.client.chat(&[], body.clone()).await.status, 200);
    }
    assert!(extra.prefill[0].requests() > 0);
    let url = extra.prefill[0].url();
    let enc = url.replace(':', "%3A").replace('/', "%2F");
    let r = g
        .client
        .send(
            http::Method::DELETE,
            &format!("/workers/{enc}"),
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let seen = extra.prefill[0].requests();
    for _ in 0..3 {
        assert_eq!(g.client.chat(&[], body.clone()).await.status, 200);
    }
    assert_eq!(
        extra.prefill[0].requests(),
        seen,
        "a removed prefill worker gets nothing"
    );
    assert_eq!(g.client.get("/readiness", &[]).await.status, 200);
    let enc = f.prefill[0].url().replace(':', "%3A").replace('/', "%2F");
    g.client
        .send(
            http::Method::DELETE,
            &format!("/workers/{enc}"),
            &[],
            Vec::new(),
        )
        .await;
    let r = g.client.get("/readiness", &[]).await;
    assert_eq!(r.status, 503, "no prefill worker left: not ready");
    g.gw.shutdown().await;
}

#[tokio::test]
async fn metrics_list_both_pools() {
    let f = fleet(1, 1).await;
    let g = start(pd_config(&f, PolicyKind::Manual)).await;
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2});
    chat_keyed(&g, "m", body).await;
    let text = metrics(&g.gw).await;
    for w in f.prefill.iter().chain(&f.decode) {
        assert!(
            text.contains(&format!("smg_worker_healthy{{worker=\"{}\"}} 1", w.url())),
            "{text}"
        );
    }
    for leg in ["prefill", "decode"] {
        let branch = format!("berth_pd_branch_total{{leg=\"{leg}\",branch=\"vacant\"}}");
        assert_eq!(sample(&text, &branch), Some(1.0), "{text}");
        let pins = format!("berth_pd_cache_entries{{leg=\"{leg}\"}}");
        assert_eq!(sample(&text, &pins), Some(1.0), "{text}");
    }
    assert_eq!(
        sample(&text, "smg_manual_policy_cache_entries"),
        Some(2.0),
        "one pin per leg"
    );
    g.gw.shutdown().await;
}
