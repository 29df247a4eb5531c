//! `--cache-feedback` with real sim workers, whose KV caches evict for real: an evicted prompt
//! stops counting as cached after one answer, a flush is noticed after one answer, and a
//! stream's usage event is read without holding back any byte.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_gateway::routing::policy::FeedbackMode;
use berth_sim::{SimHandle, SimWorker};
use bytes::Bytes;
use common::*;
use http::Method;

const JSON: (&str, &[u8]) = ("content-type", b"application/json");

async fn sim(id: &str, kv_tokens: u64) -> SimHandle {
    SimWorker::builder()
        .worker_id(id)
        .model("sim-model")
        .kv_capacity_tokens(kv_tokens)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await
}

/// A distinct text of about `words` 4-character words.
fn words(tag: &str, words: usize) -> String {
    (0..words)
        .map(|i| format!("{tag}{:02} ", i % 100))
        .collect()
}

fn body(text: &str, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 1,
        "stream": stream,
    })
}

async fn ask(g: &Running, text: &str) -> Resp {
    let r = g.client.chat(&[], body(text, false)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r
}

fn cached(r: &Resp) -> u64 {
    r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap()
}

async fn reports(g: &Running, worker: &str, verdict: &str) -> f64 {
    let m = metrics(&g.gw).await;
    sample(
        &m,
        &format!(r#"berth_cached_tokens_reports_total{{worker="{worker}",verdict="{verdict}"}}"#),
    )
    .unwrap_or(0.0)
}

/// Waits until `n` answers of `worker` were read (the read ends with the body).
async fn answered(g: &Running, worker: &str, n: f64) {
    eventually("the answers were read", || async {
        let mut total = 0.0;
        for v in ["confirmed", "shortfall", "surplus", "uncompared", "unknown"] {
            total += reports(g, worker, v).await;
        }
        total >= n
    })
    .await;
}

/// The scripted eviction on `mode`: returns the worker the sub-agent's next turn went to, w0's
/// URL, and the shortfalls counted.
async fn evict_then_return(mode: FeedbackMode) -> (String, String, f64) {
    // w0 holds about 3,000 tokens: the conversation and its sub-agent fit, the filler evicts
    // them
    let w0 = sim("w0", 3_000).await;
    let w1 = sim("w1", 3_000).await;
    let mut c = config(std::slice::from_ref(&w0));
    c.router.policy = PolicyKind::CacheAware;
    c.router.cache_feedback = mode;
    let g = start(c).await;
    let p = words("alfa", 150);
    let sub = format!("{p}{}", words("xray", 600));
    let p2 = format!("{p}and a second turn ");
    ask(&g, &p).await;
    assert!(cached(&ask(&g, &sub).await) > 200);
    assert!(cached(&ask(&g, &p2).await) > 200);
    ask(&g, &words("fill", 1_400)).await;
    // the conversation's third turn: the worker lost it (the filler evicted it), one answer
    // says so
    let r = ask(&g, &format!("{p2}and a third turn ")).await;
    assert!(cached(&r) < 200, "{:?}", r.json()["usage"]);
    answered(&g, &w0.url(), 5.0).await;
    let shortfalls = reports(&g, &w0.url(), "shortfall").await;
    // a second worker joins, idle and empty
    let add = serde_json::json!({ "url": w1.url() }).to_string();
    let r = g.client.send(Method::POST, "/workers", &[JSON], add).await;
    assert!(r.status.is_success(), "{:?}", r.body);
    let client = &g.client;
    let url = w1.url();
    eventually("w1 is healthy", || healthy(client, &url)).await;
    // the sub-agent's next turn: where the index believes its prompt is cached, if anywhere
    let r = ask(&g, &format!("{sub}and its next turn ")).await;
    let to = r.worker().unwrap();
    g.gw.shutdown().await;
    (to, w0.url(), shortfalls)
}

#[tokio::test]
async fn an_evicted_prompt_no_longer_counts_as_cached_after_one_answer() {
    // feedback on: the conversation's shortfall told the index that w0 lost it past the
    // reported length, the sub-agent's branch below it included; only the conversation's head,
    // computed again, counts there now, too little of the sub-agent's prompt to follow: it goes
    // to the emptier worker
    let (to, w0, shortfalls) = evict_then_return(FeedbackMode::On).await;
    assert_eq!(shortfalls, 1.0);
    assert_ne!(to, w0);
    // measure only: the same shortfall is seen, the index still believes w0 holds the sub-agent
    let (to, w0, shortfalls) = evict_then_return(FeedbackMode::Measure).await;
    assert_eq!(shortfalls, 1.0);
    assert_eq!(to, w0);
}

#[tokio::test]
async fn a_flush_is_noticed_after_one_answer() {
    let w0 = sim("w0", 100_000).await;
    let mut c = config(std::slice::from_ref(&w0));
    c.router.policy = PolicyKind::TtftAware;
    c.router.cache_feedback = FeedbackMode::On;
    let g = start(c).await;
    let url = w0.url();
    let (q, p) = (words("quiz", 200), words("papa", 200));
    ask(&g, &q).await;
    ask(&g, &p).await;
    let p2 = format!("{p}second ");
    assert!(cached(&ask(&g, &p2).await) > 100);
    // a sub-agent's branch of P
    let branch = format!("{p}{}", words("branch", 50));
    assert!(cached(&ask(&g, &branch).await) > 100);
    answered(&g, &url, 4.0).await;
    assert_eq!(reports(&g, &url, "confirmed").await, 4.0);
    // flushed behind the gateway's back (another client, an operator)
    let flushed = TestClient::new(w0.addr())
        .send(Method::POST, "/flush_cache", &[], Bytes::new())
        .await;
    assert_eq!(flushed.status, 200, "{:?}", flushed.body);
    // one answer after the flush: reported 0 where the index predicted P's second turn
    let r = ask(&g, &format!("{p2}third ")).await;
    assert_eq!(cached(&r), 0);
    answered(&g, &url, 5.0).await;
    assert_eq!(reports(&g, &url, "shortfall").await, 1.0);
    // the worker has just computed that prompt again; the branch hanging below what it lost
    // (not used since) is dropped
    let corrections = format!(r#"berth_prefix_index_corrections_total{{worker="{url}"}}"#);
    let m = metrics(&g.gw).await;
    assert_eq!(sample(&m, &corrections), Some(1.0), "{m}");
    assert!(
        sample(
            &m,
            r#"berth_prefix_index_evicted_chunks_total{reason="reported"}"#
        )
        .unwrap()
            > 0.0
    );
    // so the branch's next turn is predicted to find only P there, as it does
    assert!(cached(&ask(&g, &format!("{branch}more ")).await) > 100);
    answered(&g, &url, 6.0).await;
    assert_eq!(reports(&g, &url, "confirmed").await, 5.0);
    assert_eq!(reports(&g, &url, "shortfall").await, 1.0);
    // Q shares nothing with P: its own first answer after the flush tells, and then it is
    // cached again
    let r = ask(&g, &q).await;
    assert_eq!(cached(&r), 0);
    answered(&g, &url, 7.0).await;
    assert_eq!(reports(&g, &url, "shortfall").await, 2.0);
    assert!(cached(&ask(&g, &format!("{q}again ")).await) > 100);
    answered(&g, &url, 8.0).await;
    assert_eq!(reports(&g, &url, "confirmed").await, 6.0);
    // a flush is no capacity change: the learned KV estimate stays at the reported capacity
    // (listed), which is still what routing assumes
    let list = g.client.get("/workers", &[]).await.json();
    let w = &list["workers"][0];
    assert_eq!(w["kv_capacity_tokens"], 100_000);
    let learned = w["learned_kv_tokens"].as_u64().unwrap();
    assert_eq!(learned, 100_000, "{w}");
    assert_eq!(w["effective_kv_tokens"].as_u64(), Some(100_000));
    let m = metrics(&g.gw).await;
    for (name, v) in [("effective", 100_000), ("learned", learned)] {
        assert_eq!(
            sample(
                &m,
                &format!(r#"berth_worker_{name}_kv_tokens{{worker="{url}"}}"#)
            ),
            Some(v as f64),
            "{m}"
        );
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn other_policies_and_off_read_nothing() {
    for (policy, mode) in [
        (PolicyKind::RoundRobin, FeedbackMode::On),
        (PolicyKind::TtftAware, FeedbackMode::Off),
    ] {
        let w = sims(1).await;
        let mut c = config(&w);
        c.router.policy = policy;
        c.router.cache_feedback = mode;
        let g = start(c).await;
        for _ in 0..3 {
            ask(&g, &words("same", 100)).await;
        }
        let m = metrics(&g.gw).await;
        assert!(!m.contains("berth_cached_tokens_reports_total{"), "{m}");
        g.gw.shutdown().await;
    }
}

mod stream {
    //! A worker whose stream pauses after its first event until the test lets it go on.

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::watch;

    const FIRST: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
    const USAGE: &str = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\ndata: [DONE]\n\n";

    async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < end + 4 + len {
                    let mut chunk = [0u8; 4096];
                    let n = s.read(&mut chunk).await.ok()?;
                    if n == 0 {
                        return None;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                buf.drain(..end + 4 + len);
                return Some(head.split(' ').nth(1)?.to_owned());
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn chunk(data: &str) -> String {
        format!("{:x}\r\n{data}\r\n", data.len())
    }

    async fn serve(mut s: TcpStream, go: watch::Receiver<bool>) {
        let mut buf = Vec::new();
        while let Some(path) = read_request(&mut s, &mut buf).await {
            if path.starts_with("/v1/chat/completions") {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let _ = s
                    .write_all(format!("{head}{}", chunk(FIRST)).as_bytes())
                    .await;
                let mut go = go.clone();
                let _ = go.wait_for(|g| *g).await;
                let rest = format!("{}0\r\n\r\n", chunk(USAGE));
                let _ = s.write_all(rest.as_bytes()).await;
            } else {
                let body = if path.starts_with("/v1/models") {
                    r#"{"object":"list","data":[{"id":"sim-model","object":"model"}]}"#
                } else {
                    "{}"
                };
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            }
        }
    }

    #[tokio::test]
    async fn a_streams_usage_is_read_and_no_byte_waits_for_it() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(serve(s, rx.clone()));
            }
        });
        let mut c = berth_gateway::GatewayConfig::new(vec![url.clone()]);
        c.router.policy = PolicyKind::TtftAware;
        c.worker_startup_timeout = Duration::from_secs(5);
        c.shutdown_grace = Duration::from_secs(1);
        let g = start(c).await;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Full<Bytes>>();
        let req = http::Request::post(format!("http://{}/v1/chat/completions", g.gw.addr()))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(Bytes::from(
                body("a streamed question", true).to_string(),
            )))
            .unwrap();
        let resp = client.request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        // the first event reaches the client while the worker still holds the rest back
        let mut got = Vec::new();
        let guard = Duration::from_secs(20);
        while !got.ends_with(b"\n\n") {
            let frame = tokio::time::timeout(guard, http_body_util::BodyExt::frame(&mut body))
                .await
                .expect("the first event was passed on before the stream ended")
                .unwrap()
                .unwrap();
            if let Ok(d) = frame.into_data() {
                got.extend_from_slice(&d);
            }
        }
        assert_eq!(got, FIRST.as_bytes());
        tx.send(true).unwrap();
        let rest = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        // what the client gets is what the worker sent, byte for byte
        got.extend_from_slice(&rest);
        assert_eq!(got, format!("{FIRST}{USAGE}").as_bytes());
        // the usage event was read: nothing predicted for a first request, 8 reported
        let gw = &g.gw;
        eventually("the usage was read", || async {
            let m = metrics(gw).await;
            sample(
                &m,
                &format!(r#"berth_cached_tokens_reported_total{{worker="{url}",source="index"}}"#),
            ) == Some(8.0)
        })
        .await;
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(
                &m,
                &format!(
                    r#"berth_cached_tokens_reports_total{{worker="{url}",verdict="confirmed"}}"#
                ),
            ),
            Some(1.0),
            "{m}"
        );
        g.gw.shutdown().await;
    }
}
