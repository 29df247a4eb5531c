//! SMG's operations surface: the route table in docs/gateway.md answers on a running gateway,
//! `/workers` in SMG's shape, the info, fan-out and legacy routes, their guard, and
//! `x-request-id`.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
#[path = "support/route_table.rs"]
mod route_table;

use berth_gateway::config::Secret;
use common::*;
use http::Method;

const ADMIN: (&str, &[u8]) = ("authorization", b"Bearer adm1n");

/// `(method, path)` of every route in docs/gateway.md's Routes table, in order.
fn documented() -> Vec<(Method, String)> {
    route_table::docs_route_table(include_str!("../../../docs/gateway.md"))
        .into_iter()
        .map(|(m, p)| (m.parse().unwrap(), p))
        .collect()
}

/// The gateway's answer to a path it has no route for.
fn unknown_route(r: &Resp) -> bool {
    r.status == 404 && String::from_utf8_lossy(&r.body).contains("no route for")
}

#[tokio::test]
async fn every_documented_route_answers_on_a_running_gateway() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.admin_api_key = Some(Secret("adm1n".into()));
    let g = start(c).await;
    assert!(unknown_route(
        &g.client.get("/no-such-route", &[ADMIN]).await
    ));
    let mut routes = documented();
    assert!(routes.len() >= 20, "{routes:?}");
    // Removing a worker last, so every other route still has both.
    routes.sort_by_key(|(m, _)| *m == Method::DELETE);
    for (method, pattern) in routes {
        let path = pattern.replace("{id}", "1").replace("{key}", "some-key");
        let body = match pattern.as_str() {
            "/workers" => serde_json::json!({"url": "http://127.0.0.1:9"}).to_string(),
            _ => chat_body(None).to_string(),
        };
        let r = g
            .client
            .send(
                method.clone(),
                &path,
                &[ADMIN, ("content-type", b"application/json")],
                body,
            )
            .await;
        assert!(
            !unknown_route(&r),
            "{method} {path} is documented but not routed: {:?}",
            r.body
        );
        assert_ne!(r.status, 405, "{method} {path}");
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn workers_listing_has_smgs_shape_with_berths_fields() {
    let w = sims(2).await;
    let g = start(config(&w)).await;
    let client = &g.client;
    for s in &w {
        eventually("in routing", || async { healthy(client, &s.url()).await }).await;
    }
    let list = g.client.get("/workers", &[]).await.json();
    assert_eq!(list["total"], 2);
    assert_eq!(
        list["stats"],
        serde_json::json!({"prefill_count": 0, "decode_count": 0, "regular_count": 2})
    );
    let first = &list["workers"][0];
    assert_eq!(first["url"], w[0].url());
    assert_eq!(first["model_id"], "sim-model");
    assert_eq!(first["models"], serde_json::json!([{"id": "sim-model"}]));
    assert_eq!(first["worker_type"], "regular");
    assert_eq!(first["connection_mode"], "http");
    assert_eq!(
        first["runtime_type"], "sglang",
        "the sim says owned_by sglang"
    );
    assert_eq!(first["is_healthy"], true);
    assert_eq!(first["status"], "ready");
    assert_eq!(first["load"], 0);
    assert_eq!(first["circuit_breaker"], "closed");
    for berth_field in [
        "requests_active",
        "routing_keys_active",
        "kv_capacity_tokens",
    ] {
        assert!(first.get(berth_field).is_some(), "{berth_field}: {first}");
    }

    let id = first["id"].as_str().unwrap();
    let by_id = g.client.get(&format!("/workers/{id}"), &[]).await;
    assert_eq!(by_id.status, 200);
    assert_eq!(by_id.json()["url"], w[0].url());
    let enc = w[1].url().replace(':', "%3A").replace('/', "%2F");
    let by_url = g.client.get(&format!("/workers/{enc}"), &[]).await;
    assert_eq!(by_url.json()["url"], w[1].url());
    let missing = g.client.get("/workers/999", &[]).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.error_code().as_deref(), Some("not_found"));

    w[1].set_health_failing(true);
    eventually("marked not ready", || async {
        let r = client.get(&format!("/workers/{enc}"), &[]).await.json();
        r["status"] == "not_ready" && r["is_healthy"] == false
    })
    .await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn info_routes_are_answered_by_an_available_worker() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.admin_api_key = Some(Secret("adm1n".into()));
    let g = start(c).await;
    let info = g.client.get("/get_server_info", &[]).await;
    assert_eq!(info.status, 200, "open, as in SMG");
    assert_eq!(info.worker().as_deref(), Some(w[0].url().as_str()));
    assert!(info.json()["max_total_num_tokens"].as_u64().is_some());
    let model = g.client.get("/get_model_info", &[]).await;
    assert_eq!(model.status, 200);
    assert_eq!(model.json()["model_path"], "sim-model");
    let hg = g.client.get("/health_generate", &[]).await;
    assert_eq!(hg.status, 200);

    let models = g.client.get("/v1/models", &[]).await.json();
    assert_eq!(
        models["data"][0]["owned_by"], "sglang",
        "the worker's owner"
    );
    assert!(models["data"][0]["created"].as_u64().unwrap() > 0);

    let ready = g.client.get("/readiness", &[]).await.json();
    assert_eq!(ready["healthy_workers"], 1);
    assert_eq!(ready["total_workers"], 1);

    w[0].set_health_failing(true);
    let client = &g.client;
    eventually("no worker available", || async {
        client.get("/get_server_info", &[]).await.status == 503
    })
    .await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn flush_cache_and_get_loads_ask_every_worker_behind_the_admin_key() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.admin_api_key = Some(Secret("adm1n".into()));
    let g = start(c).await;
    assert_eq!(
        g.client
            .send(Method::POST, "/flush_cache", &[], "")
            .await
            .status,
        401
    );
    assert_eq!(g.client.get("/get_loads", &[]).await.status, 401);
    let wrong = g.client.get("/flush_cache", &[ADMIN]).await;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.headers["allow"], "POST");
    let wrong = g.client.send(Method::PUT, "/workers", &[ADMIN], "").await;
    assert_eq!(wrong.headers["allow"], "GET, POST");

    let flushed = g
        .client
        .send(Method::POST, "/flush_cache", &[ADMIN], "")
        .await;
    assert_eq!(flushed.status, 200, "{:?}", flushed.body);
    let f = flushed.json();
    assert_eq!(f["status"], "success");
    assert_eq!(f["workers_flushed"], 2);
    assert_eq!(f["total_workers"], 2);

    let loads = g.client.get("/get_loads", &[ADMIN]).await;
    assert_eq!(loads.status, 200);
    let l = loads.json();
    assert_eq!(l["dp_rank_count"], 2);
    let entries = l["loads"].as_array().unwrap();
    assert_eq!(entries[0]["worker"], w[0].url());
    assert_eq!(entries[1]["worker"], w[1].url());
    assert_eq!(entries[0]["worker_type"], "regular");
    assert!(entries[0]["max_total_num_tokens"].as_u64().is_some());
    assert_eq!(l["aggregate"]["total_running_reqs"], 0);
    assert!(l.get("failed").is_none());

    w[1].kill();
    let partial = g
        .client
        .send(Method::POST, "/flush_cache", &[ADMIN], "")
        .await;
    assert_eq!(partial.status, 206);
    let p = partial.json();
    assert_eq!(p["status"], "partial_success");
    assert_eq!(p["message"], "Cache flush: 1 succeeded, 1 failed");
    assert_eq!(p["workers_flushed"], 1);
    assert_eq!(p["successful"], serde_json::json!([w[0].url()]));
    assert_eq!(p["failed"][0]["worker"], w[1].url());
    let l = g.client.get("/get_loads", &[ADMIN]).await.json();
    assert_eq!(l["dp_rank_count"], 1);
    assert_eq!(l["failed"][0]["worker"], w[1].url());
    g.gw.shutdown().await;
}

