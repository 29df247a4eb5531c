//! The client side's HTTP/1.1 server connection (`server/h1/`), bytes in over a real socket:
//! chunked request bodies split at every point, pipelined requests answered in order,
//! `Expect: 100-continue`, HTTP/1.0 and `Connection: close`, unread bodies drained or the
//! connection closed, refused heads (400 and 431 with the JSON error shape, counted), and an
//! idle connection closed on shutdown.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CHAT: &str =
    r#"{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"hello there"}]}"#;

/// A response as read off the wire.
#[derive(Debug)]
struct Wire {
    status: u16,
    /// The head, lowercased.
    head: String,
    body: Vec<u8>,
}

impl Wire {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::trim)
        })
    }
}

/// Reads more bytes into `buf`; `false` at the end of the stream.
async fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
        .await
        .expect("an answer within 10 s")
        .unwrap_or(0);
    buf.extend_from_slice(&chunk[..n]);
    n > 0
}

/// The next response off `s` (content-length or chunked body); `None` if the connection ended
/// first. Bytes after it stay in `buf`.
async fn response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Wire> {
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if !fill(s, buf).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
    buf.drain(..end);
    let status = head[9..12].parse().unwrap();
    let mut w = Wire {
        status,
        head,
        body: Vec::new(),
    };
    if status == 100 {
        return Some(w);
    }
    if let Some(len) = w.header("content-length") {
        let len: usize = len.parse().unwrap();
        while buf.len() < len {
            assert!(fill(s, buf).await, "the body ended early");
        }
        w.body = buf.drain(..len).collect();
    } else if w.header("transfer-encoding") == Some("chunked") {
        loop {
            let line = loop {
                if let Some(i) = buf.windows(2).position(|x| x == b"\r\n") {
                    break i;
                }
                assert!(fill(s, buf).await, "the body ended early");
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&buf[..line]).unwrap(), 16).unwrap();
            while buf.len() < line + 2 + size + 2 {
                assert!(fill(s, buf).await, "the body ended early");
            }
            w.body.extend_from_slice(&buf[line + 2..line + 2 + size]);
            buf.drain(..line + 2 + size + 2);
            if size == 0 {
                break;
            }
        }
    } else {
        while fill(s, buf).await {}
        w.body = std::mem::take(buf);
    }
    Some(w)
}

/// Whether the gateway closed the connection (reads nothing more).
async fn closed(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    buf.is_empty() && !fill(s, buf).await
}

fn chat_head(extra: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n{extra}"
    )
}

fn chat_request(extra: &str) -> String {
    format!(
        "{}content-length: {}\r\n\r\n{CHAT}",
        chat_head(extra),
        CHAT.len()
    )
}

fn assert_chat_answer(w: &Wire) {
    assert_eq!(w.status, 200, "{w:?}");
    let v: serde_json::Value = serde_json::from_slice(&w.body).unwrap();
    assert_eq!(v["object"], "chat.completion", "{v}");
}

async fn gateway() -> (Running, Vec<berth_sim::SimHandle>) {
    let w = sims(1).await;
    (start(config(&w)).await, w)
}

