//! Load monitoring and worker overload protection against real sim workers: the gateway polls
//! each worker's `GET /v1/loads`, exports what it read, leaves a worker whose KV usage is over
//! `--worker-overload-token-usage` out of placement while another is under, and with
//! `--worker-overload-shed` refuses when every worker is over.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_sim::{SimHandle, SimWorker};
use common::*;

/// A sim whose KV cache holds `kv` tokens.
async fn sim(id: &str, kv: u64) -> SimHandle {
    SimWorker::builder()
        .worker_id(id)
        .model("sim-model")
        .time_scale(0.0)
        .kv_capacity_tokens(kv)
        .spawn_on_loopback()
        .await
}

/// Keeps a long streamed request running on `w` until the returned connection is dropped: its
/// prompt's KV is in use while it runs, so the worker's token_usage (SGLang's meaning: cache that
/// running requests use, evictable cache left out) is near 1. The answer is never read, so the
/// worker's stream stops on a full socket and the request stays running.
async fn occupy(w: &SimHandle) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let body = serde_json::json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": "fill the cache ".repeat(2_000)}],
        "max_tokens": 100_000,
        "stream": true,
    })
    .to_string();
    let mut s = tokio::net::TcpStream::connect(w.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    s
}

/// [`occupy`]s `w` and waits until the gateway's load poll has seen its KV usage over 0.8.
async fn occupy_until_polled(g: &Running, w: &SimHandle) -> tokio::net::TcpStream {
    let busy = occupy(w).await;
    eventually("the gateway polled the busy worker's KV usage", || async {
        usage_of(&metrics(&g.gw).await, w).is_some_and(|u| u >= 0.8)
    })
    .await;
    busy
}

fn usage_of(m: &str, w: &SimHandle) -> Option<f64> {
    sample(
        m,
        &format!(r#"berth_worker_token_usage{{worker="{}"}}"#, w.url()),
    )
}

#[tokio::test]
async fn an_overloaded_worker_is_left_out_while_another_is_under() {
    let w = vec![
        sim("w0", 512).await,
        sim("w1", 1 << 20).await,
        sim("w2", 1 << 20).await,
    ];
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.load_monitor.interval = Duration::from_millis(50);
    let g = start(c).await;
    let _busy = occupy_until_polled(&g, &w[0]).await;
    // one scrape from a poll round that every worker answered (on a loaded machine a round can
    // go unanswered within its timeout, and its gauges are then absent, not 0)
    let mut m = metrics(&g.gw).await;
    for _ in 0..500 {
        if w.iter().all(|w| usage_of(&m, w).is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        m = metrics(&g.gw).await;
    }
    assert!(usage_of(&m, &w[0]).is_some_and(|u| u >= 0.8), "{m}");
    assert!(usage_of(&m, &w[1]).is_some_and(|u| u < 0.8), "{m}");
    assert_eq!(
        sample(
            &m,
            &format!(
                r#"berth_worker_waiting_requests{{worker="{}"}}"#,
                w[0].url()
            )
        ),
        Some(0.0),
        "{m}"
    );
    for _ in 0..12 {
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status, 200);
        assert_ne!(r.worker().unwrap(), w[0].url(), "w0 is over 0.8 KV usage");
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, r#"berth_worker_overload_total{outcome="vetoed"}"#),
        Some(12.0),
        "{m}"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn protection_can_be_switched_off() {
    let w = vec![sim("w0", 512).await, sim("w1", 1 << 20).await];
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.router.overload.enabled = false;
    c.load_monitor.interval = Duration::from_millis(50);
    let g = start(c).await;
    let _busy = occupy_until_polled(&g, &w[0]).await;
    let mut to_w0 = 0;
    for _ in 0..6 {
        let r = g.client.chat(&[], chat_body(None)).await;
        to_w0 += usize::from(r.worker().unwrap() == w[0].url());
    }
    assert_eq!(to_w0, 3, "round robin over both");
    g.gw.shutdown().await;
}

#[tokio::test]
async fn all_over_is_placed_anyway_or_shed_with_retry_after() {
    for shed in [false, true] {
        let w = vec![sim("w0", 512).await, sim("w1", 512).await];
        let mut c = config(&w);
        c.router.policy = PolicyKind::CacheAware;
        c.router.overload.shed = shed;
        c.load_monitor.interval = Duration::from_secs(1);
        let g = start(c).await;
        let mut busy = Vec::new();
        for s in &w {
            busy.push(occupy(s).await);
        }
        eventually("the gateway polled both KV usages", || async {
            let m = metrics(&g.gw).await;
            w.iter().all(|s| usage_of(&m, s).is_some_and(|u| u >= 0.8))
        })
        .await;
        let r = g.client.chat(&[], chat_body(None)).await;
        let outcome = if shed {
            assert_eq!(r.status, 503);
            assert_eq!(
                r.error_code().as_deref(),
                Some("worker_overload_protection_shed")
            );
            assert_eq!(r.json()["error"]["code"], "worker_overload_protection_shed");
            assert_eq!(r.headers.get("retry-after").unwrap(), "1");
            "shed"
        } else {
            assert_eq!(r.status, 200);
            "all_over"
        };
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(
                &m,
                &format!(r#"berth_worker_overload_total{{outcome="{outcome}"}}"#)
            ),
            Some(1.0),
            "{m}"
        );
        g.gw.shutdown().await;
    }
}
