//! Whole exchanges against a scripted worker on the other end of an in-memory pipe.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::super::exchange::{RespBody, SendFail};
use super::super::head::ReqHead;
use super::super::{GiveBack, H1Conn, H1Error, send};
use super::framing::{CHUNKED, keep_all};

// ---- exchanges

/// Records the connections handed back.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<H1Conn<DuplexStream>>>>);

impl GiveBack<DuplexStream> for Kept {
    fn give_back(self, conn: H1Conn<DuplexStream>) {
        self.0.lock().unwrap().push(conn);
    }
}

impl Kept {
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn take(&self) -> H1Conn<DuplexStream> {
        self.0.lock().unwrap().pop().unwrap()
    }
}

/// Reads one request head (and `body` more bytes) from the worker's end.
async fn read_request(worker: &mut DuplexStream, body: usize) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            worker.read(&mut byte).await.unwrap(),
            1,
            "request ended early"
        );
        got.push(byte[0]);
    }
    let mut rest = vec![0u8; body];
    worker.read_exact(&mut rest).await.unwrap();
    got.extend_from_slice(&rest);
    String::from_utf8(got).unwrap()
}

/// Sends `req` as it is (every header, its `Host` as the worker's).
async fn send_req<B, R>(
    conn: H1Conn<DuplexStream>,
    req: Request<B>,
    home: R,
) -> Result<http::Response<Box<RespBody<DuplexStream, B, R>>>, SendFail>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
    R: GiveBack<DuplexStream>,
{
    let (parts, body) = req.into_parts();
    let fields = crate::fields::Fields::from_map(&parts.headers);
    let head = ReqHead {
        method: &parts.method,
        prefix: "",
        path: parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .as_bytes(),
        host: parts.headers.get(http::header::HOST),
        headers: &fields,
        forward: keep_all,
        length: None,
    };
    send(conn, &head, body, home).await
}

fn post(body: &'static str) -> Request<Full<Bytes>> {
    Request::post("/v1/chat/completions")
        .header("host", "worker")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

#[tokio::test]
async fn a_length_framed_exchange_hands_its_connection_back() {
    let (gw, mut worker) = tokio::io::duplex(4096);
    let kept = Kept::default();
    let w = tokio::spawn(async move {
        let req = read_request(&mut worker, 5).await;
        worker
            .write_all(
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            )
            .await
            .unwrap();
        (req, worker)
    });
    let resp = send_req(H1Conn::new(gw), post("hello"), kept.clone())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.body().size_hint().exact(), Some(2));
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "ok");
    let (req, mut worker) = w.await.unwrap();
    assert_eq!(
        req,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: worker\r\ncontent-length: 5\r\n\r\nhello"
    );
    assert_eq!(kept.count(), 1, "kept for the next request");
    // the kept connection serves the next request; it is known as reused
    let conn = kept.take();
    assert!(conn.reused);
    let w = tokio::spawn(async move {
        read_request(&mut worker, 2).await;
        worker
            .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .await
            .unwrap();
        worker
    });
    let resp = send_req(conn, post("hi"), kept.clone()).await.unwrap();
    assert_eq!(resp.status(), 204);
    assert!(resp.body().is_end_stream());
    drop(resp);
    assert_eq!(
        kept.count(),
        1,
        "an empty body never polled still hands it back"
    );
    drop(w.await.unwrap());
}

#[tokio::test]
async fn a_chunked_response_is_decoded_and_the_connection_kept() {
    let (gw, mut worker) = tokio::io::duplex(64);
    let kept = Kept::default();
    let w = tokio::spawn(async move {
        read_request(&mut worker, 5).await;
        worker
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        for piece in CHUNKED.chunks(7) {
            worker.write_all(piece).await.unwrap();
            tokio::task::yield_now().await;
        }
        worker
    });
    let resp = send_req(H1Conn::new(gw), post("hello"), kept.clone())
        .await
        .unwrap();
    assert_eq!(
        resp.body().fields().unwrap().to_map()["transfer-encoding"],
        "chunked"
    );
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "hello, a chunk of 25 bytes....");
    assert_eq!(kept.count(), 1);
    drop(w.await.unwrap());
}

#[tokio::test]
async fn a_close_delimited_response_ends_with_the_connection() {
    let (gw, mut worker) = tokio::io::duplex(64);
    let kept = Kept::default();
    tokio::spawn(async move {
        read_request(&mut worker, 5).await;
        worker
            .write_all(b"HTTP/1.1 200 OK\r\n\r\nall of ")
            .await
            .unwrap();
        worker.write_all(b"it").await.unwrap();
        // dropped: the end of the body
    });
    let resp = send_req(H1Conn::new(gw), post("hello"), kept.clone())
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "all of it");
    assert_eq!(
        kept.count(),
        0,
        "a close-delimited body's connection is over"
    );
}

