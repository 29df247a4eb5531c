//! The prefill worker's bootstrap listener and the decode worker's wait on it.
//!
//! `GET /bootstrap/room/{room}?wait_ms=N` answers `200 {"prompt_tokens", "cached_tokens"}` once
//! the room is ready (and takes it), or `404` when it is not ready within `N` ms (capped at a
//! minute). The decode side sends one such request with the time it has left, re-connecting
//! briefly while the listener is unreachable, all within its `--bootstrap-timeout-ms`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{Bootstrap, RoomInfo};
use crate::state::{Shared, Stop};

/// Longest single long-poll the listener holds.
const MAX_POLL: Duration = Duration::from_secs(60);
/// Pause before re-connecting to a listener that refused the connection.
const RECONNECT: Duration = Duration::from_millis(50);

/// Serves the bootstrap listener until the worker stops (its connections are cut then, as a
/// dying process's would be).
pub(crate) async fn serve_bootstrap(listener: TcpListener, shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = async { drop(stop.wait_for(|s| *s != Stop::Run).await) } => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let shared = Arc::clone(&shared);
                conns.spawn(async move {
                    let svc = service_fn(move |req| {
                        let shared = Arc::clone(&shared);
                        async move { Ok::<_, Infallible>(answer(&shared, req).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

async fn answer(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let room = path
        .strip_prefix("/bootstrap/room/")
        .and_then(|r| r.parse::<u64>().ok());
    let (status, body) = match (req.method(), room) {
        (&Method::GET, Some(room)) => {
            let wait = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("wait_ms="))
                .and_then(|ms| ms.parse::<u64>().ok())
                .map_or(Duration::ZERO, Duration::from_millis)
                .min(MAX_POLL);
            match shared.rooms.take(room, wait).await {
                Some(info) => (
                    StatusCode::OK,
                    serde_json::json!({
                        "room": room,
                        "prompt_tokens": info.prompt_tokens,
                        "cached_tokens": info.cached_tokens,
                    }),
                ),
                None => (
                    StatusCode::NOT_FOUND,
                    serde_json::json!({"error": format!("room {room} is not ready")}),
                ),
            }
        }
        _ => (
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": format!("no route for {path}")}),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp
}

/// Waits (at most `timeout`) for the prefill worker at `b.host:b.port` to finish room `b.room`;
/// `Err` says why the KV cache never came.
pub(crate) async fn wait_for_room(b: &Bootstrap, timeout: Duration) -> Result<RoomInfo, String> {
    let deadline = Instant::now() + timeout;
    let target = if b.host.contains(':') {
        format!("[{}]:{}", b.host, b.port)
    } else {
        format!("{}:{}", b.host, b.port)
    };
    let mut last = String::from("no answer");
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "KV transfer for bootstrap room {} from {target} did not arrive within {} ms \
                 ({last})",
                b.room,
                timeout.as_millis()
            ));
        }
        match tokio::time::timeout(left, poll(&target, b.room, left)).await {
            Ok(Ok(Some(info))) => return Ok(info),
            Ok(Ok(None)) => last = "room not ready".to_owned(),
            Ok(Err(e)) => {
                last = e;
                tokio::time::sleep(RECONNECT.min(left)).await;
            }
            Err(_) => last = "room not ready".to_owned(),
        }
    }
}

/// One long-poll; `Ok(None)`: the listener answered that the room is not ready.
async fn poll(target: &str, room: u64, wait: Duration) -> Result<Option<RoomInfo>, String> {
    // An IP address needs no resolver round trip (a blocking-pool hop per request).
    let connected = match target.parse::<std::net::SocketAddr>() {
        Ok(addr) => tokio::net::TcpStream::connect(addr).await,
        Err(_) => tokio::net::TcpStream::connect(target).await,
    };
    let mut stream = connected.map_err(|e| format!("bootstrap listener {target}: {e}"))?;
    let req = format!(
        "GET /bootstrap/room/{room}?wait_ms={} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n",
        wait.as_millis()
    );
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| format!("bootstrap listener {target}: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .map_err(|e| format!("bootstrap listener {target}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split(' ').nth(1).unwrap_or("");
    if status == "404" {
        return Ok(None);
    }
    if status != "200" {
        return Err(format!("bootstrap listener {target} answered `{status}`"));
    }
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| format!("bootstrap listener {target}: bad answer: {e}"))?;
    let num = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    Ok(Some(RoomInfo {
        prompt_tokens: num("prompt_tokens"),
        cached_tokens: num("cached_tokens"),
    }))
}
