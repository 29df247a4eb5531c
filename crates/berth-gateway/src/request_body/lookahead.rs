//! The start of a streamed body, read before routing to learn its top-level `model`.
//!
//! A streamed body is not buffered, but an unknown `model` must be refused (404
//! `model_not_found`) before any byte reaches a worker. So the gateway reads the body's first
//! frames through [`ModelScan`] until the scan answers, the body ends, or [`LOOKAHEAD_LIMIT`]
//! bytes are held; those frames are then the first bytes sent (see `upstream/replay.rs`). A model that
//! comes later (an SDK that writes `messages` first and the body is large) is checked as the rest
//! streams: an unknown one then cuts the worker's request off before the body is complete (the
//! worker never runs it) and the client still gets 404.

use std::sync::Arc;

use super::client::ClientBody;
use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::deadline::BodyDeadline;
use crate::error::GatewayError;
use crate::model_scan::{Found, ModelScan};

/// Most bytes held while looking for the model (the replay capture's size).
pub(crate) const LOOKAHEAD_LIMIT: usize = CAPTURE_LIMIT;

/// Largest streamed body kept for replay on a retry (`upstream/replay.rs`); the lookahead holds
/// at most as much, since what it read is the replay's first frames.
pub(crate) const CAPTURE_LIMIT: usize = 256 * 1024;

/// What was read ahead.
#[derive(Debug, Default)]
pub(crate) struct Lookahead {
    /// The frames read, to be sent first.
    pub(crate) prefix: Vec<Bytes>,
    pub(crate) len: usize,
    /// The scan, answered or (past the limit) still running.
    pub(crate) scan: ModelScan,
}

impl Lookahead {
    /// The model found, if the scan found one.
    pub(crate) fn model(&self) -> Option<&str> {
        match self.scan.found() {
            Some(Found::Model(m)) => Some(m),
            _ => None,
        }
    }
}

/// Reads `body` until its model is known, it ends, or [`LOOKAHEAD_LIMIT`] bytes are held, within
/// the body's deadline and `--max-payload-size`.
pub(crate) async fn read_ahead(
    body: &mut ClientBody,
    max: usize,
    deadline: BodyDeadline,
) -> Result<Lookahead, GatewayError> {
    let mut ahead = Lookahead::default();
    let mut last = Instant::now();
    while ahead.scan.found().is_none() && ahead.len < LOOKAHEAD_LIMIT {
        // A frame already there needs no timer.
        let ready = body.frame().now_or_never();
        let frame = match (ready, deadline.next(last)) {
            (Some(frame), _) => frame,
            (None, Some(at)) => tokio::time::timeout_at(at, body.frame())
                .await
                .map_err(|_| deadline.error(last))?,
            (None, None) => body.frame().await,
        };
        let data = match frame {
            None => {
                ahead.scan.finish();
                break;
            }
            Some(Err(e)) => return Err(GatewayError::ClientBody(e.to_string())),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
        };
        last = Instant::now();
        ahead.len += data.len();
        if ahead.len > max {
            return Err(GatewayError::PayloadTooLarge(max));
        }
        ahead.scan.feed(&data);
        ahead.prefix.push(data);
    }
    Ok(ahead)
}

/// The rest of a scan that had no answer within the lookahead: checks the model as the body
/// streams on.
#[derive(Debug)]
pub(crate) struct LateCheck {
    pub(crate) scan: ModelScan,
    /// The models the workers serve.
    pub(crate) known: Vec<Arc<str>>,
}

impl LateCheck {
    /// Feeds the next bytes: `Err(model)` when they complete an unknown model; `Ok(true)` once
    /// the scan has answered (nothing more to check).
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<bool, String> {
        match self.scan.feed(data) {
            None => Ok(false),
            Some(Found::Model(m)) if !self.known.iter().any(|k| **k == **m) => Err(m.clone()),
            Some(_) => Ok(true),
        }
    }
}
