//! One attempt on one worker: the only place a request is sent on the request path, used by
//! the regular dispatcher and by both legs of the PD dispatcher.
//!
//! An attempt sends on a pooled connection; a send that fails on a *reused* connection before
//! any response byte is re-sent once on a fresh connection to the same worker (the worker
//! closed it after its previous reply: counted in `smg_router_stale_connection_resends_total`,
//! neither a retry nor a worker failure). It waits for the response head within
//! `--request-timeout-secs` counted from the end of the upload (`wait.rs`), counts the status
//! (`smg_router_upstream_responses_total`) and reports the outcome to the worker's breaker: a
//! connection error, a timeout or a 5xx status is a failure, any other status a success. A
//! client whose streamed body failed (too slow, too large, gone) failed the attempt itself:
//! nothing is reported. Whether to retry is the dispatcher's decision.

use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::addr::WorkerAddr;
use super::pool::{Fresh, Pool, Reuse, UpRequest, UpResponse};
use super::replay::Replayable;
use super::wait::response_within;
use crate::error::GatewayError;
use crate::routing::{Outcome, WorkerId};

/// The `status_code` label of `smg_router_upstream_responses_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StatusLabels {
    pub(crate) status_code: u16,
}

/// The counters an attempt keeps (registered by `metrics.rs`).
#[derive(Clone, Debug, Default)]
pub(crate) struct UpstreamMetrics {
    /// `smg_router_upstream_responses_total{status_code}`.
    pub(crate) status: Family<StatusLabels, Counter>,
    /// `smg_router_stale_connection_resends_total`.
    pub(crate) stale_resends: Counter,
    /// `status{status_code="200"}`, resolved on first use: the common case skips the family's
    /// lookup.
    ok: OnceLock<Counter>,
}

impl UpstreamMetrics {
    fn count(&self, status_code: u16) {
        let lookup = || self.status.get_or_create(&StatusLabels { status_code });
        if status_code == 200 {
            self.ok.get_or_init(|| lookup().clone()).inc();
        } else {
            lookup().inc();
        }
    }
}

/// The worker an attempt goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target<'a> {
    pub(crate) id: WorkerId,
    pub(crate) addr: &'a WorkerAddr,
    /// Its URL as registered (error messages).
    pub(crate) url: &'a str,
}

/// What every attempt shares: the IO loop's connections, the timeout and the counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Upstream<'a> {
    pub(crate) pool: &'a Arc<Pool>,
    pub(crate) timeout: Duration,
    pub(crate) metrics: &'a UpstreamMetrics,
}

/// Why an attempt got no response.
#[derive(Debug)]
pub(crate) enum AttemptError {
    /// The worker could not be reached or did not answer in time (reported to its breaker).
    Worker(GatewayError),
    /// The client failed the attempt (its body), or the request could not be built or re-sent:
    /// not the worker's fault, and nothing to retry elsewhere.
    Request(GatewayError),
}

impl Upstream<'_> {
    /// Sends one request to `target` and waits for its response head. `request` builds the
    /// request (called again for the stale-connection re-send; `None`: the body cannot be sent
    /// again); `upload` is the client's streamed body, if any; `report` tells the worker's
    /// breaker.
    pub(crate) async fn attempt<'r>(
        &self,
        target: Target<'_>,
        upload: Option<&Replayable>,
        mut request: impl FnMut() -> Result<Option<UpRequest<'r>>, GatewayError>,
        report: impl Fn(Outcome),
    ) -> Result<Response<UpResponse>, AttemptError> {
        let not_resendable = || {
            AttemptError::Request(GatewayError::UpstreamConnection {
                worker: target.url.to_owned(),
                reason: "the request body could not be re-sent for a retry".to_owned(),
            })
        };
        let up = request()
            .map_err(AttemptError::Request)?
            .ok_or_else(not_resendable)?;
        let send = |up, reuse| self.pool.send(target.id, target.addr, up, reuse);
        // each send is pinned in its own block, so the two share their place in this future
        let mut sent = {
            let pooled = pin!(send(up, Reuse::Pooled));
            response_within(pooled, self.timeout, upload, self.pool.request_timer()).await
        };
        // A reused connection that failed before any response byte was most likely closed by
        // the worker after its previous reply (llama-server does so after every stream).
        if matches!(&sent, Some(Err(e)) if e.reused)
            && upload.and_then(Replayable::client_failure).is_none()
            && let Some(up) = request().map_err(AttemptError::Request)?
        {
            self.metrics.stale_resends.inc();
            tracing::debug!(worker = %target.url, "reused connection closed before answering; re-sending on a fresh one");
            sent = {
                let fresh = pin!(send(up, Fresh));
                response_within(fresh, self.timeout, upload, self.pool.request_timer()).await
            };
        }
        // A client that was too slow, sent too much or went away failed the attempt itself: no
        // breaker failure, no retry, no upstream error.
        if let Some(e) = upload.and_then(Replayable::client_failure) {
            return Err(AttemptError::Request(e));
        }
        let failure = match sent {
            Some(Ok(resp)) => {
                let status = resp.status().as_u16();
                self.metrics.count(status);
                report(if status >= 500 {
                    Outcome::Failure
                } else {
                    Outcome::Success
                });
                return Ok(resp);
            }
            Some(Err(e)) => GatewayError::UpstreamConnection {
                worker: target.url.to_owned(),
                reason: e.reason,
            },
            None => GatewayError::UpstreamTimeout(target.url.to_owned()),
        };
        report(Outcome::Failure);
        Err(AttemptError::Worker(failure))
    }
}