#[tokio::test]
async fn legacy_worker_routes_add_list_and_remove() {
    let w = sims(2).await;
    let g = start(config(&w[..1])).await;
    let enc = w[1].url().replace(':', "%3A").replace('/', "%2F");
    let added = g
        .client
        .send(Method::POST, &format!("/add_worker?url={enc}"), &[], "")
        .await;
    assert_eq!(added.status, 200, "{:?}", added.body);
    assert_eq!(
        added.body,
        format!("Successfully added worker: {}", w[1].url())
    );
    let list = g.client.get("/list_workers", &[]).await.json();
    assert_eq!(list, serde_json::json!({"urls": [w[0].url(), w[1].url()]}));
    let dup = g
        .client
        .send(
            Method::POST,
            &format!("/add_worker?url={}", w[1].url()),
            &[],
            "",
        )
        .await;
    assert_eq!(dup.status, 400);
    let no_url = g.client.send(Method::POST, "/add_worker", &[], "").await;
    assert_eq!(no_url.status, 400);
    assert_eq!(no_url.error_code().as_deref(), Some("bad_request"));

    let removed = g
        .client
        .send(
            Method::POST,
            &format!("/remove_worker?url={}", w[1].url()),
            &[],
            "",
        )
        .await;
    assert_eq!(removed.status, 200);
    assert_eq!(
        removed.body,
        format!("Successfully removed worker: {}", w[1].url())
    );
    let gone = g
        .client
        .send(Method::POST, &format!("/remove_worker?url={enc}"), &[], "")
        .await;
    assert_eq!(gone.status, 404);
    let list = g.client.get("/list_workers", &[]).await.json();
    assert_eq!(list, serde_json::json!({"urls": [w[0].url()]}));
    g.gw.shutdown().await;
}

#[tokio::test]
async fn every_response_carries_an_x_request_id() {
    let w = sims(1).await;
    let g = start(config(&w)).await;
    let id = |r: &Resp| {
        r.headers
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let made = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(made.status, 200);
    let made = id(&made);
    assert!(made.starts_with("chatcmpl-") && made.len() == 33, "{made}");

    let own = g
        .client
        .chat(&[("x-request-id", b"client-id-1")], chat_body(None))
        .await;
    assert_eq!(id(&own), "client-id-1");
    let rec = w[0].received();
    let last = rec.last().unwrap();
    assert_eq!(
        last.headers.get("x-request-id").unwrap(),
        "client-id-1",
        "the client's id reaches the worker"
    );
    let corr = g
        .client
        .chat(&[("x-correlation-id", b"corr-7")], chat_body(None))
        .await;
    assert_eq!(id(&corr), "corr-7");

    let err = g.client.get("/nope", &[]).await;
    assert_eq!(err.status, 404);
    assert!(id(&err).starts_with("req-"), "gateway errors too");
    let gen_resp = g
        .client
        .send(
            Method::POST,
            "/generate",
            &[("content-type", b"application/json")],
            r#"{"text":"hi","sampling_params":{"max_new_tokens":2}}"#,
        )
        .await;
    assert!(id(&gen_resp).starts_with("gnt-"));
    g.gw.shutdown().await;
}
