//! Message heads: the request head written from the client's head into a reused buffer, and
//! the worker's response head parsed (httparse) with its body framing. Pure: no IO.

use bytes::{Buf, BytesMut};
use http::{HeaderValue, Method, StatusCode, Version};

use super::H1Error;
use crate::fields::{Fields, Span, header_spans, keep_spans, plain, same_name, take_spans};

/// Headers a response head may have (httparse's table; more is an error).
const MAX_HEADERS: usize = 100;

/// How a request body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReqFraming {
    /// `Content-Length: n`: exactly `n` bytes follow.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The head of a request to a worker, written straight from the client's parts (no header map
/// is built for it).
#[derive(Clone, Copy)]
pub(crate) struct ReqHead<'a> {
    pub(crate) method: &'a Method,
    /// The worker's path prefix (its URL's path, may be empty) and the client's path and query
    /// (the bytes of its head's target).
    pub(crate) prefix: &'a str,
    pub(crate) path: &'a [u8],
    /// The worker's `Host`.
    pub(crate) host: Option<&'a HeaderValue>,
    /// The client's header fields; those `forward` accepts (by name as sent) go on, except
    /// `Host`, `Transfer-Encoding` (the framing is the writer's) and any named in `Connection`;
    /// names are written lowercased.
    pub(crate) headers: &'a Fields,
    pub(crate) forward: fn(&[u8]) -> bool,
    /// A body the gateway rewrote: its length replaces the client's `Content-Length`.
    pub(crate) length: Option<u64>,
}

impl std::fmt::Debug for ReqHead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReqHead")
            .field("method", self.method)
            .field("path", &String::from_utf8_lossy(self.path))
            .finish_non_exhaustive()
    }
}

/// Writes `head` to `out` and returns its body framing: the rewritten length, else the
/// client's `Content-Length`, else `exact` (the body's known length: `Content-Length` is added,
/// none for an empty body of a method without payload semantics), else chunked.
pub(crate) fn write_request_head(
    out: &mut Vec<u8>,
    head: &ReqHead<'_>,
    exact: Option<u64>,
) -> Result<ReqFraming, H1Error> {
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.prefix.as_bytes());
    out.extend_from_slice(head.path);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(host) = head.host {
        put_header(out, b"host", host.as_bytes());
    }
    let listing = head.headers.first("connection").is_some();
    let mut framing = head.length.map(ReqFraming::Length);
    let mut refused = None;
    head.headers.write_kept(out, |name, value| {
        if same_name(name, "host")
            || same_name(name, "transfer-encoding")
            || !(head.forward)(name)
            || (listing && named_in_connection(head.headers, name))
        {
            return false;
        }
        if !same_name(name, "content-length") {
            return true;
        }
        if head.length.is_some() || refused.is_some() {
            return false;
        }
        let Some(n) = parse_length(value) else {
            refused = Some("invalid content-length");
            return false;
        };
        match framing {
            Some(f) if f != ReqFraming::Length(n) => {
                refused = Some("conflicting content-length");
                false
            }
            Some(_) => false,
            None => {
                framing = Some(ReqFraming::Length(n));
                true
            }
        }
    });
    if let Some(why) = refused {
        return Err(H1Error::Request(why));
    }
    let framing = match (framing, exact) {
        (Some(ReqFraming::Length(n)), _) if head.length == Some(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa(n, &mut [0; 20]));
            out.extend_from_slice(b"\r\n");
            ReqFraming::Length(n)
        }
        (Some(f), _) => f,
        (None, Some(0)) if !payload_method(head.method) => ReqFraming::Length(0),
        (None, Some(n)) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa(n, &mut [0; 20]));
            out.extend_from_slice(b"\r\n");
            ReqFraming::Length(n)
        }
        (None, None) => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            ReqFraming::Chunked
        }
    };
    out.extend_from_slice(b"\r\n");
    Ok(framing)
}

fn put_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Whether a `Connection` header of `headers` names `name` (a hop-by-hop header of the
/// client's connection). Only looked at when there is a `Connection` header.
fn named_in_connection(headers: &Fields, name: &[u8]) -> bool {
    headers
        .iter()
        .filter(|(n, _)| same_name(n, "connection"))
        .any(|(_, v)| {
            v.split(|b| *b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(name))
        })
}

/// Methods whose empty body is still announced (`Content-Length: 0`).
fn payload_method(method: &Method) -> bool {
    *method == Method::POST || *method == Method::PUT || *method == Method::PATCH
}

/// The decimal digits of `n`, written at the end of `buf`.
pub(crate) fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// A decimal `Content-Length` value (digits only, at most 19 of them).
pub(crate) fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

/// How a response body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// No body (a response to `HEAD`, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Up to the end of the connection.
    Close,
}

/// A worker's parsed response head.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub(crate) status: StatusCode,
    pub(crate) version: Version,
    /// Its header fields as the worker sent them (no header map is built).
    pub(crate) fields: Fields,
    pub(crate) framing: BodyFraming,
    /// The connection may carry another request after this response.
    pub(crate) keep_alive: bool,
}

/// What the start of a read buffer held.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// Not a whole head yet (nothing taken).
    Partial,
    /// An informational (1xx) head: taken off and skipped, the final head follows.
    Informational,
    /// A final response head, taken off the buffer.
    Head(ResponseHead),
}

