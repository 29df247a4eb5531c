//! A purpose-built HTTP/1.1 client for the proxied request: one exchange at a time on a
//! connection the request's own task drives.
//!
//! hyper's client runs every connection as a task of its own and talks to it through channels:
//! each request crossed tasks for the send, the head, every body frame and the end, allocated
//! its channels and callback, and re-reserved an 8 KiB read buffer per head. Here the request
//! task writes the request and reads the response head itself ([`send`]), and the response body
//! ([`RespBody`]) reads and decodes the worker's bytes in whichever task polls it (the client
//! connection's). A connection owns one read and one write buffer for its whole life; a head's
//! header values share one copy of the head's bytes.
//!
//! - `head.rs`: the request head written from the parts; the response head parsed (httparse),
//!   its framing and whether the connection stays open.
//! - `decode.rs`: the response body's framing (content-length, chunked, close-delimited).
//! - `conn.rs`: a connection ([`H1Conn`], generic over its IO: plain TCP or TLS), its buffers,
//!   and the upload (the request body, content-length or chunked framed).
//! - `exchange.rs`: one exchange ([`send`]) and the response body ([`RespBody`]), which keeps
//!   driving an upload the worker answered before it ended, and hands the connection back
//!   ([`GiveBack`]) once the response was read to its end on a connection that stays open.
//!
//! What it does not do (the request path never needs it): pipelining, protocol upgrades
//! (a 101 is an error), request trailers, `Expect: 100-continue` waits (informational heads are
//! skipped).

mod conn;
mod decode;
mod exchange;
mod head;

pub(crate) use conn::{H1Conn, put_chunk};
pub(crate) use decode::{Decoder, Step};
pub(crate) use exchange::{GiveBack, RespBody, send};
pub(crate) use head::{BodyFraming, FramingHeaders, ReqHead, itoa, parse_length};

/// Why an exchange or a response body failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum H1Error {
    /// Reading from or writing to the worker failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The worker closed the connection too early.
    #[error("{0}")]
    Closed(&'static str),
    /// The request could not be framed (its headers disagree with its body).
    #[error("request: {0}")]
    Request(&'static str),
    /// The worker's response head is not valid HTTP/1.
    #[error("invalid response head: {0}")]
    Head(String),
    /// The worker's response body is not validly framed.
    #[error("invalid response body: {0}")]
    Body(&'static str),
    /// The client's request body failed (too slow, too large, gone).
    #[error("request body: {0}")]
    Upload(String),
}

#[cfg(test)]
mod tests;
