//! The accept loop: one hyper HTTP/1.1 connection task per client, all owned by a `JoinSet` so
//! that stopping the worker cuts every connection (as a dying process would) and a panic in any
//! handler is kept and re-raised by `SimHandle::join`.

use std::any::Any;
use std::convert::Infallible;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinError, JoinSet};

use crate::state::{Shared, Stop};

/// Serves until the worker is told to stop or exit; re-raises the first handler panic.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let mut conns = JoinSet::new();
    let mut panic: Option<Box<dyn Any + Send>> = None;
    loop {
        tokio::select! {
            _ = async { drop(stop.wait_for(|s| *s != Stop::Run).await) } => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(serve_connection(stream, Arc::clone(&shared)));
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

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    // Small SSE events must leave at once.
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(crate::api::handle(shared, req).await) }
    });
    if let Err(err) = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(%err, "connection ended with an error");
    }
}
