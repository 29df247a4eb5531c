//! Message heads on the client side: the request head parsed (httparse) into an
//! `http::Request` whose header values are slices of the head's bytes, with its body framing and
//! keep-alive; the response head written from the response's parts into a reused buffer. Pure:
//! no IO.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::EXPECT;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, Version};

use crate::upstream::h1::{
    BodyFraming, Fields, FramingHeaders, Span, header_spans, itoa, keep_spans, parse_length,
    same_name, take_spans,
};

/// Headers a request head may have (more: 431).
pub(crate) const MAX_HEADERS: usize = 100;
/// The longest request head (more: 431).
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// Why a request head was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Not valid HTTP/1 (400).
    Bad(String),
    /// Longer than [`MAX_HEAD`] or more than [`MAX_HEADERS`] headers (431).
    TooLarge(&'static str),
}

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) req: Request<()>,
    /// The request body's framing: `Length` (0 for none) or `Chunked`.
    pub(crate) body: BodyFraming,
    /// The client may send another request after this one.
    pub(crate) keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for a 100 before the body.
    pub(crate) expect_continue: bool,
}

/// Parses the request head at the start of `buf` and takes it off; `None`: not whole yet. Its
/// headers go into `spare` (an empty map, taken; its tables are reused).
pub(crate) fn parse_request(
    buf: &mut BytesMut,
    spare: &mut HeaderMap,
) -> Result<Option<Head>, HeadError> {
    let mut slots = [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HeadError::TooLarge("more than 100 headers"));
        }
        Err(e) => return Err(HeadError::Bad(e.to_string())),
    };
    if len > MAX_HEAD {
        return Err(HeadError::TooLarge("request head larger than 64 KiB"));
    }
    let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
        .map_err(|e| HeadError::Bad(e.to_string()))?;
    let version = if req.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    // where the target, each name and value lie in the head, so the head can be split off
    let path = req.path.unwrap_or_default();
    let target = path.as_ptr() as usize - buf.as_ptr() as usize..;
    let target = target.start..target.start + path.len();
    let mut spans = take_spans();
    spans.extend(header_spans(buf, req.headers));
    let head = buf.split_to(len).freeze();
    let headers = std::mem::take(spare);
    let parsed = request_head(&head, target, &spans, method, version, headers).map(Some);
    keep_spans(spans);
    parsed
}

/// The request head in `head` (its target at `target`, its headers at `spans`, put in the
/// empty `headers`).
fn request_head(
    head: &Bytes,
    target: std::ops::Range<usize>,
    spans: &[Span],
    method: Method,
    version: Version,
    mut headers: HeaderMap,
) -> Result<Head, HeadError> {
    let uri = Uri::from_maybe_shared(head.slice(target))
        .map_err(|e| HeadError::Bad(format!("invalid request target: {e}")))?;
    debug_assert!(headers.is_empty());
    headers.reserve(spans.len());
    let mut framing_headers = FramingHeaders::new(version);
    let mut expect_continue = false;
    for &[ns, ne, vs, ve] in spans {
        let name = header_name(&head[ns..ne]).map_err(|e| HeadError::Bad(e.to_string()))?;
        let raw = &head[vs..ve];
        let framing = framing_headers.see(&name, raw).map_err(bad)?;
        if !framing && name == EXPECT {
            expect_continue = version == Version::HTTP_11
                && raw.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
        let value = HeaderValue::from_maybe_shared(head.slice(vs..ve))
            .map_err(|e| HeadError::Bad(e.to_string()))?;
        headers.append(name, value);
    }
    let FramingHeaders {
        length,
        chunked,
        keep_alive,
        ..
    } = framing_headers;
    // a body whose framing is not certain cannot be read safely (request smuggling): refused
    let body = match (chunked, length) {
        (Some(_), Some(_)) => {
            return Err(HeadError::Bad(
                "both transfer-encoding and content-length".to_owned(),
            ));
        }
        (Some(true), None) if version == Version::HTTP_11 => BodyFraming::Chunked,
        (Some(_), None) => return Err(bad("transfer-encoding")),
        (None, n) => BodyFraming::Length(n.unwrap_or(0)),
    };
    let mut req = Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = version;
    *req.headers_mut() = headers;
    Ok(Head {
        req,
        body,
        keep_alive,
        expect_continue,
    })
}

/// The routing-key header most requests carry: not a standard name, so `from_bytes` would copy
/// it into a new allocation per request; this one is static.
const ROUTING_KEY: HeaderName = HeaderName::from_static("x-smg-routing-key");

/// A header's name as `HeaderName::from_bytes` makes it, the routing-key header without a copy.
fn header_name(raw: &[u8]) -> Result<HeaderName, http::header::InvalidHeaderName> {
    if raw.eq_ignore_ascii_case(ROUTING_KEY.as_str().as_bytes()) {
        return Ok(ROUTING_KEY);
    }
    HeaderName::from_bytes(raw)
}

fn bad(what: &str) -> HeadError {
    HeadError::Bad(format!("invalid {what}"))
}

/// How a response body goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Out {
    /// No body (a `HEAD` request, 204, 304, 1xx).
    Empty,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Up to the connection's close (an HTTP/1.0 client and no known length).
    Close,
}

