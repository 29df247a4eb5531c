//! The worker-side HTTP/1 client (`upstream/h1/`) through the whole gateway, against a worker
//! written byte by byte: chunked, close-delimited and informational-first answers reach the
//! client whole; a worker that closes mid-body breaks the client's transfer and counts as a
//! broken worker stream; the connections the worker keeps open are reused.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use berth_gateway::GatewayConfig;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BODY: &str = r#"{"a": 1}"#;

/// A worker answering `/health` and `/v1/models`, 404 to anything else but chat, and chat as
/// its `x-frame` header says. Counts the connections that carried chat requests.
async fn framing_worker() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await.unwrap();
            tokio::spawn(serve(s, count.clone()));
        }
    });
    (url, accepted)
}

/// One request head (lowercased) and its content-length body off `s`; `None` at the end.
async fn next_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < end + len {
        let n = s.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..end + len);
    Some(head)
}

async fn serve(mut s: TcpStream, chat_conns: Arc<AtomicUsize>) {
    let mut buf = Vec::new();
    let mut chatted = false;
    while let Some(head) = next_request(&mut s, &mut buf).await {
        let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
        if path == "/v1/chat/completions" && !chatted {
            chatted = true;
            chat_conns.fetch_add(1, Ordering::Relaxed);
        }
        let frame = head
            .lines()
            .find_map(|l| l.strip_prefix("x-frame:"))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default();
        let reply = match (path.as_str(), frame.as_str()) {
            ("/health", _) => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned(),
            ("/v1/models", _) => {
                let m = r#"{"data":[{"id":"sim-model"}]}"#;
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{m}", m.len())
            }
            (p, _) if p != "/v1/chat/completions" => {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned()
            }
            (_, "chunked") => "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                 transfer-encoding: chunked\r\n\r\n3\r\n{\"a\r\n5;x=y\r\n\": 1}\r\n0\r\n\r\n"
                .to_owned(),
            (_, "continue") => format!(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\n{BODY}"
            ),
            (_, "close") => {
                let r = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{BODY}");
                let _ = s.write_all(r.as_bytes()).await;
                return;
            }
            (_, "cut") => {
                let r = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"a\"";
                let _ = s.write_all(r.as_bytes()).await;
                return;
            }
            _ => format!("HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\n{BODY}"),
        };
        if s.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn gateway(url: String) -> Running {
    let mut c = GatewayConfig::new(vec![url]);
    c.worker_startup_timeout = Duration::from_secs(5);
    c.health.interval = Duration::from_secs(60);
    c.shutdown_grace = Duration::from_secs(5);
    start(c).await
}

#[tokio::test]
async fn chunked_close_delimited_and_informational_answers_arrive_whole() {
    let (url, chat_conns) = framing_worker().await;
    let g = gateway(url).await;
    for frame in [
        "length", "chunked", "continue", "close", "chunked", "length",
    ] {
        let r = g
            .client
            .chat(&[("x-frame", frame.as_bytes())], chat_body(None))
            .await;
        assert_eq!(r.status, 200, "{frame}: {:?}", r.body);
        assert_eq!(r.body, BODY, "{frame}");
        assert!(
            r.headers
                .get("transfer-encoding")
                .is_none_or(|v| v == "chunked")
        );
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "smg_router_stale_connection_resends_total"),
        Some(0.0),
        "{m}"
    );
    // one connection before the close-delimited answer ended it, one after
    assert_eq!(
        chat_conns.load(Ordering::Relaxed),
        2,
        "the open connections were reused"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_worker_that_closes_mid_body_breaks_the_transfer() {
    let (url, _) = framing_worker().await;
    let g = gateway(url).await;
    let body = chat_body(None).to_string();
    let mut s = TcpStream::connect(g.client.addr).await.unwrap();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
         x-frame: cut\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    // the client gets no whole answer: nothing, or the head and fewer than the 100 bytes
    let text = String::from_utf8_lossy(&got);
    if let Some(at) = text.find("\r\n\r\n") {
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(got.len() - (at + 4) < 100, "the transfer broke off: {text}");
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "smg_router_upstream_stream_errors_total"),
        Some(1.0),
        "{m}"
    );
    // the next request is served on a fresh connection
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!((r.status.as_u16(), r.body.as_ref()), (200, BODY.as_bytes()));
    g.gw.shutdown().await;
}
