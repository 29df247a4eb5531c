//! How long the gateway waits for a client's request body, and reading a buffered body within
//! those bounds.
//!
//! Waiting for a client's body is the client's time, never a worker's: a body that stalls (no
//! byte for `--request-body-idle-timeout-secs`) or is not complete `--request-body-timeout-secs`
//! after the request head ends the request with 408 `request_body_timeout`, whether the body is
//! buffered (read here) or streamed to a worker (see `upstream/replay.rs`, which applies the same
//! [`BodyDeadline`] while the worker's connection pulls the body). Neither counts against the
//! worker's breaker, is retried, or is reported as `upstream_timeout`.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::client::ClientBody;
use crate::error::GatewayError;

/// How long the gateway waits for a client's request body. Time spent here is the client's:
/// it never counts against a worker (no breaker failure, no retry, no `upstream_timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyTimeouts {
    /// The whole body must have arrived this long after the request head
    /// (`--request-body-timeout-secs`); `None`: no bound.
    pub total: Option<Duration>,
    /// No body byte for this long ends the request (`--request-body-idle-timeout-secs`);
    /// `None`: no bound.
    pub idle: Option<Duration>,
}

/// The bounds on one request's body, fixed when its head arrived.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyDeadline {
    limits: BodyTimeouts,
    /// When the whole body must be in (`None`: no bound).
    total_at: Option<Instant>,
}

impl BodyDeadline {
    /// The bounds for a request whose head arrived at `arrived`.
    pub(crate) fn new(limits: BodyTimeouts, arrived: Instant) -> Self {
        Self {
            limits,
            total_at: limits.total.map(|t| arrived + t),
        }
    }

    /// When waiting for the next body byte ends, the last one having come at `last`.
    pub(crate) fn next(&self, last: Instant) -> Option<Instant> {
        let idle_at = self.limits.idle.map(|i| last + i);
        match (idle_at, self.total_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why the wait that [`BodyDeadline::next`] bounded ended (for the 408's message).
    pub(crate) fn reason(&self, last: Instant) -> String {
        let idle_at = self.limits.idle.map(|i| last + i);
        match (idle_at, self.limits.idle, self.limits.total) {
            (Some(at), Some(idle), _) if self.total_at.is_none_or(|t| at < t) => format!(
                "no body byte for {}s (--request-body-idle-timeout-secs)",
                idle.as_secs_f64()
            ),
            (_, _, Some(total)) => format!(
                "the body was not complete {}s after the request head (--request-body-timeout-secs)",
                total.as_secs_f64()
            ),
            _ => "the body did not arrive in time".to_owned(),
        }
    }

    /// The timeout error for a wait that ended with the last byte at `last`.
    pub(crate) fn error(&self, last: Instant) -> GatewayError {
        GatewayError::RequestBodyTimeout(self.reason(last))
    }
}

/// Reads a whole body of at most `max` bytes within `deadline`.
pub(crate) async fn read_body(
    mut body: ClientBody,
    max: usize,
    deadline: BodyDeadline,
) -> Result<Bytes, GatewayError> {
    let mut first: Option<Bytes> = None;
    let mut rest = BytesMut::new();
    let mut len = 0usize;
    let mut last = Instant::now();
    loop {
        let frame = match deadline.next(last) {
            Some(at) => tokio::time::timeout_at(at, body.frame())
                .await
                .map_err(|_| deadline.error(last))?,
            None => body.frame().await,
        };
        let frame = match frame {
            None => break,
            Some(Err(e)) => return Err(GatewayError::ClientBody(e.to_string())),
            Some(Ok(frame)) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        last = Instant::now();
        len += data.len();
        if len > max {
            return Err(GatewayError::PayloadTooLarge(max));
        }
        // One chunk (the common case) is kept as is; more are joined.
        match &first {
            None if rest.is_empty() => first = Some(data),
            _ => {
                if let Some(f) = first.take() {
                    rest.extend_from_slice(&f);
                }
                rest.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| rest.freeze()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_nearer_bound_wins_and_is_named() {
        let t0 = Instant::now();
        let both = BodyDeadline::new(
            BodyTimeouts {
                total: Some(Duration::from_secs(10)),
                idle: Some(Duration::from_secs(3)),
            },
            t0,
        );
        assert_eq!(both.next(t0), Some(t0 + Duration::from_secs(3)));
        assert!(both.reason(t0).contains("--request-body-idle-timeout-secs"));
        let late = t0 + Duration::from_secs(8);
        assert_eq!(both.next(late), Some(t0 + Duration::from_secs(10)));
        assert!(both.reason(late).contains("--request-body-timeout-secs"));
        let none = BodyDeadline::new(
            BodyTimeouts {
                total: None,
                idle: None,
            },
            t0,
        );
        assert_eq!(none.next(t0), None);
        let idle_only = BodyDeadline::new(
            BodyTimeouts {
                total: None,
                idle: Some(Duration::from_secs(1)),
            },
            t0,
        );
        assert_eq!(idle_only.next(late), Some(late + Duration::from_secs(1)));
        assert!(idle_only.reason(late).contains("idle"));
    }
}
