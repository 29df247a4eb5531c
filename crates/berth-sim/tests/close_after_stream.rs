//! The close-after-stream fault (llama-server's habit): a connection that carried a streamed
//! response is dead, its keep-alive headers notwithstanding; the next request on it is dropped.
#![allow(clippy::unwrap_used, missing_docs)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

fn chat(addr: std::net::SocketAddr, stream: bool) -> http::Request<Full<Bytes>> {
    let body = serde_json::json!({
        "model": "sim-model", "stream": stream, "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}]
    });
    http::Request::post("/v1/chat/completions")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

#[tokio::test]
async fn the_request_after_a_stream_on_the_same_connection_is_dropped() {
    let sim = berth_sim::SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    sim.set_close_after_stream(true);
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let (mut sender, conn) = http1::handshake(TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    // A whole response leaves the connection usable.
    let r = sender.send_request(chat(sim.addr(), false)).await.unwrap();
    assert_eq!(r.status(), 200);
    r.into_body().collect().await.unwrap();
    // A stream: its headers promise keep-alive...
    sender.ready().await.unwrap();
    let r = sender.send_request(chat(sim.addr(), true)).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get(http::header::CONNECTION).is_none());
    r.into_body().collect().await.unwrap();
    // ...but the next request on that connection gets no answer.
    sender.ready().await.unwrap();
    let err = sender
        .send_request(chat(sim.addr(), false))
        .await
        .unwrap_err();
    assert!(err.is_incomplete_message(), "{err}");
    assert_eq!(sim.stale_connections_cut(), 1);
    // A new connection is served.
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let (mut sender, conn) = http1::handshake(TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    let r = sender.send_request(chat(sim.addr(), false)).await.unwrap();
    assert_eq!(r.status(), 200);
}
