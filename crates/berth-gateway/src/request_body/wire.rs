//! The request body as it arrives on the client's connection. The connection (the server
//! layer's HTTP/1 code) implements [`Wire`] over its read side and lends it to the request's
//! [`ConnBody`]: the body decodes straight out of the connection's read buffer in whichever task
//! polls it (the connection's own), with no channel and no task between them.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// A connection's read side, as the current request's body reads it.
/// `request` is the request's number on its connection: a body kept past its request's end
/// reads nothing of the next request's.
pub(crate) trait Wire: Send {
    /// The next piece of request `request`'s body; `None` at its end.
    fn poll_body(&mut self, request: u64, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>>;
    /// Whether the body has ended (or its request is over).
    fn body_ended(&self, request: u64) -> bool;
    /// The body bytes still to come, when known.
    fn body_remaining(&self, request: u64) -> Option<u64>;
}

/// A connection's read side, shared by the connection and its current request's body (both are
/// polled by the connection's task; the lock is never contended).
pub(crate) type SharedWire = Arc<Mutex<dyn Wire>>;

/// A client's request body read from its connection.
pub(crate) struct ConnBody {
    /// `None`: the request has no body.
    wire: Option<SharedWire>,
    /// The request's number on its connection.
    request: u64,
}

impl std::fmt::Debug for ConnBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnBody")
            .field("empty", &self.wire.is_none())
            .finish()
    }
}

impl ConnBody {
    /// The body of `wire`'s request number `request` (the wire knows its framing).
    pub(crate) fn new(wire: SharedWire, request: u64) -> Self {
        Self {
            wire: Some(wire),
            request,
        }
    }

    /// A request without a body.
    pub(crate) fn empty() -> Self {
        Self {
            wire: None,
            request: 0,
        }
    }

    fn lock(wire: &SharedWire) -> MutexGuard<'_, dyn Wire + 'static> {
        wire.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Body for ConnBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let Some(wire) = &self.wire else {
            return Poll::Ready(None);
        };
        let polled = Self::lock(wire).poll_body(self.request, cx);
        polled.map(|o| o.map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.wire
            .as_ref()
            .is_none_or(|w| Self::lock(w).body_ended(self.request))
    }

    fn size_hint(&self) -> SizeHint {
        match self
            .wire
            .as_ref()
            .map(|w| Self::lock(w).body_remaining(self.request))
        {
            None => SizeHint::with_exact(0),
            Some(Some(n)) => SizeHint::with_exact(n),
            Some(None) => SizeHint::default(),
        }
    }
}
