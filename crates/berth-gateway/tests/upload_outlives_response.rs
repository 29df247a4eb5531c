//! A worker may answer before the client's streamed upload has ended (it needs only the start of
//! the body, or refuses early). The response then ends while the connection is still carrying
//! the upload: it must not go back to the pool, or the next request would wait behind another
//! client's upload (up to that client's body timeout) on a connection that is not free.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use berth_gateway::GatewayConfig;
use berth_gateway::routing::PolicyKind;
use common::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A worker that answers every generation request at once, without reading its body, and
/// counts the connections generation requests arrive on.
async fn eager_worker() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let generation_conns = Arc::new(AtomicUsize::new(0));
    let counted = generation_conns.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(serve(stream, counted.clone()));
        }
    });
    (url, generation_conns)
}

async fn serve(stream: TcpStream, generation_conns: Arc<AtomicUsize>) {
    let mut io = BufReader::new(stream);
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if io.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.to_ascii_lowercase());
        }
        let path = head[0].split(' ').nth(1).unwrap_or("/").to_owned();
        if path.starts_with("/v1/chat") {
            // the connection ends with this request: counted once
            generation_conns.fetch_add(1, Ordering::SeqCst);
            let body = br#"{"ok":true}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let w = io.get_mut();
            w.write_all(head.as_bytes()).await.unwrap();
            w.write_all(body).await.unwrap();
            // the body is never read as a request: drain the connection to its end
            let mut sink = [0u8; 4096];
            while io.read(&mut sink).await.unwrap_or(0) > 0 {}
            return;
        }
        let body: &[u8] = if path.starts_with("/v1/models") {
            br#"{"object":"list","data":[{"id":"sim-model","object":"model"}]}"#
        } else {
            b"{}"
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let w = io.get_mut();
        w.write_all(head.as_bytes()).await.unwrap();
        w.write_all(body).await.unwrap();
    }
}

#[tokio::test]
async fn a_connection_still_uploading_is_not_reused() {
    let (url, generation_conns) = eager_worker().await;
    let mut c = GatewayConfig::new(vec![url]);
    c.router.policy = PolicyKind::RoundRobin;
    c.worker_startup_timeout = Duration::from_secs(5);
    c.body_timeouts.idle = Some(Duration::from_secs(120));
    c.body_timeouts.total = Some(Duration::from_secs(120));
    let g = start(c).await;

    // A client whose chunked body starts (the model is in the first chunk) and never ends.
    let mut slow = TcpStream::connect(g.gw.addr()).await.unwrap();
    let chunk = r#"{"model":"sim-model","messages":[{"role":"user","content":"hi"}"#;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
        chunk.len()
    );
    slow.write_all(req.as_bytes()).await.unwrap();
    // Its response comes back whole while its upload is still open.
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(br#"{"ok":true}"#) {
        let n = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf))
            .await
            .expect("the eager worker's answer reached the client")
            .unwrap();
        assert!(n > 0, "gateway closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );

    // The next request must not queue behind that upload (TestClient gives up after 20 s; the
    // stalled upload would hold the connection for 120 s).
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        generation_conns.load(Ordering::SeqCst),
        2,
        "the second request went on its own connection"
    );
    drop(slow);
    g.gw.shutdown().await;
}