/// What the response head needs to know of the request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange {
    pub(crate) head_request: bool,
    pub(crate) version: Version,
    /// Whether the connection may stay open after this response (the request's say).
    pub(crate) keep_alive: bool,
}

/// Writes the head of a response (`status`, the worker's header fields `worker` if any, then
/// `headers`, a body of `exact` length when known) to `out`; returns the body's framing and
/// whether the connection stays open after it. A name in `headers` replaces the worker's
/// fields of that name (the gateway's own `x-request-id`, `x-smg-routed-worker-id`); the
/// worker's names are written lowercased, as a header map would.
pub(crate) fn write_response_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    worker: Option<&Fields>,
    exact: Option<u64>,
    ex: Exchange,
) -> (Out, bool) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut w = HeadWriter {
        out,
        keep_alive: ex.keep_alive,
        length: None,
        dated: false,
    };
    for (name, value) in worker.into_iter().flat_map(Fields::iter) {
        if !headers.keys().any(|n| same_name(name, n.as_str())) {
            w.field(name, value, true);
        }
    }
    for (name, value) in headers {
        w.field(name.as_str().as_bytes(), value.as_bytes(), false);
    }
    let HeadWriter {
        out,
        mut keep_alive,
        length,
        dated,
    } = w;
    if !dated {
        put_date(out);
    }
    let bodiless = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = if bodiless {
        Out::Empty
    } else if ex.head_request {
        if let (None, Some(n)) = (length, exact) {
            put_length(out, n);
        }
        Out::Empty
    } else if let Some(n) = length {
        Out::Length(n)
    } else if let Some(n) = exact {
        put_length(out, n);
        Out::Length(n)
    } else if ex.version == Version::HTTP_11 {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        Out::Chunked
    } else {
        keep_alive = false;
        Out::Close
    };
    if !keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    } else if ex.version == Version::HTTP_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_alive)
}

/// A response head's header lines as they are written, and what they said.
struct HeadWriter<'a> {
    out: &'a mut Vec<u8>,
    keep_alive: bool,
    /// The first valid `Content-Length`.
    length: Option<u64>,
    /// A `Date` was written.
    dated: bool,
}

impl HeadWriter<'_> {
    /// Writes one header line (the name lowercased when `lower`), except the framing headers,
    /// which are the writer's: `Transfer-Encoding` is dropped, `Connection` only read (for
    /// `close`), and of several `Content-Length`s the first valid one is kept.
    fn field(&mut self, name: &[u8], value: &[u8], lower: bool) {
        match name.len() {
            17 if same_name(name, "transfer-encoding") => return,
            10 if same_name(name, "connection") => {
                if value
                    .split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
                {
                    self.keep_alive = false;
                }
                return;
            }
            14 if same_name(name, "content-length") => match parse_length(value) {
                Some(n) if self.length.is_none() => self.length = Some(n),
                _ => return,
            },
            4 if same_name(name, "date") => self.dated = true,
            _ => {}
        }
        let at = self.out.len();
        put_header(self.out, name, value);
        if lower {
            self.out[at..at + name.len()].make_ascii_lowercase();
        }
    }
}

fn put_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

fn put_length(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa(n, &mut [0; 20]));
    out.extend_from_slice(b"\r\n");
}

thread_local! {
    /// The `Date` header's value, formatted once per second per thread.
    static DATE_CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

fn put_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE_CACHE.with_borrow_mut(|(at, text)| {
        if *at != secs {
            *at = secs;
            *text = httpdate::fmt_http_date(now);
        }
        put_header(out, b"date", text.as_bytes());
    });
}

/// The `100 Continue` an `Expect: 100-continue` request waits for.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
