//! Building responses: JSON bodies, the one error shape, and SSE framing.
//!
//! Errors use one OpenAI-style shape, `{"error": {"message", "type", "param", "code"}}`; injected
//! errors also carry `x-sim-fault: error` so a test can tell them from real refusals.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Response, StatusCode, header};
use serde::Serialize;
use serde_json::json;

use crate::body::SimBody;

/// Every response the worker sends.
pub(crate) type SimResponse = Response<SimBody>;

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const SSE: HeaderValue = HeaderValue::from_static("text/event-stream");

/// Serializes to JSON (cannot fail for `Value` or the worker's own wire structs, which have
/// string keys and no fallible `Serialize`).
pub(crate) fn to_bytes<T: Serialize + ?Sized>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// A JSON response.
pub(crate) fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> SimResponse {
    json_bytes(status, to_bytes(value))
}

/// A JSON response from an already serialized body.
pub(crate) fn json_bytes(status: StatusCode, body: Bytes) -> SimResponse {
    with_body(status, JSON, SimBody::full(body))
}

/// A response with a body and content type.
pub(crate) fn with_body(
    status: StatusCode,
    content_type: HeaderValue,
    body: SimBody,
) -> SimResponse {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    resp
}

/// A JSON response whose body is cut halfway (headers sent, then the connection aborts).
pub(crate) fn json_cut(body: Bytes) -> SimResponse {
    with_body(StatusCode::OK, JSON, SimBody::cut(body))
}

/// An SSE response fed by a streaming task.
pub(crate) fn sse(body: SimBody) -> SimResponse {
    let mut resp = with_body(StatusCode::OK, SSE, body);
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// The one error shape.
pub(crate) fn error(
    status: StatusCode,
    kind: &str,
    message: &str,
    param: Option<&str>,
) -> SimResponse {
    json(
        status,
        &json!({"error": {"message": message, "type": kind, "param": param, "code": status.as_u16()}}),
    )
}

/// 400 for a request the engine cannot parse.
pub(crate) fn bad_request(message: &str) -> SimResponse {
    error(StatusCode::BAD_REQUEST, "BadRequestError", message, None)
}

/// 404 for a model this worker does not serve (as vLLM and SGLang answer).
pub(crate) fn unknown_model(model: &str) -> SimResponse {
    error(
        StatusCode::NOT_FOUND,
        "NotFoundError",
        &format!("The model `{model}` does not exist."),
        Some("model"),
    )
}

/// An injected error with the chosen status.
pub(crate) fn injected(status: u16) -> SimResponse {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = error(
        status,
        "sim_injected_error",
        "error injected by berth sim-worker",
        None,
    );
    resp.headers_mut()
        .insert("x-sim-fault", HeaderValue::from_static("error"));
    resp
}

/// One SSE event: `data: <json>\n\n`.
pub(crate) fn sse_data<T: Serialize + ?Sized>(value: &T) -> Bytes {
    let mut buf = BytesMut::with_capacity(128);
    buf.put_slice(b"data: ");
    buf.put_slice(&serde_json::to_vec(value).unwrap_or_default());
    buf.put_slice(b"\n\n");
    buf.freeze()
}

/// One named SSE event: `event: <name>\ndata: <json>\n\n` (Anthropic framing).
pub(crate) fn sse_event<T: Serialize + ?Sized>(name: &str, value: &T) -> Bytes {
    let mut buf = BytesMut::with_capacity(160);
    buf.put_slice(b"event: ");
    buf.put_slice(name.as_bytes());
    buf.put_slice(b"\n");
    buf.put_slice(&sse_data(value));
    buf.freeze()
}

/// The OpenAI and SGLang stream terminator.
pub(crate) fn sse_done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}
