//! The body of a request sent to a worker: either bytes the gateway already holds (buffered,
//! so it can be re-sent on a retry) or the client's body streamed through untouched.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::replay::{BoxError, ReplayBody};

/// A request body sent to a worker.
#[derive(Debug)]
pub(crate) enum UpBody {
    /// Bytes held by the gateway (re-sendable).
    Full(Option<Bytes>),
    /// The client's body, streamed (and kept for a possible retry, see `replay.rs`).
    Stream(ReplayBody),
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Self::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(s) => Pin::new(s).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(b) => b.is_none(),
            Self::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(s) => s.size_hint(),
        }
    }
}
