//! Admission control for the generation routes (SMG's flags): at most
//! `--max-concurrent-requests` responses in progress, a FIFO queue of `--queue-size` requests
//! waiting up to `--queue-timeout-secs` for a permit, and optionally a rate bucket
//! (`--rate-limit-tokens-per-second`, bursting up to the concurrency bound). A request that
//! finds no permit and no room in the queue, or waits too long, gets `429` with `Retry-After`
//! and the code `queue_full` or `queue_timeout`.
//!
//! - `gate.rs`: the decision without IO (permits, tokens, queue order), time as an argument.
//! - `limiter.rs`: the shared limiter: permits that release themselves when dropped, waiters that
//!   leave the queue when dropped.
//! - `metrics.rs`: `smg_http_rate_limit_total` and `berth_admission_*`.
//!
//! A permit is held for the whole response: it rides on the proxied body and is dropped when the
//! body ends, breaks, or its client disconnects; a gateway-made response drops it at once.
//! While queued, the request's body is read ahead (at most [`QUEUED_READ_LIMIT`] bytes, kept for
//! the worker), so a client that leaves is noticed and leaves the queue.

mod gate;
mod limiter;
mod metrics;

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;

pub(crate) use limiter::{Admission, Arrived, Permit};
pub(crate) use metrics::AdmissionMetrics;

pub use crate::error::{Rejection, RejectionKind};

use crate::error::GatewayError;
use crate::request_body::ClientBody;

/// Most body bytes read ahead while a request is queued (kept in memory until admitted).
pub const QUEUED_READ_LIMIT: u64 = 64 * 1024;

/// The limiter's settings (validated by [`crate::GatewayConfig::validate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionSettings {
    /// Responses in progress at once (`--max-concurrent-requests`); `None`: no bound.
    pub max_concurrent: Option<u32>,
    /// Requests that may wait for a permit (`--queue-size`); 0 answers 429 at once.
    pub queue_size: usize,
    /// How long a request may wait in the queue (`--queue-timeout-secs`).
    pub queue_timeout: Duration,
    /// Admissions per second (`--rate-limit-tokens-per-second`); `None`: no rate limit.
    pub rate: Option<f64>,
}

impl AdmissionSettings {
    /// Whether any limit is on (otherwise the request path skips admission entirely).
    pub fn enabled(&self) -> bool {
        self.max_concurrent.is_some() || self.rate.is_some()
    }

    /// The rate bucket's size: the concurrency bound, else one second of tokens (at least 1).
    pub fn burst(&self) -> f64 {
        match (self.max_concurrent, self.rate) {
            (Some(max), _) => f64::from(max),
            (None, Some(rate)) => rate.max(1.0),
            (None, None) => 0.0,
        }
    }
}

/// Admits a generation request: a permit now, or after waiting in the queue while its body is
/// read ahead (so a client that leaves is noticed). Errors: 429 (`queue_full`,
/// `queue_timeout`), or the client's body failing while queued (it left: the answer goes
/// nowhere).
pub(crate) async fn admit(
    admission: &Arc<Admission>,
    body: &mut ClientBody,
) -> Result<Permit, GatewayError> {
    let mut waiter = match admission.arrive().map_err(GatewayError::Overloaded)? {
        Arrived::Now(permit) => return Ok(permit),
        Arrived::Queued(waiter) => waiter,
    };
    let wait = waiter.wait();
    tokio::pin!(wait);
    let mut reading = !http_body::Body::is_end_stream(body.rest());
    loop {
        tokio::select! {
            admitted = &mut wait => return admitted.map_err(GatewayError::Overloaded),
            frame = body.rest().frame(), if reading => match frame {
                Some(Ok(frame)) => {
                    body.keep(frame);
                    reading = body.read_len() < QUEUED_READ_LIMIT;
                }
                // The body is complete: the connection's end is now seen by hyper, which
                // drops this request (and its place in the queue) if the client leaves.
                None => reading = false,
                Some(Err(e)) => return Err(GatewayError::ClientBody(e.to_string())),
            },
        }
    }
}
