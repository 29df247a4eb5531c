//! The HTTP client to workers and the body type it sends.
//!
//! One pooled hyper client (keep-alive, no per-request allocation beyond the request itself).
//! A request body is either bytes the gateway already holds (buffered, so it can be re-sent on a
//! retry) or the client's body streamed through untouched.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::proxy::{BoxError, ReplayBody};

/// The client every worker request goes through.
pub(crate) type HttpClient = Client<HttpConnector, UpBody>;

/// Builds the pooled client.
pub(crate) fn client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(1024)
        .build(connector)
}

/// A request body sent to a worker.
#[derive(Debug)]
pub(crate) enum UpBody {
    /// Bytes held by the gateway (re-sendable).
    Full(Option<Bytes>),
    /// The client's body, streamed (and kept for a possible retry, see `proxy/replay.rs`).
    Stream(ReplayBody),
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Self::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(s) => Pin::new(s).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(b) => b.is_none(),
            Self::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(s) => s.size_hint(),
        }
    }
}

/// GETs `uri` and returns the status and (up to `limit` bytes of) the body, within `timeout`.
pub(crate) async fn get(
    client: &HttpClient,
    uri: http::Uri,
    timeout: Duration,
    limit: usize,
) -> Result<(u16, Bytes), String> {
    send_empty(client, http::Method::GET, uri, timeout, limit).await
}

/// Sends a request without a body (`GET` probes, the admin fan-out's `POST /flush_cache`) and
/// returns the status and (up to `limit` bytes of) the body, within `timeout`.
pub(crate) async fn send_empty(
    client: &HttpClient,
    method: http::Method,
    uri: http::Uri,
    timeout: Duration,
    limit: usize,
) -> Result<(u16, Bytes), String> {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .body(UpBody::Full(None))
        .map_err(|e| e.to_string())?;
    let fut = async {
        let resp = client.request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = http_body_util::Limited::new(resp.into_body(), limit)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| TIMED_OUT.to_owned())?
}

/// The error [`send_empty`] returns when `timeout` passed.
pub(crate) const TIMED_OUT: &str = "timed out";
