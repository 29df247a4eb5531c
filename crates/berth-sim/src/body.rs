//! The response body: whole bytes, a few chunks (to cut a response halfway on purpose), or a
//! channel fed by a streaming task.
//!
//! A streaming body owns its producer task: dropping the body (the client went away) aborts the
//! task, which frees its running slot at once, and a producer that panicked re-raises its panic
//! here, inside the connection task, where the server collects it for `SimHandle::join`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::SimError;

/// Body of every response the worker sends.
#[derive(Debug)]
pub(crate) enum SimBody {
    /// Fixed chunks, the last of which may be an error (which aborts the connection).
    Chunks(VecDeque<Result<Bytes, SimError>>),
    /// Produced by a task, one chunk per message.
    Channel {
        rx: mpsc::Receiver<Result<Bytes, SimError>>,
        task: Option<JoinHandle<()>>,
    },
}

impl SimBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        Self::Chunks(VecDeque::from([Ok(bytes.into())]))
    }

    /// The first half of `bytes`, then a connection abort.
    pub(crate) fn cut(bytes: Bytes) -> Self {
        let half = bytes.slice(..bytes.len() / 2);
        Self::Chunks(VecDeque::from([Ok(half), Err(SimError::DroppedByFault)]))
    }

    pub(crate) fn channel(
        rx: mpsc::Receiver<Result<Bytes, SimError>>,
        task: JoinHandle<()>,
    ) -> Self {
        Self::Channel {
            rx,
            task: Some(task),
        }
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = SimError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, SimError>>> {
        match self.get_mut() {
            Self::Chunks(chunks) => Poll::Ready(chunks.pop_front().map(|c| c.map(Frame::data))),
            Self::Channel { rx, task } => match rx.poll_recv(cx) {
                Poll::Ready(Some(chunk)) => Poll::Ready(Some(chunk.map(Frame::data))),
                Poll::Pending => Poll::Pending,
                Poll::Ready(None) => {
                    let Some(handle) = task.as_mut() else {
                        return Poll::Ready(None);
                    };
                    match Pin::new(handle).poll(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(result) => {
                            *task = None;
                            if let Err(err) = result
                                && err.is_panic()
                            {
                                std::panic::resume_unwind(err.into_panic());
                            }
                            Poll::Ready(None)
                        }
                    }
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Chunks(chunks) if chunks.is_empty())
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Chunks(chunks) if chunks.len() == 1 => match chunks.front() {
                Some(Ok(bytes)) => SizeHint::with_exact(bytes.len() as u64),
                _ => SizeHint::default(),
            },
            Self::Chunks(chunks) if chunks.is_empty() => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

impl Drop for SimBody {
    fn drop(&mut self) {
        if let Self::Channel {
            task: Some(task), ..
        } = self
        {
            task.abort();
        }
    }
}

use std::future::Future as _;
