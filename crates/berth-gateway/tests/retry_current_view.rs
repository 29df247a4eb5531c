//! A retry routes on the worker view as it is when the attempt failed, not as it was
//! when the request arrived (a worker added meanwhile can take the retry, one removed cannot).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;
use http::Method;

#[tokio::test]
async fn a_retry_sees_a_worker_added_during_the_failed_attempt() {
    let w = sims(2).await;
    let mut c = config(&w[..1]);
    c.router.policy = PolicyKind::RoundRobin;
    c.retry_max_retries = 1;
    let g = start(c).await;
    w[0].set_hang(true);
    let client = g.client.clone();
    let inflight = tokio::spawn(async move { client.chat(&[], chat_body(None)).await });
    eventually("the request reached the only worker", || async {
        w[0].requests() == 1
    })
    .await;
    let body = serde_json::json!({ "url": w[1].url() }).to_string();
    let added = g.client.send(Method::POST, "/workers", &[], body).await;
    assert_eq!(added.status, 201);
    w[0].kill();
    let r = inflight.await.unwrap();
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.worker().unwrap(), w[1].url());
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_retry_never_goes_to_a_worker_removed_during_the_failed_attempt() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.retry_max_retries = 1;
    let g = start(c).await;
    let first = g.client.keyed("k").await;
    let (held, other) = if first == w[0].url() { (0, 1) } else { (1, 0) };
    w[held].set_hang(true);
    let client = g.client.clone();
    let inflight = tokio::spawn(async move {
        client
            .chat(&[("x-smg-routing-key", b"k")], chat_body(None))
            .await
    });
    eventually("the request reached its pinned worker", || async {
        w[held].requests() == 2
    })
    .await;
    let path = format!(
        "/workers/{}",
        w[other].url().replace(':', "%3A").replace('/', "%2F")
    );
    assert_eq!(
        g.client.send(Method::DELETE, &path, &[], "").await.status,
        200
    );
    let before = w[other].requests();
    w[held].kill();
    let r = inflight.await.unwrap();
    assert_eq!(r.status, 502, "{:?} from {:?}", r.body, r.worker());
    assert_eq!(
        w[other].requests(),
        before,
        "a removed worker got the retry"
    );
    g.gw.shutdown().await;
}
