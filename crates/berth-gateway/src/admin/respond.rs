//! Responses the admin routes build (errors go through `GatewayError::to_response`).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use crate::proxy::Body;

/// A JSON response with this status.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    bytes(status, "application/json", Bytes::from(value.to_string()))
}

/// A plain-text response (SMG's legacy admin routes answer with a sentence).
pub(crate) fn text(status: StatusCode, message: String) -> Response<Body> {
    bytes(status, "text/plain; charset=utf-8", Bytes::from(message))
}

/// A response with this body and content type.
pub(crate) fn bytes(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(Body::full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}