#[tokio::test]
async fn a_worker_that_closes_mid_body_breaks_the_body() {
    let (gw, mut worker) = tokio::io::duplex(64);
    let kept = Kept::default();
    tokio::spawn(async move {
        read_request(&mut worker, 5).await;
        worker
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npart")
            .await
            .unwrap();
    });
    let resp = send_req(H1Conn::new(gw), post("hello"), kept.clone())
        .await
        .unwrap();
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "part");
    let err = body.frame().await.unwrap().unwrap_err();
    assert!(matches!(err, H1Error::Closed(_)), "{err}");
    assert_eq!(kept.count(), 0);
}

#[tokio::test]
async fn a_head_response_has_no_body_whatever_its_length() {
    let (gw, mut worker) = tokio::io::duplex(64);
    let kept = Kept::default();
    tokio::spawn(async move {
        read_request(&mut worker, 0).await;
        worker
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
            .await
            .unwrap();
        std::future::pending::<()>().await;
    });
    let req = Request::head("/").body(Full::new(Bytes::new())).unwrap();
    let resp = send_req(H1Conn::new(gw), req, kept.clone()).await.unwrap();
    assert_eq!(
        resp.body().fields().unwrap().to_map()["content-length"],
        "100"
    );
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert!(body.is_empty());
    assert_eq!(kept.count(), 1);
}

#[tokio::test]
async fn a_reused_connection_closed_before_answering_is_stale_and_a_fresh_one_is_not() {
    for reused in [true, false] {
        let (gw, mut worker) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            read_request(&mut worker, 5).await;
            // closed unanswered, as llama-server does after a stream
        });
        let mut conn = H1Conn::new(gw);
        conn.reused = reused;
        let fail = send_req(conn, post("hello"), ()).await.unwrap_err();
        assert_eq!(fail.stale, reused, "{}", fail.error);
    }
    // an answer that broke off after its first byte is no stale connection
    let (gw, mut worker) = tokio::io::duplex(4096);
    tokio::spawn(async move {
        read_request(&mut worker, 5).await;
        worker.write_all(b"HTTP/1.1 2").await.unwrap();
    });
    let mut conn = H1Conn::new(gw);
    conn.reused = true;
    let fail = send_req(conn, post("hello"), ()).await.unwrap_err();
    assert!(!fail.stale, "{}", fail.error);
}

/// A request body the test feeds frame by frame (unknown length: sent chunked).
struct Fed(tokio::sync::mpsc::Receiver<Bytes>);

impl Body for Fed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

#[tokio::test]
async fn a_streamed_upload_goes_chunked_and_keeps_going_after_an_early_answer() {
    let (gw, mut worker) = tokio::io::duplex(4096);
    let kept = Kept::default();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(Bytes::from_static(b"first")).await.unwrap();
    let w = tokio::spawn(async move {
        let head = read_request(&mut worker, 0).await;
        let mut first = [0u8; 10];
        worker.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"5\r\nfirst\r\n");
        // the worker answers before the upload has ended
        worker
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nea")
            .await
            .unwrap();
        let mut rest = [0u8; 21];
        worker.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"b\r\nsecond part\r\n0\r\n\r\n");
        worker.write_all(b"rly").await.unwrap();
        head
    });
    let req = Request::post("/up")
        .header("host", "w")
        .body(Fed(rx))
        .unwrap();
    let resp = send_req(H1Conn::new(gw), req, kept.clone()).await.unwrap();
    let mut body = resp.into_body();
    assert_eq!(
        body.frame().await.unwrap().unwrap().into_data().unwrap(),
        "ea"
    );
    tx.send(Bytes::from_static(b"second part")).await.unwrap();
    drop(tx);
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(rest, "rly");
    let head = w.await.unwrap();
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    assert_eq!(
        kept.count(),
        1,
        "the upload ended before the response: kept"
    );
}

#[tokio::test]
async fn a_response_that_ends_before_its_upload_closes_the_connection() {
    let (gw, mut worker) = tokio::io::duplex(4096);
    let kept = Kept::default();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        read_request(&mut worker, 0).await;
        worker
            .write_all(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        std::future::pending::<()>().await;
    });
    let req = Request::post("/up").body(Fed(rx)).unwrap();
    let resp = send_req(H1Conn::new(gw), req, kept.clone()).await.unwrap();
    assert_eq!(resp.status(), 413);
    drop(resp.into_body().collect().await.unwrap());
    assert_eq!(
        kept.count(),
        0,
        "no other request may queue behind this upload"
    );
    drop(tx);
}

#[tokio::test]
async fn a_body_longer_than_its_content_length_is_refused() {
    let (gw, _worker) = tokio::io::duplex(4096);
    let req = Request::post("/")
        .header("content-length", "2")
        .body(Full::new(Bytes::from_static(b"too long")))
        .unwrap();
    let fail = send_req(H1Conn::new(gw), req, ()).await.unwrap_err();
    assert!(matches!(fail.error, H1Error::Request(_)), "{}", fail.error);
    assert!(!fail.stale);
}

#[tokio::test]
async fn an_idle_connection_the_worker_closed_is_not_open() {
    let (gw, worker) = tokio::io::duplex(64);
    let mut conn = H1Conn::new(gw);
    assert!(conn.idle_open());
    drop(worker);
    assert!(!conn.idle_open());
}
