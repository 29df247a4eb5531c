//! One client connection: TLS if configured, then HTTP/1.1 until it closes or the gateway
//! stops; and the Prometheus endpoint's connections.

use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::io::accept_backoff;
use crate::coarse_timer::CoarseTimer;
use crate::service;
use crate::state::{AppState, IoCtx};

/// Serves a client connection; `timer` is the IO loop's header-timeout timer (`None`: no
/// `--header-read-timeout-secs`).
pub(super) async fn serve_connection(
    stream: tokio::net::TcpStream,
    io: Arc<IoCtx>,
    timer: Option<CoarseTimer>,
    stop: watch::Receiver<bool>,
) {
    let Some(acceptor) = io.state.tls.clone() else {
        return serve_http(stream, io, timer, stop).await;
    };
    if let Some(tls) = crate::tls::handshake(&acceptor, stream).await {
        serve_http(tls, io, timer, stop).await;
    }
}

/// Serves HTTP/1.1 on a client connection (plain TCP or TLS).
async fn serve_http<S>(
    stream: S,
    io: Arc<IoCtx>,
    timer: Option<CoarseTimer>,
    mut stop: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = io.state.config.header_read_timeout;
    let svc = service_fn(move |req| service::handle(io.clone(), req));
    let mut builder = http1::Builder::new();
    if let (Some(t), Some(timer)) = (header_timeout, timer) {
        builder.timer(timer).header_read_timeout(t);
    }
    let conn = builder
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

pub(super) async fn serve_metrics(
    listener: TcpListener,
    state: Arc<AppState>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        accept_backoff(&e).await;
                        continue;
                    }
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| {
                        let state = state.clone();
                        async move {
                            let text = state.render_metrics();
                            let mut resp = http::Response::new(crate::proxy::Body::full(text));
                            resp.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                            );
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
            _ = stop.changed() => break,
        }
    }
}
