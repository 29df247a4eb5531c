//! The handle's lifetime: panics in handlers reach `join`/`shutdown`, drop stops the worker.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::SimWorker;

async fn get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nhost: sim\r\nconnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn shutdown_reraises_a_handler_panic() {
    let handle = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let reply = get(handle.addr(), "/sim/test-panic")
        .await
        .unwrap_or_default();
    assert!(
        !reply.contains("200 OK"),
        "the panicking handler answers nothing"
    );
    assert!(
        get(handle.addr(), "/health")
            .await
            .unwrap()
            .contains("200 OK"),
        "others still served"
    );
    let err = tokio::spawn(handle.shutdown()).await.unwrap_err();
    assert!(err.is_panic());
    let payload = err.into_panic();
    let message = payload.downcast_ref::<&str>().copied().unwrap_or_default();
    assert_eq!(message, "test-only panic route");
}

#[tokio::test]
async fn dropping_the_handle_stops_the_worker() {
    let handle = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let addr = handle.addr();
    assert!(get(addr, "/health").await.unwrap().contains("200 OK"));
    drop(handle);
    let mut refused = false;
    for _ in 0..1000 {
        if TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(refused, "a dropped worker stops listening");
}
