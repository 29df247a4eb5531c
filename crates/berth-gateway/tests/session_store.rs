//! Issue #19: `nvext.session_control` `close` drops the session's pin in the shared store too,
//! before the close request's response reaches the client (two replicas, a real Redis).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::StoreSettings;
use berth_gateway::routing::PolicyKind;
use common::redis::RedisServer;
use common::*;
use serde_json::json;

async fn sticky(client: &TestClient, key: &str) -> serde_json::Value {
    let r = client.get(&format!("/sticky/{key}"), &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.json()
}

async fn nvext(client: &TestClient, action: Option<&str>) -> Resp {
    let mut body = chat_body(None);
    body["nvext"] = json!({"session_control": {"session_id": "sess-s", "action": action}});
    client.chat(&[], body).await
}

#[tokio::test]
async fn close_drops_the_pin_in_the_store_before_the_client_reads_the_response() {
    let Some(redis) = RedisServer::start("session close in the store") else {
        return;
    };
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let mut s = StoreSettings::new(redis.url());
    s.timeout = Duration::from_secs(3);
    s.sync_every = Duration::from_millis(100);
    c.sticky_store = Some(s);
    let a = start(c.clone()).await;
    let b = start(c).await;
    let r = nvext(&a.client, Some("bind")).await;
    assert_eq!(r.status, 200);
    let x = r.worker().unwrap();
    // The other replica finds the session in the store.
    assert_eq!(nvext(&b.client, None).await.worker().unwrap(), x);
    assert!(!sticky(&a.client, "sess-s").await["store"].is_null());
    // Close on B: once its response is read, the store no longer holds the pin.
    assert_eq!(nvext(&b.client, Some("close")).await.status, 200);
    let s = sticky(&b.client, "sess-s").await;
    assert!(s["local"].is_null() && s["store"].is_null(), "{s}");
    // A drops its own copy when the store's delete is announced.
    eventually("A dropped the closed session", || async {
        sticky(&a.client, "sess-s").await["local"].is_null()
    })
    .await;
    let m = metrics(&b.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="close",outcome="dropped"}"#
        ),
        Some(1.0)
    );
}
