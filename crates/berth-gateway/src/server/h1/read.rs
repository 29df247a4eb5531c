//! The client connection's read side: one read buffer for the connection's life, request heads
//! parsed out of it, the current request's body decoded out of it (as [`Wire`], lent to the
//! request's `ConnBody`), and the reads between requests that notice a client that left.

use std::future::Future;
use std::io;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::head::{Head, HeadError, MAX_HEAD, parse_request};
use crate::request_body::Wire;
use crate::upstream::h1::{BodyFraming, Decoder, Step};

/// How much a read asks for at least.
const READ_CHUNK: usize = 8 * 1024;

/// Where an `Expect: 100-continue` stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Not asked for, or answered.
    No,
    /// Asked for; the body has not been read yet.
    Waiting,
    /// The body was read: the `100 Continue` is due.
    Due,
}

/// A connection's read side.
#[derive(Debug)]
pub(crate) struct ReadSide<R> {
    io: R,
    buf: BytesMut,
    body: Decoder,
    pub(crate) expect: Expect,
    /// The client closed its side (or reading failed).
    eof: bool,
    /// The body broke (bad framing, the client left): the connection cannot carry another
    /// request.
    pub(crate) broken: bool,
    /// The current request's number on the connection.
    pub(crate) request: u64,
}

/// Why no request head was read.
#[derive(Debug)]
pub(crate) enum NoHead {
    /// The client closed an idle connection, or left mid-head, or reading failed.
    Closed,
    /// The head is refused (answered, then the connection closes).
    Refused(HeadError),
}

impl<R: AsyncRead + Unpin + Send> ReadSide<R> {
    pub(crate) fn new(io: R) -> Self {
        Self {
            io,
            buf: BytesMut::new(),
            body: Decoder::new(BodyFraming::Length(0)),
            expect: Expect::No,
            eof: false,
            broken: false,
            request: 0,
        }
    }

    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 8 {
            self.buf.reserve(READ_CHUNK);
        }
        let n = ready!(std::pin::pin!(self.io.read_buf(&mut self.buf)).poll(cx))?;
        Poll::Ready(Ok(n))
    }

    /// Whether nothing of a next request has arrived.
    pub(crate) fn idle(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reads the next request head and starts its body.
    pub(crate) fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Head, NoHead>> {
        loop {
            if !self.buf.is_empty() {
                match parse_request(&mut self.buf) {
                    Ok(Some(head)) => {
                        self.request += 1;
                        self.body = Decoder::new(head.body);
                        self.expect = if head.expect_continue && !self.body.is_done() {
                            Expect::Waiting
                        } else {
                            Expect::No
                        };
                        return Poll::Ready(Ok(head));
                    }
                    Ok(None) if self.buf.len() > MAX_HEAD => {
                        return Poll::Ready(Err(NoHead::Refused(HeadError::TooLarge(
                            "request head larger than 64 KiB",
                        ))));
                    }
                    Ok(None) => {}
                    Err(e) => return Poll::Ready(Err(NoHead::Refused(e))),
                }
            }
            if self.eof {
                return Poll::Ready(Err(NoHead::Closed));
            }
            match ready!(self.poll_fill(cx)) {
                Ok(0) | Err(_) => self.eof = true,
                Ok(_) => {}
            }
        }
    }

    /// While the request is served and its body has been read: reads what arrives (the next
    /// pipelined request, up to a head's worth) to notice a client that left. Ready once it
    /// has; never ready while the body is still to be read (that is the body's reading).
    pub(crate) fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.eof {
            return Poll::Ready(());
        }
        if !self.body.is_done() {
            return Poll::Pending;
        }
        while self.buf.len() <= MAX_HEAD {
            match ready!(self.poll_fill(cx)) {
                Ok(0) | Err(_) => {
                    self.eof = true;
                    return Poll::Ready(());
                }
                Ok(_) => {}
            }
        }
        Poll::Pending
    }

    /// After the response: whether the connection can read the next request. A body left
    /// unread is drained if what is left of it has already arrived (at most `limit` bytes);
    /// otherwise the connection closes.
    pub(crate) fn settle(&mut self, limit: usize) -> bool {
        if self.broken || self.eof {
            return false;
        }
        if self.expect == Expect::Waiting {
            // the client waits for a 100 that will not come: its body is not sent
            return false;
        }
        let mut drained = 0usize;
        while !self.body.is_done() {
            match self.body.decode(&mut self.buf) {
                Ok(Step::Data(d)) => {
                    drained += d.len();
                    if drained > limit {
                        return false;
                    }
                }
                Ok(Step::End) => break,
                Ok(Step::More) | Err(_) => return false,
            }
        }
        self.expect = Expect::No;
        true
    }
}

impl<R: AsyncRead + Unpin + Send> Wire for ReadSide<R> {
    fn poll_body(&mut self, request: u64, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        if request != self.request {
            return Poll::Ready(Some(Err(io::Error::other("the request is over"))));
        }
        if self.expect == Expect::Waiting {
            self.expect = Expect::Due;
        }
        loop {
            match self.body.decode(&mut self.buf) {
                Ok(Step::Data(d)) => return Poll::Ready(Some(Ok(d))),
                Ok(Step::End) => return Poll::Ready(None),
                Ok(Step::More) => {}
                Err(e) => {
                    self.broken = true;
                    self.body = Decoder::new(BodyFraming::Length(0));
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        e.to_string(),
                    ))));
                }
            }
            if self.eof {
                return Poll::Ready(Some(Err(self.closed())));
            }
            match ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    self.eof = true;
                    return Poll::Ready(Some(Err(self.closed())));
                }
                Ok(_) => {}
                Err(e) => {
                    self.eof = true;
                    self.broken = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    fn body_ended(&self, request: u64) -> bool {
        request != self.request || self.body.is_done()
    }

    fn body_remaining(&self, request: u64) -> Option<u64> {
        if request != self.request {
            return Some(0);
        }
        self.body.remaining()
    }
}

impl<R> ReadSide<R> {
    fn closed(&mut self) -> io::Error {
        self.broken = true;
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the client closed the connection mid-body",
        )
    }
}
