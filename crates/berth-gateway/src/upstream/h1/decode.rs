//! The response body's framing: content-length, chunked (decoded: the data goes on, the chunk
//! sizes and trailers do not) or up to the connection's end. Pure: takes bytes out of the read
//! buffer.

use bytes::{Buf, Bytes, BytesMut};

use super::H1Error;
use super::head::BodyFraming;

/// The longest chunk-size line (with extensions) or trailer section accepted.
const MAX_LINE: usize = 4096;
const MAX_TRAILERS: usize = 16 * 1024;

/// Where a body's decoding stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decoder {
    /// Bytes left of a `Content-Length` body.
    Length(u64),
    /// A chunked body.
    Chunked(Chunk),
    /// Runs until the worker closes the connection.
    Close,
    /// Over.
    Done,
}

/// Where a chunked body stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Data bytes left of the current chunk.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one (bytes seen so far).
    Trailers(usize),
}

/// One step of decoding.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Body bytes.
    Data(Bytes),
    /// More input is needed.
    More,
    /// The body is over.
    End,
}

impl Decoder {
    /// The decoder of a body framed as `framing`.
    pub(crate) fn new(framing: BodyFraming) -> Self {
        match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => Self::Done,
            BodyFraming::Length(n) => Self::Length(n),
            BodyFraming::Chunked => Self::Chunked(Chunk::Size),
            BodyFraming::Close => Self::Close,
        }
    }

    /// Whether the body is over.
    pub(crate) fn is_done(&self) -> bool {
        *self == Self::Done
    }

    /// Takes the next piece of the body out of `buf`.
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, H1Error> {
        loop {
            match self {
                Self::Done => return Ok(Step::End),
                Self::Length(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let n = (*left).min(buf.len() as u64);
                    *left -= n;
                    let data = take(buf, n as usize);
                    if *left == 0 {
                        *self = Self::Done;
                    }
                    return Ok(Step::Data(data));
                }
                Self::Close => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    return Ok(Step::Data(take(buf, buf.len())));
                }
                Self::Chunked(chunk) => match chunked(chunk, buf)? {
                    Some(Step::End) => *self = Self::Done,
                    Some(step) => return Ok(step),
                    None => {}
                },
            }
        }
    }

    /// The worker closed the connection: the end of a close-delimited body, an error otherwise.
    pub(crate) fn at_eof(&mut self) -> Result<Step, H1Error> {
        match self {
            Self::Done | Self::Close => {
                *self = Self::Done;
                Ok(Step::End)
            }
            _ => Err(H1Error::Closed("the worker closed the connection mid-body")),
        }
    }

    /// The bytes still to come, when known.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self {
            Self::Length(n) => Some(*n),
            Self::Done => Some(0),
            _ => None,
        }
    }
}

/// One step of a chunked body: `Some(step)` to return, `None` to go on (state moved).
fn chunked(state: &mut Chunk, buf: &mut BytesMut) -> Result<Option<Step>, H1Error> {
    match state {
        Chunk::Size => {
            let Some((end, used)) = line(buf, MAX_LINE)? else {
                return Ok(Some(Step::More));
            };
            let size = chunk_size(&buf[..end])?;
            buf.advance(used);
            *state = if size == 0 {
                Chunk::Trailers(0)
            } else {
                Chunk::Data(size)
            };
            Ok(None)
        }
        Chunk::Data(left) => {
            if buf.is_empty() {
                return Ok(Some(Step::More));
            }
            let n = (*left).min(buf.len() as u64);
            *left -= n;
            let data = take(buf, n as usize);
            if *left == 0 {
                *state = Chunk::DataEnd;
            }
            Ok(Some(Step::Data(data)))
        }
        Chunk::DataEnd => {
            if buf.len() < 2 {
                return Ok(Some(Step::More));
            }
            if buf[..2] != *b"\r\n" {
                return Err(H1Error::Body("chunk data not followed by CRLF"));
            }
            buf.advance(2);
            *state = Chunk::Size;
            Ok(None)
        }
        Chunk::Trailers(seen) => {
            let Some((end, used)) = line(buf, MAX_TRAILERS - *seen)? else {
                return Ok(Some(Step::More));
            };
            buf.advance(used);
            if end == 0 {
                return Ok(Some(Step::End));
            }
            *seen += used;
            Ok(None)
        }
    }
}

/// The line at the start of `buf`: where its content ends (before CRLF or LF) and how many
/// bytes it takes with its end; `None` when no line end is there yet; an error past `max`
/// bytes without one.
fn line(buf: &[u8], max: usize) -> Result<Option<(usize, usize)>, H1Error> {
    let Some(end) = memchr::memchr(b'\n', buf) else {
        if buf.len() > max {
            return Err(H1Error::Body("chunk line too long"));
        }
        return Ok(None);
    };
    if end > max {
        return Err(H1Error::Body("chunk line too long"));
    }
    let content = if end > 0 && buf[end - 1] == b'\r' {
        end - 1
    } else {
        end
    };
    Ok(Some((content, end + 1)))
}

/// The hex size at the start of a chunk-size line (extensions after `;` ignored).
fn chunk_size(line: &[u8]) -> Result<u64, H1Error> {
    let digits = line
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(H1Error::Body("invalid chunk size"));
    }
    let mut n = 0u64;
    for d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(H1Error::Body("invalid chunk size")),
        };
        n = n * 16 + u64::from(v);
    }
    Ok(n)
}

/// `n` bytes split off the front of `buf` (no copy: the data shares the read buffer, which is
/// reused once the data is dropped).
fn take(buf: &mut BytesMut, n: usize) -> Bytes {
    buf.split_to(n).freeze()
}