#[tokio::test]
async fn a_chunked_body_split_at_every_point_is_read_whole() {
    let (g, _w) = gateway().await;
    let (a, b) = CHAT.split_at(20);
    let body = format!(
        "{:x};ext=1\r\n{a}\r\n{:X}\r\n{b}\r\n0\r\nx-trailer: t\r\n\r\n",
        a.len(),
        b.len()
    );
    let wire = format!("{}transfer-encoding: chunked\r\n\r\n{body}", chat_head(""));
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let mut buf = Vec::new();
    // one connection for every split: each request also checks keep-alive
    for at in 1..wire.len() {
        s.write_all(&wire.as_bytes()[..at]).await.unwrap();
        s.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        s.write_all(&wire.as_bytes()[at..]).await.unwrap();
        let w = response(&mut s, &mut buf).await.expect("an answer");
        assert_chat_answer(&w);
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let mut all = String::new();
    for i in 0..4 {
        all.push_str(&chat_request(&format!("x-request-id: req-{i}\r\n")));
    }
    all.push_str("GET /liveness HTTP/1.1\r\nhost: gw\r\nx-request-id: req-last\r\n\r\n");
    s.write_all(all.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    for i in 0..4 {
        let w = response(&mut s, &mut buf).await.expect("an answer");
        assert_chat_answer(&w);
        assert_eq!(w.header("x-request-id"), Some(format!("req-{i}").as_str()));
    }
    let w = response(&mut s, &mut buf).await.expect("an answer");
    assert_eq!(
        (w.status, w.header("x-request-id")),
        (200, Some("req-last"))
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn expect_100_continue_gets_its_100_before_the_body_is_sent() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let head = format!(
        "{}expect: 100-continue\r\ncontent-length: {}\r\n\r\n",
        chat_head(""),
        CHAT.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let w = response(&mut s, &mut buf).await.expect("a 100");
    assert_eq!(w.status, 100, "{w:?}");
    s.write_all(CHAT.as_bytes()).await.unwrap();
    assert_chat_answer(&response(&mut s, &mut buf).await.expect("an answer"));
    // the connection goes on
    s.write_all(chat_request("").as_bytes()).await.unwrap();
    assert_chat_answer(&response(&mut s, &mut buf).await.expect("an answer"));
    g.gw.shutdown().await;
}

#[tokio::test]
async fn expect_100_continue_answered_without_reading_the_body_closes() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    // 405: the body is never read, so no 100 is sent and the connection cannot go on
    s.write_all(
        b"PUT /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nexpect: 100-continue\r\ncontent-length: 5\r\n\r\n",
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    let w = response(&mut s, &mut buf).await.expect("an answer");
    assert_eq!(w.status, 405, "{w:?}");
    assert!(closed(&mut s, &mut buf).await);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn http_1_0_closes_after_the_response_unless_asked_to_keep_alive() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let req = chat_request("").replace("HTTP/1.1", "HTTP/1.0");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let w = response(&mut s, &mut buf).await.expect("an answer");
    assert_chat_answer(&w);
    assert!(w.head.starts_with("http/1.1 200"), "{w:?}");
    assert_eq!(w.header("connection"), Some("close"));
    assert!(closed(&mut s, &mut buf).await);

    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let req = chat_request("connection: keep-alive\r\n").replace("HTTP/1.1", "HTTP/1.0");
    for _ in 0..2 {
        s.write_all(req.as_bytes()).await.unwrap();
        let w = response(&mut s, &mut buf).await.expect("an answer");
        assert_chat_answer(&w);
        assert_eq!(w.header("connection"), Some("keep-alive"));
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn connection_close_ends_the_connection_after_the_response() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    // a pipelined request after it is not answered
    let req = format!(
        "{}{}",
        chat_request("connection: close\r\n"),
        chat_request("")
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let w = response(&mut s, &mut buf).await.expect("an answer");
    assert_chat_answer(&w);
    assert_eq!(w.header("connection"), Some("close"));
    assert!(closed(&mut s, &mut buf).await);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn an_unread_body_is_drained_when_it_is_small_and_has_arrived() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    // `/liveness` never reads the body it was sent; the next request still parses
    let req = "GET /liveness HTTP/1.1\r\nhost: gw\r\ncontent-length: 11\r\n\r\nhello world";
    s.write_all(format!("{req}{}", chat_request("")).as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        response(&mut s, &mut buf).await.expect("an answer").status,
        200
    );
    assert_chat_answer(&response(&mut s, &mut buf).await.expect("an answer"));

    // a body that has not arrived (or is too large to drain) ends the connection instead
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    s.write_all(b"GET /liveness HTTP/1.1\r\nhost: gw\r\ncontent-length: 1000000\r\n\r\nabc")
        .await
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        response(&mut s, &mut buf).await.expect("an answer").status,
        200
    );
    assert!(closed(&mut s, &mut buf).await);
    g.gw.shutdown().await;
}

/// Sends `raw` on a fresh connection; the refusal must come with the JSON error shape and a
/// closed connection.
async fn refused(g: &Running, raw: &[u8]) -> Wire {
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut buf = Vec::new();
    let w = response(&mut s, &mut buf).await.expect("an answer");
    let v: serde_json::Value = serde_json::from_slice(&w.body).unwrap();
    assert_eq!(v["error"]["code"], "bad_request", "{v}");
    assert_eq!(w.header("x-smg-error-code"), Some("bad_request"));
    assert!(w.header("x-request-id").is_some());
    assert!(closed(&mut s, &mut buf).await);
    w
}

#[tokio::test]
async fn bad_heads_get_400_and_oversized_heads_431_with_the_json_error_shape() {
    let (g, _w) = gateway().await;
    for raw in [
        &b"GARBAGE\r\n\r\n"[..],
        b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: x\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
        b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    ] {
        let w = refused(&g, raw).await;
        assert_eq!(w.status, 400, "{}: {w:?}", String::from_utf8_lossy(raw));
    }
    let long = format!(
        "GET /liveness HTTP/1.1\r\nx-long: {}\r\n\r\n",
        "a".repeat(70_000)
    );
    assert_eq!(refused(&g, long.as_bytes()).await.status, 431);
    let many: String = (0..101).map(|i| format!("x-h{i}: v\r\n")).collect();
    let many = format!("GET /liveness HTTP/1.1\r\n{many}\r\n");
    assert_eq!(refused(&g, many.as_bytes()).await.status, 431);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            "smg_http_responses_total{status_code=\"431\",error_code=\"bad_request\"}"
        ),
        Some(2.0),
        "{m}"
    );
    // the gateway still serves
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_chunked_body_with_bad_framing_is_refused_and_the_connection_closed() {
    let (g, _w) = gateway().await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let req = format!(
        "{}transfer-encoding: chunked\r\n\r\nzz\r\n{CHAT}\r\n0\r\n\r\n",
        chat_head("")
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let w = response(&mut s, &mut buf).await.expect("an answer");
    assert_eq!(w.status, 400, "{w:?}");
    assert!(closed(&mut s, &mut buf).await);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_an_idle_keep_alive_connection_at_once() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.shutdown_grace = Duration::from_secs(3600);
    let g = start(c).await;
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    s.write_all(chat_request("").as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    assert_chat_answer(&response(&mut s, &mut buf).await.expect("an answer"));
    // an idle connection must not hold the shutdown for the (hour-long) grace period
    tokio::time::timeout(Duration::from_secs(30), g.gw.shutdown())
        .await
        .expect("shutdown without waiting for the idle connection");
    assert!(closed(&mut s, &mut buf).await);
}
