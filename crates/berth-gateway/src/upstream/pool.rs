//! Keep-alive connections to workers, one pool per IO loop.
//!
//! hyper's connection-level HTTP/1 client with a small idle list per worker: a request takes an
//! idle connection (or opens one), and the connection comes back to the list when the response
//! body has been read to its end. A response abandoned mid-body closes its connection, which is
//! also how a client disconnect cancels the worker's request. A request that a stale pooled
//! connection refused before sending anything is re-sent on another connection.
//!
//! A failure on a *reused* connection says so ([`SendError::reused`]): engines such as
//! llama-server close a connection after a streamed reply although their headers promised
//! keep-alive, and a request written on it fails before any response byte. The caller re-sends
//! such a request once on a [`Fresh`] connection to the same worker instead of blaming the worker.
//!
//! Compared with hyper-util's pooled client this skips, per request, the connect future built
//! for racing the checkout, the shared pool lock and the absolute-form URI: the proxy path's
//! largest cost after the kernel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;

use super::addr::WorkerAddr;
use super::body::UpBody;
use super::client::HttpClient;
use super::replay::Replayable;
use crate::routing::WorkerId;

/// Idle connections kept per worker.
const MAX_IDLE_PER_WORKER: usize = 1024;

/// Whether a request may go on an idle pooled connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Take an idle connection when there is one.
    Pooled,
    /// Open a new connection (a re-send after a reused one failed).
    Fresh,
}

pub(crate) use Reuse::Fresh;

/// Why a send failed, and whether it was on a reused connection.
#[derive(Debug)]
pub(crate) struct SendError {
    pub(crate) reason: String,
    /// The request went out on a pooled connection that had served earlier requests.
    pub(crate) reused: bool,
}

impl SendError {
    fn fresh(reason: String) -> Self {
        Self {
            reason,
            reused: false,
        }
    }
}

/// One IO loop's connections to every worker.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    idle: Mutex<HashMap<WorkerId, Vec<SendRequest<UpBody>>>>,
    /// Opens new connections (TLS for `https://` workers).
    client: HttpClient,
}

/// A connection lent to one request; [`Conn::release`] returns it once the response is read.
#[derive(Debug)]
pub(crate) struct Conn {
    sender: SendRequest<UpBody>,
    worker: WorkerId,
    pool: Arc<Pool>,
    /// The client's streamed body this request is still sending, if any.
    upload: Option<Replayable>,
}

impl Conn {
    /// Marks the connection as carrying `upload` (a streamed request body).
    pub(crate) fn uploading(mut self, upload: Option<&Replayable>) -> Self {
        self.upload = upload.cloned();
        self
    }

    /// Returns the connection to the idle list (the response body was read to its end). A
    /// connection whose request body is still being sent (the worker answered before the
    /// client's upload ended) is not free: it is left to close once the upload ends, so no
    /// other request queues behind another client's upload.
    pub(crate) fn release(self) {
        if self.sender.is_closed() || self.upload.as_ref().is_some_and(|u| !u.upload_finished()) {
            return;
        }
        let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(self.worker).or_default();
        if list.len() < MAX_IDLE_PER_WORKER {
            list.push(self.sender);
        }
    }
}

impl Pool {
    /// A pool that opens its connections with `client`.
    pub(crate) fn new(client: HttpClient) -> Self {
        Self {
            idle: Mutex::default(),
            client,
        }
    }

    /// Drops idle connections that are closed or lead to workers no longer registered.
    pub(crate) fn prune(&self, registered: impl Fn(WorkerId) -> bool) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|id, list| {
            list.retain(|s| !s.is_closed());
            registered(*id) && !list.is_empty()
        });
    }

    fn checkout(&self, worker: WorkerId) -> Option<SendRequest<UpBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(&worker)?;
        while let Some(sender) = list.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Sends `req` to worker `id` at `addr` on a pooled (unless `reuse` is [`Fresh`]) or new
    /// connection.
    pub(crate) async fn send(
        self: &Arc<Self>,
        id: WorkerId,
        addr: &WorkerAddr,
        mut req: Request<UpBody>,
        reuse: Reuse,
    ) -> Result<(Response<Incoming>, Conn), SendError> {
        loop {
            let pooled = match reuse {
                Reuse::Pooled => self.checkout(id),
                Reuse::Fresh => None,
            };
            let (mut sender, reused) = match pooled {
                Some(s) => (s, true),
                None => (
                    // boxed: opening a connection (TCP, TLS) is a large future and rare; it
                    // would otherwise size every request's future
                    Box::pin(connect(&self.client, addr))
                        .await
                        .map_err(SendError::fresh)?,
                    false,
                ),
            };
            // A just-returned connection may still be finishing the previous exchange.
            if sender.ready().await.is_err() {
                if reused {
                    continue;
                }
                return Err(SendError::fresh(
                    "connection closed before the request was sent".to_owned(),
                ));
            }
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    let conn = Conn {
                        sender,
                        worker: id,
                        pool: self.clone(),
                        upload: None,
                    };
                    return Ok((resp, conn));
                }
                Err(mut e) => match e.take_message() {
                    // Nothing was written: a stale idle connection. Try another.
                    Some(unsent) if reused => req = unsent,
                    _ => {
                        return Err(SendError {
                            reason: e.into_error().to_string(),
                            reused,
                        });
                    }
                },
            }
        }
    }
}

async fn connect(client: &HttpClient, addr: &WorkerAddr) -> Result<SendRequest<UpBody>, String> {
    let stream = client.connect(addr).await?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;
    use crate::registry::Registry;

    #[tokio::test]
    async fn a_connection_read_to_its_end_is_reused() {
        let sim = berth_sim::SimWorker::builder()
            .time_scale(0.0)
            .spawn_on_loopback()
            .await;
        let cfg = crate::GatewayConfig::new(vec![sim.url()]);
        let registry = Registry::new(cfg.breaker, cfg.health, Arc::default());
        let worker = registry.add(&sim.url(), Vec::new(), true).unwrap();
        let pool = Arc::new(Pool::default());
        for _ in 0..5 {
            let mut req = Request::get("/v1/models").body(UpBody::Full(None)).unwrap();
            req.headers_mut()
                .insert(http::header::HOST, worker.host_header.clone());
            let (resp, conn) = pool
                .send(worker.id, &worker.addr, req, Reuse::Pooled)
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            resp.into_body().collect().await.unwrap();
            conn.release();
        }
        let idle = pool.idle.lock().unwrap();
        assert_eq!(
            idle.get(&worker.id).map(Vec::len),
            Some(1),
            "one connection served all five"
        );
    }
}
