//! The gateway's one error type and its one mapping to HTTP.
//!
//! Every response the gateway makes itself (as opposed to a worker's response, which passes
//! through untouched) is built by [`GatewayError::to_response`]: a status, the OpenAI-style body
//! `{"error": {"message", "type", "code", "param"}}` and an `x-smg-error-code` header carrying
//! the same code, so a client can tell a gateway refusal from a worker failure. Building the
//! response has no side effects; callers log and count around it.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

pub use rejection::{Rejection, RejectionKind};

use crate::body::{Completion, ResBody};

mod rejection;

/// The event dialect of a server-sent event stream (for the gateway's closing error event).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SseStyle {
    /// OpenAI and SGLang streams (`data:` lines only).
    #[default]
    OpenAi,
    /// Anthropic Messages streams (`/v1/messages`: named events).
    Anthropic,
}

/// Name of the header that carries [`ErrorCode::as_str`] on every gateway-made error.
pub const ERROR_CODE_HEADER: &str = "x-smg-error-code";

/// Everything that can go wrong while serving one request, or while starting.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The request body is not the JSON the endpoint expects.
    #[error("request body is not valid JSON: {0}")]
    JsonParse(String),
    /// A keyed policy (`consistent_hashing`, `manual`) got a request without a routing key.
    #[error(
        "this gateway's policy ({policy}) routes by key, and the request has no routing key: send an \
         `X-SMG-Routing-Key` header (one uuid per session), or a body `rid` with \
         --routing-key-override, or start the gateway with --allow-requests-without-routing-key"
    )]
    MissingRoutingKey {
        /// The configured policy's name.
        policy: &'static str,
    },
    /// Missing or wrong `Authorization: Bearer` credentials.
    #[error("missing or invalid API key: send `Authorization: Bearer <key>`")]
    Unauthorized,
    /// The body names a model that no registered worker serves.
    #[error("model `{0}` is not served by any worker")]
    ModelNotFound(String),
    /// No route at this path.
    #[error("no route for {0}")]
    NotFound(String),
    /// The path exists but not for this method.
    #[error("method {0} is not allowed here")]
    MethodNotAllowed(String),
    /// The request body is larger than `--max-payload-size`.
    #[error("request body exceeds --max-payload-size ({0} bytes)")]
    PayloadTooLarge(usize),
    /// A body routing must buffer is larger than the whole `--buffered-body-budget-mb`.
    #[error(
        "request body exceeds the whole buffered-body budget, --buffered-body-budget-mb ({0} bytes)"
    )]
    BodyOverBudget(usize),
    /// Buffered bodies already hold the whole `--buffered-body-budget-mb`, and none was freed
    /// within the wait.
    #[error(
        "the gateway holds as many request bodies as --buffered-body-budget-mb allows; retry shortly"
    )]
    BodyBudgetExhausted,
    /// An admin request the gateway cannot act on (bad worker URL, unknown worker id, ...).
    #[error("{0}")]
    BadRequest(String),
    /// The admin API refers to a worker that is not registered.
    #[error("worker `{0}` is not registered")]
    WorkerNotFound(String),
    /// The worker could not be reached, or broke the connection before answering.
    #[error("could not reach worker {worker}: {reason}")]
    UpstreamConnection {
        /// The worker's URL as registered.
        worker: String,
        /// What failed (connect, reset, ...).
        reason: String,
    },
    /// The worker's streamed response broke after it had started (the worker died or cut the
    /// connection mid-stream). Sent as a final SSE event, not as a status.
    #[error("worker {worker} broke off the stream: {reason}")]
    UpstreamStream {
        /// The worker's URL as registered.
        worker: String,
        /// What failed.
        reason: String,
    },
    /// PD mode: the prefill worker failed (unreachable, timed out, broke off, or answered a
    /// server error) on the last attempt; the decode worker's answer was dropped.
    #[error("prefill worker {worker} failed: {reason}")]
    PrefillFailed {
        /// The prefill worker's URL as registered.
        worker: String,
        /// What failed.
        reason: String,
    },
    /// PD mode: the prefill worker refused the request (a 4xx); not retried.
    #[error("prefill worker {worker} refused the request ({status}): {reason}")]
    PrefillRejected {
        /// The prefill worker's URL as registered.
        worker: String,
        /// Its status.
        status: u16,
        /// Its error body (truncated).
        reason: String,
    },
    /// The worker did not answer within `--request-timeout-secs`.
    #[error("worker {0} did not answer within --request-timeout-secs")]
    UpstreamTimeout(String),
    /// No worker is available for this request (all unhealthy, open, or none serve the model).
    #[error("no available workers")]
    NoAvailableWorkers,
    /// Every worker the request could use is over the overload thresholds and
    /// `--worker-overload-shed` is on; `Retry-After` is the load poll interval, seconds.
    #[error(
        "every worker that could serve this request is overloaded (worker overload protection)"
    )]
    WorkerOverloadShed {
        /// `--load-monitor-interval`, seconds.
        retry_after_secs: u64,
    },
    /// The client did not send its request body in time (it stalled, or took too long in all).
    #[error("the request body did not arrive in time: {0}")]
    RequestBodyTimeout(String),
    /// The client's request stream broke while the gateway was reading it.
    #[error("error reading the request body: {0}")]
    ClientBody(String),
    /// Admission control turned the request away (`--max-concurrent-requests`, `--queue-size`,
    /// `--queue-timeout-secs`, `--rate-limit-tokens-per-second`).
    #[error("{0}")]
    Overloaded(Rejection),
    /// `DELETE /sticky/{key}` could not reach the shared pin store (the local pin was dropped).
    #[error("the sticky store is unavailable: the local pin was dropped, the shared one was not")]
    StoreUnavailable,
    /// Invalid configuration; the message starts with the offending flag.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The gateway could not start (no worker reachable, listener failure, ...).
    #[error("cannot start: {0}")]
    Startup(String),
    /// A socket or file operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The closed set of error codes a gateway-made response can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: body is not valid JSON.
    JsonParseError,
    /// 400: keyed policy, request has no key.
    MissingRoutingKey,
    /// 400: any other malformed request (admin API input, broken client body).
    BadRequest,
    /// 401: inbound or admin auth failed.
    Unauthorized,
    /// 404: no worker serves the requested model.
    ModelNotFound,
    /// 404: unknown path or worker.
    NotFound,
    /// 405: known path, wrong method.
    MethodNotAllowed,
    /// 408: the client's body stalled or took too long.
    RequestBodyTimeout,
    /// 413: body over `--max-payload-size`.
    PayloadTooLarge,
    /// 429: no admission permit free and the admission queue full.
    QueueFull,
    /// 429: waited `--queue-timeout-secs` in the admission queue.
    QueueTimeout,
    /// 502: connect or transport failure to the worker.
    UpstreamConnectionFailed,
    /// 502 (in an SSE error event): the worker's stream broke mid-way.
    UpstreamStreamError,
    /// 503: nothing to route to.
    NoAvailableWorkers,
    /// 504: worker too slow.
    UpstreamTimeout,
    /// 503: `DELETE /sticky/{key}` could not reach the shared pin store.
    StickyStoreUnavailable,
    /// 502: PD mode, the prefill worker failed on the last attempt (SMG's code).
    PrefillServerError,
    /// 400: PD mode, the prefill worker refused the request (SMG's code).
    PrefillBadRequest,
    /// 503: buffered bodies hold the whole `--buffered-body-budget-mb` (with `Retry-After`).
    BodyBudgetExhausted,
    /// 503: every usable worker is overloaded and `--worker-overload-shed` is on (SMG's code).
    WorkerOverloadProtectionShed,
    /// 500: a start-up or IO failure (never expected on the request path). Keep it the last
    /// variant ([`ErrorCode::ALL`]'s test relies on it).
    Internal,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 21] = [
        Self::JsonParseError,
        Self::MissingRoutingKey,
        Self::BadRequest,
        Self::Unauthorized,
        Self::ModelNotFound,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::RequestBodyTimeout,
        Self::PayloadTooLarge,
        Self::QueueFull,
        Self::QueueTimeout,
        Self::UpstreamConnectionFailed,
        Self::UpstreamStreamError,
        Self::NoAvailableWorkers,
        Self::UpstreamTimeout,
        Self::StickyStoreUnavailable,
        Self::PrefillServerError,
        Self::PrefillBadRequest,
        Self::BodyBudgetExhausted,
        Self::WorkerOverloadProtectionShed,
        Self::Internal,
    ];

    /// The code whose wire name this is.
    pub fn from_wire(name: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str().as_bytes() == name)
    }

    /// The wire name (JSON `code` and `x-smg-error-code`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JsonParseError => "json_parse_error",
            Self::MissingRoutingKey => "missing_routing_key",
            Self::BadRequest => "bad_request",
            Self::Unauthorized => "unauthorized",
            Self::ModelNotFound => "model_not_found",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::RequestBodyTimeout => "request_body_timeout",
            Self::PayloadTooLarge => "payload_too_large",
            Self::QueueFull => "queue_full",
            Self::QueueTimeout => "queue_timeout",
            Self::UpstreamConnectionFailed => "upstream_connection_failed",
            Self::UpstreamStreamError => "upstream_stream_error",
            Self::NoAvailableWorkers => "no_available_workers",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::StickyStoreUnavailable => "sticky_store_unavailable",
            Self::Internal => "internal_error",
            Self::PrefillServerError => "prefill_server_error",
            Self::PrefillBadRequest => "prefill_bad_request",
            Self::BodyBudgetExhausted => "body_budget_exhausted",
            Self::WorkerOverloadProtectionShed => "worker_overload_protection_shed",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn status(self) -> StatusCode {
        match self {
            Self::JsonParseError
            | Self::MissingRoutingKey
            | Self::BadRequest
            | Self::PrefillBadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::ModelNotFound | Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestBodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::QueueFull | Self::QueueTimeout => StatusCode::TOO_MANY_REQUESTS,
            Self::UpstreamConnectionFailed
            | Self::UpstreamStreamError
            | Self::PrefillServerError => StatusCode::BAD_GATEWAY,
            Self::NoAvailableWorkers
            | Self::StickyStoreUnavailable
            | Self::BodyBudgetExhausted
            | Self::WorkerOverloadProtectionShed => StatusCode::SERVICE_UNAVAILABLE,
            Self::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The OpenAI-style error `type`.
    fn kind(self) -> &'static str {
        match self.status().as_u16() {
            401 => "authentication_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        }
    }
}

impl GatewayError {
    /// The code this error is reported with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::JsonParse(_) => ErrorCode::JsonParseError,
            Self::MissingRoutingKey { .. } => ErrorCode::MissingRoutingKey,
            Self::Unauthorized => ErrorCode::Unauthorized,
            Self::ModelNotFound(_) => ErrorCode::ModelNotFound,
            Self::NotFound(_) | Self::WorkerNotFound(_) => ErrorCode::NotFound,
            Self::MethodNotAllowed(_) => ErrorCode::MethodNotAllowed,
            Self::RequestBodyTimeout(_) => ErrorCode::RequestBodyTimeout,
            Self::PayloadTooLarge(_) | Self::BodyOverBudget(_) => ErrorCode::PayloadTooLarge,
            Self::BodyBudgetExhausted => ErrorCode::BodyBudgetExhausted,
            Self::BadRequest(_) | Self::ClientBody(_) => ErrorCode::BadRequest,
            Self::UpstreamConnection { .. } => ErrorCode::UpstreamConnectionFailed,
            Self::UpstreamTimeout(_) => ErrorCode::UpstreamTimeout,
            Self::UpstreamStream { .. } => ErrorCode::UpstreamStreamError,
            Self::PrefillFailed { .. } => ErrorCode::PrefillServerError,
            Self::PrefillRejected { .. } => ErrorCode::PrefillBadRequest,
            Self::NoAvailableWorkers => ErrorCode::NoAvailableWorkers,
            Self::WorkerOverloadShed { .. } => ErrorCode::WorkerOverloadProtectionShed,
            Self::StoreUnavailable => ErrorCode::StickyStoreUnavailable,
            Self::Overloaded(r) => match r.kind {
                RejectionKind::QueueFull => ErrorCode::QueueFull,
                RejectionKind::QueueTimeout => ErrorCode::QueueTimeout,
            },
            Self::Config(_) | Self::Startup(_) | Self::Io(_) => ErrorCode::Internal,
        }
    }

    /// The request field the error is about, when there is one (OpenAI's `param`).
    fn param(&self) -> Option<&'static str> {
        match self {
            Self::ModelNotFound(_) => Some("model"),
            Self::MissingRoutingKey { .. } => Some("x-smg-routing-key"),
            _ => None,
        }
    }

    /// The one JSON shape of every gateway error.
    fn body(&self) -> serde_json::Value {
        let code = self.code();
        serde_json::json!({
            "error": {
                "message": self.to_string(),
                "type": code.kind(),
                "code": code.as_str(),
                "param": self.param(),
            }
        })
    }

    /// The error as one server-sent event for a stream whose status and first events have
    /// already gone out, in the stream's own dialect so SDKs raise it as an API error: OpenAI's
    /// `data: {"error": {...}}` (the gateway's shape), or Anthropic's `event: error` with
    /// `{"type": "error", "error": {"type": "api_error", "message", "code"}}`. With
    /// `mid_event`, blank lines first end the worker's half-sent event.
    pub fn to_sse_event(&self, mid_event: bool, style: SseStyle) -> Bytes {
        let prefix = if mid_event { "\n\n" } else { "" };
        match style {
            SseStyle::OpenAi => Bytes::from(format!("{prefix}data: {}\n\n", self.body())),
            SseStyle::Anthropic => {
                let body = serde_json::json!({
                    "type": "error",
                    "error": {
                        "type": "api_error",
                        "message": self.to_string(),
                        "code": self.code().as_str(),
                    }
                });
                Bytes::from(format!("{prefix}event: error\ndata: {body}\n\n"))
            }
        }
    }

    /// The HTTP response for this error: the only place a gateway error becomes HTTP.
    pub fn to_response<G: Completion, B: http_body::Body>(&self) -> Response<ResBody<G, B>> {
        let code = self.code();
        let body = self.body();
        let mut resp = Response::new(ResBody::full(Bytes::from(body.to_string())));
        *resp.status_mut() = code.status();
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(ERROR_CODE_HEADER, HeaderValue::from_static(code.as_str()));
        if matches!(
            code,
            ErrorCode::NoAvailableWorkers | ErrorCode::BodyBudgetExhausted
        ) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Self::Overloaded(r) = self {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(r.retry_after_secs));
        }
        if let Self::WorkerOverloadShed { retry_after_secs } = self {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        if code == ErrorCode::Unauthorized {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

#[cfg(test)]
mod tests;
