//! The admin API, membership changes, model scoping and `/v1/models`.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::HashMap;

use berth_gateway::config::Secret;
use berth_gateway::routing::PolicyKind;
use common::*;
use http::Method;

const ADMIN: (&str, &[u8]) = ("authorization", b"Bearer adm1n");

async fn pins(g: &Running, keys: &[String]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for k in keys {
        out.insert(k.clone(), g.client.keyed(k).await);
    }
    out
}

#[tokio::test]
async fn admin_api_needs_its_key_adds_without_moving_keys_and_removes_only_its_keys() {
    let w = sims(3).await;
    let mut c = config(&w[..2]);
    c.router.policy = PolicyKind::Manual;
    c.admin_api_key = Some(Secret("adm1n".into()));
    let g = start(c).await;
    assert_eq!(g.client.get("/workers", &[]).await.status, 401);
    assert_eq!(
        g.client
            .get("/workers", &[("authorization", b"Bearer wrong")])
            .await
            .status,
        401
    );
    let list = g.client.get("/workers", &[ADMIN]).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.json()["workers"].as_array().unwrap().len(), 2);

    let keys: Vec<String> = (0..24).map(|i| format!("key-{i}")).collect();
    let before = pins(&g, &keys).await;

    let body = serde_json::json!({ "url": w[2].url() }).to_string();
    let added = g
        .client
        .send(Method::POST, "/workers", &[ADMIN], body.clone())
        .await;
    assert_eq!(added.status, 201, "{:?}", added.body);
    assert_eq!(added.json()["is_healthy"], true);
    let dup = g
        .client
        .send(Method::POST, "/workers", &[ADMIN], body)
        .await;
    assert_eq!(dup.status, 400);
    assert_eq!(
        pins(&g, &keys).await,
        before,
        "adding a worker moves no key"
    );
    // New keys can land on the new worker.
    let fresh: Vec<String> = (0..30).map(|i| format!("fresh-{i}")).collect();
    assert!(pins(&g, &fresh).await.values().any(|u| *u == w[2].url()));

    let gone = w[0].url();
    let path = format!("/workers/{}", gone.replace(':', "%3A").replace('/', "%2F"));
    let removed = g.client.send(Method::DELETE, &path, &[ADMIN], "").await;
    assert_eq!(removed.status, 200);
    let after = pins(&g, &keys).await;
    for k in &keys {
        if before[k] == gone {
            assert_ne!(after[k], gone);
        } else {
            assert_eq!(
                after[k], before[k],
                "{k} was not on the removed worker and stays"
            );
        }
    }
    let missing = g
        .client
        .send(Method::DELETE, "/workers/999", &[ADMIN], "")
        .await;
    assert_eq!(missing.status, 404);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn models_are_the_union_and_requests_go_to_workers_serving_their_model() {
    let a = sims_with_model(1, "model-a").await;
    let b = sims_with_model(1, "model-b").await;
    let all: Vec<_> = a.into_iter().chain(b).collect();
    let mut c = config(&all);
    c.router.policy = PolicyKind::RoundRobin;
    let g = start(c).await;
    let models = g.client.get("/v1/models", &[]).await.json();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["model-a", "model-b"]);
    for _ in 0..4 {
        for (model, sim) in [("model-a", &all[0]), ("model-b", &all[1])] {
            let r = g
                .client
                .chat(&[], serde_json::json!({"model": model, "messages": []}))
                .await;
            assert_eq!(r.worker().unwrap(), sim.url());
        }
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="buffered",reason="model_selection"}"#
        ),
        Some(8.0),
        "{m}"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn metrics_report_values_for_keyed_traffic() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let home = g.client.keyed("m-key").await;
    for _ in 0..4 {
        g.client.keyed("m-key").await;
    }
    let m = metrics(&g.gw).await;
    let v = |s: &str| sample(&m, s);
    assert_eq!(
        v(r#"smg_manual_policy_branch_total{branch="vacant"}"#),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        v(r#"smg_manual_policy_branch_total{branch="occupied_hit"}"#),
        Some(4.0)
    );
    assert_eq!(
        v(r#"smg_routing_key_source_total{source="header"}"#),
        Some(5.0)
    );
    assert_eq!(v("smg_manual_policy_cache_entries"), Some(1.0));
    assert_eq!(
        v(&format!(
            "smg_worker_routing_keys_active{{worker=\"{home}\"}}"
        )),
        Some(1.0)
    );
    assert_eq!(
        v(&format!("smg_worker_requests_active{{worker=\"{home}\"}}")),
        Some(0.0)
    );
    assert_eq!(
        v(&format!("smg_worker_healthy{{worker=\"{home}\"}}")),
        Some(1.0)
    );
    assert_eq!(
        v(&format!("smg_worker_cb_state{{worker=\"{home}\"}}")),
        Some(0.0)
    );
    assert_eq!(
        v(
            r#"smg_router_requests_total{model="sim-model",endpoint="/v1/chat/completions",streaming="unknown"}"#
        ),
        Some(5.0)
    );
    assert_eq!(
        v(r#"smg_router_upstream_responses_total{status_code="200"}"#),
        Some(5.0)
    );
    assert_eq!(v("smg_router_request_duration_seconds_count"), Some(5.0));
    assert_eq!(v("smg_router_ttft_seconds_count"), Some(5.0));
    assert_eq!(v("smg_router_retries_total"), Some(0.0));
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_worker_added_before_it_answers_joins_with_its_models_once_healthy() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.health.timeout = std::time::Duration::from_millis(300);
    let g = start(c).await;
    // Bound but not serving yet: the admin probe times out and the worker is registered unhealthy.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = serde_json::json!({ "url": url }).to_string();
    let added = g.client.send(Method::POST, "/workers", &[], body).await;
    assert_eq!(added.status, 201);
    assert_eq!(added.json()["is_healthy"], false);
    let late = berth_sim::SimWorker::builder()
        .model("late-model")
        .time_scale(0.0)
        .spawn(listener);
    eventually("health checks bring it in", || async {
        healthy(&g.client, &url).await
    })
    .await;
    let client = &g.client;
    eventually("its models are listed", || async {
        client.get("/v1/models", &[]).await.json()["data"]
            .as_array()
            .unwrap()
            .len()
            == 2
    })
    .await;
    let r = g
        .client
        .chat(
            &[],
            serde_json::json!({"model": "late-model", "messages": []}),
        )
        .await;
    assert_eq!(r.worker().unwrap(), late.url());
    g.gw.shutdown().await;
}
