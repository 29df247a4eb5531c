//! A worker connection with its buffers, and the request body on its way out.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Bytes, BytesMut};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::H1Error;
use super::head::ReqFraming;

/// How much a read asks for at least.
const READ_CHUNK: usize = 8 * 1024;
/// Body bytes gathered before they are written.
const WRITE_BATCH: usize = 64 * 1024;

/// A connection to a worker: its IO and the buffers it keeps for its whole life.
#[derive(Debug)]
pub(crate) struct H1Conn<IO> {
    pub(super) io: IO,
    pub(super) rbuf: BytesMut,
    pub(super) wbuf: Vec<u8>,
    /// How much of `wbuf` is written.
    pub(super) wpos: usize,
    /// It served a request before the current one.
    pub(super) reused: bool,
    /// Bytes arrived since the current request was written.
    pub(super) read_any: bool,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> H1Conn<IO> {
    /// A new connection over `io`.
    pub(crate) fn new(io: IO) -> Self {
        Self {
            io,
            rbuf: BytesMut::new(),
            wbuf: Vec::new(),
            wpos: 0,
            reused: false,
            read_any: false,
        }
    }

    /// Whether an idle connection is still open: the worker has neither closed it nor sent
    /// anything unasked (checked without waiting: a read that would block means open).
    pub(crate) fn idle_open(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut buf)
            .is_pending()
    }

    /// Reads more of the worker's bytes into the read buffer; `Ok(0)` is the end of the stream.
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 8 {
            self.rbuf.reserve(READ_CHUNK);
        }
        // tokio's `read_buf` reads into the spare capacity without zeroing it first; the
        // future holds nothing but the two borrows, so one made per poll loses nothing
        let n = ready!(std::pin::pin!(self.io.read_buf(&mut self.rbuf)).poll(cx))?;
        self.read_any |= n > 0;
        Poll::Ready(Ok(n))
    }

    /// Writes what `wbuf` holds; ready once all of it is written (not flushed).
    fn poll_write_buf(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), H1Error>> {
        while self.wpos < self.wbuf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.wpos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
            }
            self.wpos += n;
        }
        self.wbuf.clear();
        self.wpos = 0;
        Poll::Ready(Ok(()))
    }
}

/// A request body on its way to the worker, framed as its head announced.
#[derive(Debug)]
pub(crate) struct Upload<B> {
    body: B,
    framing: ReqFraming,
    /// The body has ended (its framing's end is in the write buffer).
    ended: bool,
}

impl<B> Upload<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    pub(super) fn new(body: B, framing: ReqFraming) -> Self {
        Self {
            body,
            framing,
            ended: false,
        }
    }

    /// Sends the body (gathering what is ready into one write); ready once all of it is
    /// written and flushed. The head must be in `conn`'s write buffer already.
    pub(super) fn poll_send<IO: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        conn: &mut H1Conn<IO>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), H1Error>> {
        loop {
            while !self.ended && conn.wbuf.len() - conn.wpos < WRITE_BATCH {
                // as hyper does: a body that says it is over is not polled for its end
                if self.body.is_end_stream() {
                    self.end(&mut conn.wbuf)?;
                    break;
                }
                match Pin::new(&mut self.body).poll_frame(cx) {
                    Poll::Pending => break,
                    Poll::Ready(None) => self.end(&mut conn.wbuf)?,
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Err(H1Error::Upload(e.to_string())));
                    }
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            self.put(&mut conn.wbuf, &data)?;
                        }
                    }
                }
            }
            if conn.wpos < conn.wbuf.len() {
                ready!(conn.poll_write_buf(cx))?;
                continue;
            }
            ready!(Pin::new(&mut conn.io).poll_flush(cx))?;
            return if self.ended {
                Poll::Ready(Ok(()))
            } else {
                // the body is not ready: its waker is registered
                Poll::Pending
            };
        }
    }

    fn put(&mut self, out: &mut Vec<u8>, data: &[u8]) -> Result<(), H1Error> {
        if data.is_empty() {
            return Ok(());
        }
        match &mut self.framing {
            ReqFraming::Length(left) => {
                *left = left
                    .checked_sub(data.len() as u64)
                    .ok_or(H1Error::Request("body longer than its content-length"))?;
                out.extend_from_slice(data);
            }
            ReqFraming::Chunked => {
                put_chunk(out, data);
            }
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<u8>) -> Result<(), H1Error> {
        match self.framing {
            ReqFraming::Length(0) => {}
            ReqFraming::Length(_) => {
                return Err(H1Error::Request("body shorter than its content-length"));
            }
            ReqFraming::Chunked => out.extend_from_slice(b"0\r\n\r\n"),
        }
        self.ended = true;
        Ok(())
    }
}

/// Appends `n` in hex (a chunk size).
/// One chunk of a chunked body: its size in hex, CRLF, the data, CRLF.
pub(crate) fn put_chunk(out: &mut Vec<u8>, data: &[u8]) {
    put_hex(out, data.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn put_hex(out: &mut Vec<u8>, n: usize) {
    let digits = (usize::BITS - n.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (i * 4)) & 0xf]);
    }
}
