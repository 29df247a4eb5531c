//! A client's request body as the request path reads it: frames the gateway already read
//! (while the request waited for admission, watching for a client that leaves), then the rest of
//! the connection's body.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};

use super::wire::ConnBody;

/// The request body: read-ahead frames first, then the rest.
#[derive(Debug)]
pub(crate) struct ClientBody {
    read: VecDeque<Frame<Bytes>>,
    read_len: u64,
    inner: ConnBody,
}

impl ClientBody {
    /// The body as it arrives, nothing read yet.
    pub(crate) fn new(inner: ConnBody) -> Self {
        Self {
            read: VecDeque::new(),
            read_len: 0,
            inner,
        }
    }

    /// Bytes read ahead so far.
    pub(crate) fn read_len(&self) -> u64 {
        self.read_len
    }

    /// The connection's body, for reading ahead; what is read goes back with [`Self::keep`].
    pub(crate) fn rest(&mut self) -> &mut ConnBody {
        &mut self.inner
    }

    /// Keeps a frame read ahead, to be given out first.
    pub(crate) fn keep(&mut self, frame: Frame<Bytes>) {
        if let Some(d) = frame.data_ref() {
            self.read_len += d.remaining() as u64;
        }
        self.read.push_back(frame);
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(frame) = self.read.pop_front() {
            if let Some(d) = frame.data_ref() {
                self.read_len -= d.remaining() as u64;
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + self.read_len);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + self.read_len);
        }
        hint
    }
}

impl From<ConnBody> for ClientBody {
    fn from(inner: ConnBody) -> Self {
        Self::new(inner)
    }
}