/// Parses the response head at the start of `buf` (the answer to a `method` request) and takes
/// it off. The header values are slices of the head's bytes split off `buf`: no copy, and the
/// buffer is reused once the head is dropped. A head in its plain form is read without
/// httparse (`fields::plain`: the same spans).
pub(crate) fn parse_response(buf: &mut BytesMut, method: &Method) -> Result<Parsed, H1Error> {
    let mut spans = take_spans();
    let plain = plain::status_line(buf).and_then(|(minor, code, start)| {
        let len = plain::fields(buf, start, MAX_HEADERS, &mut spans)?;
        Some((len, minor, code))
    });
    let lowered = plain.is_some();
    let (len, minor, code) = match plain {
        Some(read) => read,
        None => {
            spans.clear();
            match parse_with_httparse(buf, &mut spans) {
                Ok(Some(read)) => read,
                other => {
                    keep_spans(spans);
                    return other.map(|_| Parsed::Partial);
                }
            }
        }
    };
    let status = StatusCode::from_u16(code).map_err(|e| H1Error::Head(e.to_string()))?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(H1Error::Head(
            "protocol upgrades are not proxied".to_owned(),
        ));
    }
    if status.is_informational() {
        keep_spans(spans);
        buf.advance(len);
        return Ok(Parsed::Informational);
    }
    let version = if minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let head = buf.split_to(len).freeze();
    let fields = if lowered {
        Fields::new_lowered(head, spans)
    } else {
        Fields::new(head, spans)
    };
    response_head(fields, method, status, version)
}

/// The response head at the start of `buf` read by httparse: its length, minor version and
/// code; its fields' spans pushed to `spans`. `None`: not whole yet.
fn parse_with_httparse(
    buf: &[u8],
    spans: &mut Vec<Span>,
) -> Result<Option<(usize, u8, u16)>, H1Error> {
    let mut slots = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, buf, &mut slots);
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(H1Error::Head(e.to_string())),
    };
    // where each name and value lies in the head, so the head can be split off after
    spans.extend(header_spans(buf, res.headers));
    Ok(Some((
        len,
        res.version.unwrap_or(1),
        res.code.unwrap_or_default(),
    )))
}

/// The response head whose header fields are `fields`.
fn response_head(
    fields: Fields,
    method: &Method,
    status: StatusCode,
    version: Version,
) -> Result<Parsed, H1Error> {
    let mut framing_headers = FramingHeaders::new(version);
    for (name, value) in fields.iter() {
        framing_headers.see(name, value).map_err(bad)?;
    }
    let FramingHeaders {
        length,
        chunked,
        keep_alive,
        ..
    } = framing_headers;
    let framing = if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        BodyFraming::Empty
    } else {
        match (chunked, length) {
            (Some(true), _) => BodyFraming::Chunked,
            (Some(false), _) => BodyFraming::Close,
            (None, Some(n)) => BodyFraming::Length(n),
            (None, None) => BodyFraming::Close,
        }
    };
    // a chunked body with a length as well was tampered with somewhere: not reused after
    let keep_alive =
        keep_alive && framing != BodyFraming::Close && !(chunked.is_some() && length.is_some());
    Ok(Parsed::Head(ResponseHead {
        status,
        version,
        fields,
        framing,
        keep_alive,
    }))
}

fn bad(what: &str) -> H1Error {
    H1Error::Head(format!("invalid {what}"))
}

/// What a message's framing headers say (`Content-Length`, `Transfer-Encoding`, `Connection`),
/// read header by header: the request heads of the client side and the response heads of the
/// worker side are read by the same rules.
#[derive(Debug)]
pub(crate) struct FramingHeaders {
    version: Version,
    /// The body's length; two that differ are refused.
    pub(crate) length: Option<u64>,
    /// Whether the last transfer coding is `chunked` (`None`: no `Transfer-Encoding`).
    pub(crate) chunked: Option<bool>,
    /// The connection may carry another message: HTTP/1.1 unless `Connection: close`, HTTP/1.0
    /// only with `Connection: keep-alive`.
    pub(crate) keep_alive: bool,
}

impl FramingHeaders {
    pub(crate) fn new(version: Version) -> Self {
        Self {
            version,
            length: None,
            chunked: None,
            keep_alive: version == Version::HTTP_11,
        }
    }

    /// Reads one header (its name as sent, any case): `Ok(true)` when it was a framing header,
    /// `Err` with what is invalid.
    #[inline]
    pub(crate) fn see(&mut self, name: &[u8], raw: &[u8]) -> Result<bool, &'static str> {
        // by length first, where it is called: most names are none of the three and cost a
        // comparison, not a call
        if !matches!(name.len(), 10 | 14 | 17) {
            return Ok(false);
        }
        self.see_framing(name, raw)
    }

    /// [`Self::see`] for a name of a framing header's length.
    #[inline(never)]
    fn see_framing(&mut self, name: &[u8], raw: &[u8]) -> Result<bool, &'static str> {
        if same_name(name, "content-length") {
            let n = parse_length(raw).ok_or("content-length")?;
            if self.length.is_some_and(|l| l != n) {
                return Err("content-length");
            }
            self.length = Some(n);
        } else if same_name(name, "transfer-encoding") {
            // the last coding decides: chunked, or (a response) the body runs to the end
            self.chunked = Some(last_token(raw).eq_ignore_ascii_case(b"chunked"));
        } else if same_name(name, "connection") {
            // the usual values whole, compared by words; a list token by token
            if same_name(raw, "keep-alive") {
                if self.version == Version::HTTP_10 {
                    self.keep_alive = true;
                }
                return Ok(true);
            }
            if same_name(raw, "close") {
                self.keep_alive = false;
                return Ok(true);
            }
            for token in raw.split(|b| *b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    self.keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive")
                    && self.version == Version::HTTP_10
                {
                    self.keep_alive = true;
                }
            }
        } else {
            return Ok(false);
        }
        Ok(true)
    }
}

fn last_token(v: &[u8]) -> &[u8] {
    v.rsplit(|b| *b == b',')
        .next()
        .unwrap_or_default()
        .trim_ascii()
}
