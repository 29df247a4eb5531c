//! Keep-alive connections to workers, one pool per IO loop.
//!
//! The purpose-built HTTP/1 client (`h1/`) with a small idle list per worker: a request takes
//! an idle connection (or opens one), and the response body hands the connection back when it
//! was read to its end on a connection that stays open. A response abandoned mid-body closes
//! its connection, which is also how a client disconnect cancels the worker's request. An idle
//! connection the worker closed (or sent something unasked on) is dropped at checkout.
//!
//! A failure on a *reused* connection before any response byte says so ([`SendError::reused`]):
//! engines such as llama-server close a connection after a streamed reply although their
//! headers promised keep-alive, and a request written on it fails before any response byte.
//! The caller re-sends such a request once on a [`Fresh`] connection to the same worker instead
//! of blaming the worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::Response;

use super::addr::WorkerAddr;
use super::body::UpBody;
use super::client::HttpClient;
use super::h1::{self, GiveBack, H1Conn, ReqHead, RespBody};
use crate::coarse_timer::Wheel;
use crate::routing::{IdBuildHasher, WorkerId};
use crate::tls::MaybeTls;

/// Idle connections kept per worker.
const MAX_IDLE_PER_WORKER: usize = 1024;

/// A worker's response body as the request path reads it (boxed where it is made, see
/// [`h1::send`]).
pub(crate) type UpResponse = Box<RespBody<MaybeTls, UpBody, Home>>;

/// A request to a worker: its head (written from the client's parts) and its body.
#[derive(Debug)]
pub(crate) struct UpRequest<'a> {
    pub(crate) head: ReqHead<'a>,
    pub(crate) body: UpBody,
}

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
    /// The request went out on a pooled connection that had served earlier requests, and
    /// failed before any response byte.
    pub(crate) reused: bool,
}

/// Idle connections by worker.
type IdleMap = HashMap<WorkerId, Vec<H1Conn<MaybeTls>>, IdBuildHasher>;

/// One IO loop's connections to every worker.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    idle: Mutex<IdleMap>,
    /// Opens new connections (TLS for `https://` workers).
    client: HttpClient,
    /// The IO loop's wheel for the request timeout (`None`: tokio's timer).
    request_timer: Option<Arc<Wheel>>,
}

/// Where a connection goes back to: its worker's idle list.
#[derive(Debug)]
pub(crate) struct Home {
    pool: Arc<Pool>,
    worker: WorkerId,
}

impl GiveBack<MaybeTls> for Home {
    fn give_back(self, conn: H1Conn<MaybeTls>) {
        let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(self.worker).or_default();
        if list.len() < MAX_IDLE_PER_WORKER {
            list.push(conn);
        }
    }
}

impl Pool {
    /// A pool that opens its connections with `client`.
    pub(crate) fn new(client: HttpClient) -> Self {
        Self {
            idle: Mutex::default(),
            client,
            request_timer: None,
        }
    }

    /// The pool of an IO loop that ticks `wheel`: the request timeouts of its requests sleep
    /// on it (a slot in its table, not a timer entry of tokio's per request).
    pub(crate) fn with_request_timer(mut self, wheel: Arc<Wheel>) -> Self {
        self.request_timer = Some(wheel);
        self
    }

    /// The wheel request timeouts sleep on, if the IO loop ticks one.
    pub(crate) fn request_timer(&self) -> Option<&Arc<Wheel>> {
        self.request_timer.as_ref()
    }

    /// Drops idle connections that are closed or lead to workers no longer registered.
    pub(crate) fn prune(&self, registered: impl Fn(WorkerId) -> bool) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|id, list| {
            list.retain_mut(H1Conn::idle_open);
            registered(*id) && !list.is_empty()
        });
    }

    fn checkout(&self, worker: WorkerId) -> Option<H1Conn<MaybeTls>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(&worker)?;
        while let Some(mut conn) = list.pop() {
            if conn.idle_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Sends `req` to worker `id` at `addr` on a pooled (unless `reuse` is [`Fresh`]) or new
    /// connection, and waits for the response head.
    pub(crate) async fn send(
        self: &Arc<Self>,
        id: WorkerId,
        addr: &WorkerAddr,
        req: UpRequest<'_>,
        reuse: Reuse,
    ) -> Result<Response<UpResponse>, SendError> {
        let pooled = match reuse {
            Reuse::Pooled => self.checkout(id),
            Reuse::Fresh => None,
        };
        let conn =
            match pooled {
                Some(conn) => conn,
                // boxed: opening a connection (TCP, TLS) is a large future and rare; it would
                // otherwise size every request's future
                None => H1Conn::new(Box::pin(self.client.connect(addr)).await.map_err(
                    |reason| SendError {
                        reason,
                        reused: false,
                    },
                )?),
            };
        let home = Home {
            pool: self.clone(),
            worker: id,
        };
        h1::send(conn, &req.head, req.body, home)
            .await
            .map_err(|f| SendError {
                reason: f.error.to_string(),
                reused: f.stale,
            })
    }
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
            let headers = crate::fields::Fields::default();
            let req = UpRequest {
                head: ReqHead {
                    method: &http::Method::GET,
                    prefix: "",
                    path: b"/v1/models",
                    host: Some(&worker.host_header),
                    headers: &headers,
                    forward: |_| true,
                    length: None,
                },
                body: UpBody::Full(None),
            };
            let resp = pool
                .send(worker.id, &worker.addr, req, Reuse::Pooled)
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            resp.into_body().collect().await.unwrap();
        }
        let idle = pool.idle.lock().unwrap();
        assert_eq!(
            idle.get(&worker.id).map(Vec::len),
            Some(1),
            "one connection served all five"
        );
    }
}
