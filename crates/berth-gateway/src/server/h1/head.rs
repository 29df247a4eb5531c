//! Message heads on the client side: the request head parsed (httparse) into its method,
//! target (the head's bytes, [`Target`]: no `Uri`), version and header fields as the head's bytes and
//! spans ([`Fields`]: no header map), with its body framing and keep-alive; the response head written from the response's parts into a reused buffer. Pure:
//! no IO.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::BytesMut;
use http::{HeaderMap, Method, StatusCode, Version};

use crate::fields::{Fields, Span, Target, header_spans, keep_spans, plain, same_name, take_spans};
use crate::proxy::{hop_by_hop, names_fields, strip_response_fields};
use crate::upstream::h1::{BodyFraming, FramingHeaders, itoa, parse_length};

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
    pub(crate) method: Method,
    /// The target as the head's bytes (no `Uri` is built).
    pub(crate) target: Target,
    pub(crate) version: Version,
    /// The header fields, as the client sent them (no header map is built).
    pub(crate) fields: Fields,
    /// The request body's framing: `Length` (0 for none) or `Chunked`.
    pub(crate) body: BodyFraming,
    /// The client may send another request after this one.
    pub(crate) keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for a 100 before the body.
    pub(crate) expect_continue: bool,
}

/// Parses the request head at the start of `buf` and takes it off; `None`: not whole yet. A
/// head in its plain form is read without httparse (`fields::plain`: the same spans).
pub(crate) fn parse_request(buf: &mut BytesMut) -> Result<Option<Head>, HeadError> {
    let mut spans = take_spans();
    let plain = plain::request_line(buf).and_then(|line| {
        let len = plain::fields(buf, line.end, MAX_HEADERS, &mut spans)?;
        Some((len, line))
    });
    let lowered = plain.is_some();
    let (len, method, target, minor) = match plain {
        Some((len, line)) => (len, line.method, line.target, line.minor),
        None => {
            spans.clear();
            match parse_with_httparse(buf, &mut spans) {
                Ok(Some(read)) => read,
                other => {
                    keep_spans(spans);
                    return other.map(|_| None);
                }
            }
        }
    };
    if len > MAX_HEAD {
        return Err(HeadError::TooLarge("request head larger than 64 KiB"));
    }
    let method = Method::from_bytes(&buf[method]).map_err(|e| HeadError::Bad(e.to_string()))?;
    let version = if minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let head = buf.split_to(len).freeze();
    let target = Target::parse(&head, target)
        .map_err(|e| HeadError::Bad(format!("invalid request target: {e}")))?;
    let fields = if lowered {
        Fields::new_lowered(head, spans)
    } else {
        Fields::new(head, spans)
    };
    request_head(fields, target, method, version).map(Some)
}

/// A request head's length, where its method and target lie, and its minor version.
type LineRead = (usize, Range<usize>, Range<usize>, u8);

/// The request head at the start of `buf` read by httparse; its fields' spans pushed to
/// `spans`. `None`: not whole yet.
fn parse_with_httparse(buf: &[u8], spans: &mut Vec<Span>) -> Result<Option<LineRead>, HeadError> {
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
    // where the method, the target, each name and value lie in the head, so the head can be
    // split off
    let at = |part: &str| {
        let start = part.as_ptr() as usize - buf.as_ptr() as usize;
        start..start + part.len()
    };
    // a whole head has both
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Err(HeadError::Bad("invalid request line".to_owned()));
    };
    let (method, target) = (at(method), at(target));
    spans.extend(header_spans(buf, req.headers));
    Ok(Some((len, method, target, req.version.unwrap_or(1))))
}

