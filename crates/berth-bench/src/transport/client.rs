//! The pooled HTTP/1 client and the timing of one exchange.
//!
//! Time to first token is measured from just before the request is handed to the connection
//! pool to the arrival of the first body chunk that completes an event carrying new text; for
//! non-streamed requests there is no first token, only the end-to-end time.
//!
//! Engines such as llama-server close a connection after a streamed reply while their headers
//! promise keep-alive; a request written on that pooled connection fails before any response
//! byte ("connection closed before message completed"). Such a request is re-sent once on a
//! new connection (a second client that keeps no idle connections), as a gateway would, and
//! counted in [`Exchange::resent`]; it is not a failure of the server.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::error::BenchError;
use crate::transport::response::ResponseReader;
use crate::workload::EndpointType;

/// Header the gateway stamps with the worker that served a request.
pub const ROUTED_WORKER_HEADER: &str = "x-smg-routed-worker-id";
/// Header the simulated worker stamps with its own id.
pub const SIM_WORKER_HEADER: &str = "x-sim-worker-id";
/// Header carrying a gateway refusal's error code.
pub const ERROR_CODE_HEADER: &str = "x-smg-error-code";

/// What happened to one request.
#[derive(Debug)]
pub struct Exchange {
    /// When the request was handed to the client.
    pub started: Instant,
    /// Time to first token (streamed requests that produced text only).
    pub ttft: Option<Duration>,
    /// Time until the body ended (or the request failed).
    pub e2e: Duration,
    /// HTTP status, if a response head arrived.
    pub status: Option<u16>,
    /// `x-smg-routed-worker-id`, if present.
    pub routed_worker: Option<String>,
    /// `x-sim-worker-id`, if present.
    pub sim_worker: Option<String>,
    /// `x-smg-error-code`, if present.
    pub error_code_header: Option<String>,
    /// The body as read.
    pub body: ResponseReader,
    /// A connection, protocol or timeout failure.
    pub transport_error: Option<String>,
    /// The request was re-sent on a new connection after a pooled one closed before answering.
    pub resent: bool,
}

impl Exchange {
    /// Whether the request succeeded: 2xx, body read, no error object.
    pub fn ok(&self) -> bool {
        self.transport_error.is_none()
            && self.status.is_some_and(|s| (200..300).contains(&s))
            && self.body.error.is_none()
            && !self.body.malformed
    }
}

/// A pooled client bound to one base URL.
#[derive(Debug, Clone)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
    /// Keeps no idle connection: every request on it opens a new one.
    fresh: Client<HttpConnector, Full<Bytes>>,
    base: String,
    timeout: Duration,
}

impl HttpClient {
    /// A client for `url` (`http://host:port`, scheme optional); only plain HTTP is supported.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, BenchError> {
        let with_scheme = if url.contains("://") {
            url.to_owned()
        } else {
            format!("http://{url}")
        };
        let uri: Uri = with_scheme
            .parse()
            .map_err(|e| BenchError::config("--url", format!("`{url}` is not a URL: {e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(BenchError::config(
                "--url",
                format!("`{url}`: only http:// is supported"),
            ));
        }
        if uri.authority().is_none() {
            return Err(BenchError::config("--url", format!("`{url}` has no host")));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector.clone());
        let fresh = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Ok(Self {
            inner,
            fresh,
            base: with_scheme.trim_end_matches('/').to_owned(),
            timeout,
        })
    }

    /// The base URL, normalized.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request and reads the whole response.
    pub async fn send(
        &self,
        endpoint: EndpointType,
        streaming: bool,
        headers: &[(String, String)],
        body: Bytes,
    ) -> Exchange {
        let started = Instant::now();
        let mut ex = Exchange {
            started,
            ttft: None,
            e2e: Duration::ZERO,
            status: None,
            routed_worker: None,
            sim_worker: None,
            error_code_header: None,
            body: ResponseReader::new(endpoint, streaming),
            transport_error: None,
            resent: false,
        };
        let outcome = tokio::time::timeout(
            self.timeout,
            self.exchange(endpoint, headers, body, &mut ex),
        )
        .await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => ex.transport_error = Some(e),
            Err(_) => ex.transport_error = Some(format!("timed out after {:?}", self.timeout)),
        }
        ex.e2e = started.elapsed();
        ex
    }

    async fn exchange(
        &self,
        endpoint: EndpointType,
        headers: &[(String, String)],
        body: Bytes,
        ex: &mut Exchange,
    ) -> Result<(), String> {
        let build = || {
            let mut req = Request::builder()
                .method(Method::POST)
                .uri(format!("{}{}", self.base, endpoint.path()))
                .header(http::header::CONTENT_TYPE, "application/json");
            for (name, value) in headers {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| format!("header name {name}: {e}"))?;
                let value = HeaderValue::from_str(value)
                    .map_err(|e| format!("header value {value}: {e}"))?;
                req = req.header(name, value);
            }
            req.body(Full::new(body.clone()))
                .map_err(|e| format!("building request: {e}"))
        };
        let resp = match self.inner.request(build()?).await {
            Ok(resp) => resp,
            Err(e) if closed_before_answer(&e) => {
                ex.resent = true;
                self.fresh
                    .request(build()?)
                    .await
                    .map_err(|e| format!("request failed: {e}"))?
            }
            Err(e) => return Err(format!("request failed: {e}")),
        };
        ex.status = Some(resp.status().as_u16());
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        ex.routed_worker = header(ROUTED_WORKER_HEADER);
        ex.sim_worker = header(SIM_WORKER_HEADER);
        ex.error_code_header = header(ERROR_CODE_HEADER);
        let mut body = resp.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("reading body: {e}"))?;
            if let Some(data) = frame.data_ref()
                && ex.body.feed(data)
                && ex.ttft.is_none()
            {
                ex.ttft = Some(ex.started.elapsed());
            }
        }
        ex.body.finish();
        Ok(())
    }
}

/// The connection closed (or was reset) after the request went out and before any response
/// byte: what a pooled connection the server had already given up looks like.
fn closed_before_answer(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(h) = err.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_canceled())
        {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionAborted
            )
        {
            return true;
        }
        source = err.source();
    }
    false
}
