//! One client connection: TLS if configured, then HTTP/1.1 (`h1/`) until it closes or the
//! gateway stops; and the Prometheus endpoint's connections (hyper's server: off the request
//! path).

use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::io::accept_backoff;
use crate::coarse_timer::CoarseTimer;
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
        let (r, w) = stream.into_split();
        return super::h1::serve(r, w, io, timer, stop).await;
    };
    if let Some(tls) = crate::tls::handshake(&acceptor, stream).await {
        let (r, w) = tokio::io::split(tls);
        super::h1::serve(r, w, io, timer, stop).await;
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