/// The request head with target `target` and header fields `fields`.
fn request_head(
    fields: Fields,
    target: Target,
    method: Method,
    version: Version,
) -> Result<Head, HeadError> {
    let mut framing_headers = FramingHeaders::new(version);
    let mut expect_continue = false;
    for (name, raw) in fields.iter() {
        let framing = framing_headers.see(name, raw).map_err(bad)?;
        if !framing && same_name(name, "expect") {
            expect_continue = version == Version::HTTP_11
                && raw.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
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
    Ok(Head {
        method,
        target,
        version,
        fields,
        body,
        keep_alive,
        expect_continue,
    })
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
/// `headers`, then `own` (the gateway's own headers of a worker's response: lowercase names),
/// a body of `exact` length when known) to `out`; returns the body's framing and whether the
/// connection stays open after it. A name in `headers` or `own` replaces the worker's fields
/// of that name (`x-request-id`, `x-smg-routed-worker-id`); the worker's names are written
/// lowercased, as a header map would.
pub(crate) fn write_response_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    worker: Option<&Fields>,
    own: &[(&str, &[u8])],
    exact: Option<u64>,
    ex: Exchange,
) -> (Out, bool) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let fresh = HeadState {
        keep_alive: ex.keep_alive,
        length: None,
        dated: false,
    };
    let mut w = fresh;
    if let Some(fields) = worker {
        // the gateway's own names (a proxied response has two) replace the worker's
        let replaced = |name: &[u8]| {
            own.iter().any(|(o, _)| same_name(name, o))
                || (!headers.is_empty() && headers.keys().any(|n| same_name(name, n.as_str())))
        };
        // One pass: the worker's hop-by-hop fields are dropped as the rest are written.
        let at = out.len();
        let mut listing = false;
        fields.write_kept(out, |name, value| {
            !worker_hop(name, value, &mut listing) && !replaced(name) && w.admit(name, value)
        });
        if listing {
            // A `Connection` field names other fields (rare): written again without them.
            out.truncate(at);
            w = fresh;
            let mut kept = fields.clone();
            strip_response_fields(&mut kept);
            kept.write_kept(out, |name, value| !replaced(name) && w.admit(name, value));
        }
    }
    let map = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    for (name, value) in map.chain(own.iter().copied()) {
        if w.admit(name.as_bytes(), value) {
            put_header(out, name.as_bytes(), value);
        }
    }
    let HeadState {
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

/// What a response head's header lines said, as they are written.
#[derive(Clone, Copy)]
struct HeadState {
    keep_alive: bool,
    /// The first valid `Content-Length`.
    length: Option<u64>,
    /// A `Date` was written.
    dated: bool,
}

impl HeadState {
    /// Whether a header line is written, noting what it says. The framing headers are the
    /// writer's: `Transfer-Encoding` is dropped, `Connection` only read (for `close`), and of
    /// several `Content-Length`s the first valid one is kept.
    #[inline]
    fn admit(&mut self, name: &[u8], value: &[u8]) -> bool {
        // by length first, where it is called: most names are none of the four
        if !matches!(name.len(), 4 | 10 | 14 | 17) {
            return true;
        }
        self.admit_named(name, value)
    }

    /// [`Self::admit`] for a name of one of its four lengths.
    #[inline(never)]
    fn admit_named(&mut self, name: &[u8], value: &[u8]) -> bool {
        match name.len() {
            17 if same_name(name, "transfer-encoding") => false,
            10 if same_name(name, "connection") => {
                if value
                    .split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
                {
                    self.keep_alive = false;
                }
                false
            }
            14 if same_name(name, "content-length") => match parse_length(value) {
                Some(n) if self.length.is_none() => {
                    self.length = Some(n);
                    true
                }
                _ => false,
            },
            4 if same_name(name, "date") => {
                self.dated = true;
                true
            }
            _ => true,
        }
    }
}

/// Whether a field of a worker's answer is dropped as its head is written: its hop-by-hop
/// fields (RFC 9110 section 7.6.1, as `proxy::hop_by_hop`) and `Transfer-Encoding`, in one
/// look at its name. Its `Connection` is the worker's connection's, not the client's (it does
/// not end the client's): it sets `listing` when it names other fields to drop. The fields
/// kept then pass the same checks as before the drop moved here (`replaced`, then
/// [`HeadState::admit`]), so a field the gateway's own headers replace notes nothing.
#[inline]
fn worker_hop(name: &[u8], value: &[u8], listing: &mut bool) -> bool {
    match name.len() {
        10 if same_name(name, "connection") => {
            *listing |= names_fields(value);
            true
        }
        2 | 7 | 10 | 16..=19 => hop_by_hop(name) || same_name(name, "transfer-encoding"),
        _ => false,
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
