//! The request body as the gateway holds it, and the request each attempt sends to a worker.

use bytes::Bytes;
use http::Method;

use super::headers;
use super::rank::with_rank;
use crate::error::GatewayError;
use crate::fields::{Fields, Target};
use crate::registry::Worker;
use crate::upstream::{Replayable, ReqHead, UpBody, UpRequest};

/// The client's request head as the proxy keeps it: no header map, its header fields as they
/// arrived. Its method is `POST` (the only one the proxied routes take: the service refuses
/// any other before the proxy), so it is not kept.
#[derive(Debug)]
pub(crate) struct ClientHead {
    /// The target as the head's bytes (no `Uri`).
    pub(crate) target: Target,
    pub(crate) fields: Fields,
}

/// The request body as the gateway holds it.
pub(crate) enum Held {
    /// Read whole before routing: re-sendable.
    Buffered(Bytes),
    /// Streamed (kept for retries up to a limit when retries are on).
    Stream(Replayable),
}

impl Held {
    /// The body of the next attempt (`None`: it cannot be re-sent), and its new length when it
    /// was rewritten for a data-parallel `rank`.
    fn next(&mut self, rank: Option<u32>) -> Option<(UpBody, Option<usize>)> {
        match self {
            Self::Buffered(b) => {
                let ranked = rank.and_then(|r| with_rank(b, r));
                let len = ranked.as_ref().map(Bytes::len);
                Some((UpBody::Full(Some(ranked.unwrap_or_else(|| b.clone()))), len))
            }
            Self::Stream(r) => r.attempt().map(|r| (UpBody::Stream(r), None)),
        }
    }

    /// The upload still to wait for before the worker's timeout starts (streamed bodies).
    pub(crate) fn upload(&self) -> Option<&Replayable> {
        match self {
            Self::Buffered(_) => None,
            Self::Stream(r) => Some(r),
        }
    }

    pub(crate) fn replayable(&self) -> bool {
        match self {
            Self::Buffered(_) => true,
            Self::Stream(r) => r.replayable(),
        }
    }
}

impl Held {
    /// The request of the next attempt to `worker` (`None`: the body cannot be re-sent): the
    /// client's method, path and end-to-end headers, the worker's `Host`, and the body (with the
    /// worker's data-parallel rank written in, and its new length, when it has one).
    pub(crate) fn request<'a>(
        &mut self,
        parts: &'a ClientHead,
        worker: &'a Worker,
    ) -> Result<Option<UpRequest<'a>>, GatewayError> {
        let Some((body, ranked_len)) = self.next(worker.addr.rank()) else {
            return Ok(None);
        };
        let head = worker_head(parts, worker, ranked_len.map(|n| n as u64));
        Ok(Some(UpRequest { head, body }))
    }
}

/// The head of the request a worker receives: the client's method, path (under the worker's
/// prefix) and forwarded headers, the worker's `Host`, and the body's new length if it changed.
pub(crate) fn worker_head<'a>(
    parts: &'a ClientHead,
    worker: &'a Worker,
    length: Option<u64>,
) -> ReqHead<'a> {
    ReqHead {
        method: &Method::POST,
        prefix: worker.addr.prefix(),
        path: parts.target.path_and_query(&parts.fields),
        host: Some(&worker.host_header),
        headers: &parts.fields,
        forward: headers::forwarded,
        length,
    }
}
