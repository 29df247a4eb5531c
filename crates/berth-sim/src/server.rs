//! The accept loop: one hyper HTTP/1.1 connection task per client, all owned by a `JoinSet` so
//! that stopping the worker cuts every connection (as a dying process would) and a panic in any
//! handler is kept and re-raised by `SimHandle::join`.

use std::any::Any;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::{JoinError, JoinSet};
use tokio_rustls::TlsAcceptor;

use crate::state::{Shared, Stop};
use crate::stats::Counters;

/// Serves until the worker is told to stop or exit; re-raises the first handler panic.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, tls: Option<TlsAcceptor>) {
    let mut stop = shared.stop.subscribe();
    let mut conns = JoinSet::new();
    let mut panic: Option<Box<dyn Any + Send>> = None;
    loop {
        tokio::select! {
            _ = async { drop(stop.wait_for(|s| *s != Stop::Run).await) } => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(accept_tls(stream, Arc::clone(&shared), tls.clone()));
                }
                Err(err) => {
                    // Typically out of file descriptors: back off briefly instead of spinning.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(done) = conns.join_next(), if !conns.is_empty() => keep_panic(done, &mut panic),
        }
    }
    drop(listener);
    conns.abort_all();
    while let Some(done) = conns.join_next().await {
        keep_panic(done, &mut panic);
    }
    if let Some(payload) = panic {
        std::panic::resume_unwind(payload);
    }
}

fn keep_panic(done: Result<(), JoinError>, panic: &mut Option<Box<dyn Any + Send>>) {
    if let Err(err) = done
        && err.is_panic()
        && panic.is_none()
    {
        *panic = Some(err.into_panic());
    }
}

/// One connection's share of the close-after-stream fault.
#[derive(Debug, Default)]
struct Stale {
    /// The connection carried a streamed response under the fault: it is dead.
    dead: AtomicBool,
    /// A request arrived on the dead connection: cut it.
    cut: Notify,
}

/// Time a client gets for the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

async fn accept_tls(stream: TcpStream, shared: Arc<Shared>, tls: Option<TlsAcceptor>) {
    // Small SSE events must leave at once.
    let _ = stream.set_nodelay(true);
    let Some(acceptor) = tls else {
        return serve_connection(stream, shared).await;
    };
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => serve_connection(tls, shared).await,
        Ok(Err(err)) => tracing::debug!(%err, "TLS handshake failed"),
        Err(_) => tracing::debug!("TLS handshake timed out"),
    }
}

async fn serve_connection<S>(stream: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let stale = Arc::new(Stale::default());
    let service = service_fn({
        let stale = Arc::clone(&stale);
        move |req| {
            let shared = Arc::clone(&shared);
            let stale = Arc::clone(&stale);
            async move {
                if stale.dead.load(Ordering::Relaxed) {
                    Counters::bump(&shared.counters.stale_cut, 1);
                    stale.cut.notify_one();
                    std::future::pending::<()>().await;
                }
                let close_after = shared.faults.get().close_after_stream;
                let resp = crate::api::handle(shared, req).await;
                if close_after && is_stream(&resp) {
                    stale.dead.store(true, Ordering::Relaxed);
                }
                Ok::<_, Infallible>(resp)
            }
        }
    });
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        done = conn => {
            if let Err(err) = done {
                tracing::debug!(%err, "connection ended with an error");
            }
        }
        // Dropping the connection closes the socket with the request unanswered.
        () = stale.cut.notified() => {}
    }
}

fn is_stream<B>(resp: &http::Response<B>) -> bool {
    resp.status().is_success()
        && resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}
