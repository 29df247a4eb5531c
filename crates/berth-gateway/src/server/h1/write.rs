//! The client connection's write side: one write buffer for the connection's life; a response
//! head and as much of its body as is ready go out in one write, framed as the head announced.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::Body;
use tokio::io::AsyncWrite;

use super::head::Out;
use crate::upstream::h1::put_chunk;

/// Body bytes gathered before they are written.
const WRITE_BATCH: usize = 64 * 1024;

/// A connection's write side.
#[derive(Debug)]
pub(crate) struct Writer<W> {
    io: W,
    pub(crate) buf: Vec<u8>,
    /// How much of `buf` is written.
    pos: usize,
}

/// Why a response body could not be sent whole.
#[derive(Debug)]
pub(crate) enum SendError {
    /// Writing to the client failed (it left).
    Io,
    /// The body broke off or disagreed with its length: the client sees a broken transfer.
    Body,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    pub(crate) fn new(io: W) -> Self {
        Self {
            io,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// Writes what the buffer holds and flushes; ready once all of it is out.
    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pos < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pos += n;
        }
        self.buf.clear();
        self.pos = 0;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    /// The IO (tests).
    #[cfg(test)]
    pub(crate) fn into_inner(self) -> W {
        self.io
    }

    /// Closes the write side (TLS: the close-notify), best effort.
    pub(crate) async fn shutdown(&mut self) {
        let _ = std::future::poll_fn(|cx| self.poll_flush(cx)).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.io).await;
    }
}

/// A response body on its way to the client.
#[derive(Debug)]
pub(crate) struct Sending {
    framing: Out,
    /// Bytes still due of a `Length` body.
    left: u64,
    ended: bool,
}

impl Sending {
    pub(crate) fn new(framing: Out) -> Self {
        Self {
            framing,
            left: match framing {
                Out::Length(n) => n,
                _ => 0,
            },
            ended: framing == Out::Empty,
        }
    }

    /// Sends `body` (the head is in `w`'s buffer already), gathering what is ready into one
    /// write; ready once all of it is written and flushed.
    pub(crate) fn poll_send<W, B>(
        &mut self,
        w: &mut Writer<W>,
        body: &mut B,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), SendError>>
    where
        W: AsyncWrite + Unpin,
        B: Body<Data = Bytes> + Unpin,
    {
        loop {
            while !self.ended && w.buf.len() - w.pos < WRITE_BATCH {
                if body.is_end_stream() {
                    self.end(&mut w.buf)?;
                    break;
                }
                match Pin::new(&mut *body).poll_frame(cx) {
                    Poll::Pending => break,
                    Poll::Ready(None) => self.end(&mut w.buf)?,
                    Poll::Ready(Some(Err(_))) => {
                        // what was gathered goes out first; the transfer then breaks
                        let _ = ready!(w.poll_flush(cx));
                        return Poll::Ready(Err(SendError::Body));
                    }
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            self.put(&mut w.buf, &data)?;
                        }
                    }
                }
            }
            if w.pos < w.buf.len() || self.ended {
                ready!(w.poll_flush(cx)).map_err(|_| SendError::Io)?;
                if self.ended {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            // the body is not ready: its waker is registered
            return Poll::Pending;
        }
    }

    fn put(&mut self, out: &mut Vec<u8>, data: &[u8]) -> Result<(), SendError> {
        if data.is_empty() {
            return Ok(());
        }
        match self.framing {
            Out::Empty => {}
            Out::Length(_) => {
                self.left = self
                    .left
                    .checked_sub(data.len() as u64)
                    .ok_or(SendError::Body)?;
                out.extend_from_slice(data);
            }
            Out::Chunked => {
                put_chunk(out, data);
            }
            Out::Close => out.extend_from_slice(data),
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<u8>) -> Result<(), SendError> {
        match self.framing {
            Out::Length(_) if self.left > 0 => return Err(SendError::Body),
            Out::Chunked => out.extend_from_slice(b"0\r\n\r\n"),
            _ => {}
        }
        self.ended = true;
        Ok(())
    }
}
