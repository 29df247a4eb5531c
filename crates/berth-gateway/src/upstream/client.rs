//! Opening connections to workers, and one-off requests (probes, the admin fan-out).
//!
//! [`HttpClient`] opens a worker connection, plain TCP for `http://` workers and TLS for
//! `https://` ones (verified against `--ca-cert-paths`, with the `--client-cert-path` identity
//! when set); the request path keeps those connections alive in `pool.rs`, and probes
//! ([`get`]) use one connection each.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio_rustls::TlsConnector;

use super::addr::WorkerAddr;
use super::body::UpBody;
use crate::tls::MaybeTls;

/// Time allowed to open a connection (TCP, and the TLS handshake for `https://` workers).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens connections to workers. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct HttpClient {
    /// For `https://` workers; `None` refuses them (only tests build a client without it).
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl HttpClient {
    /// A client that verifies `https://` workers with `tls`.
    pub(crate) fn new(tls: TlsConnector) -> Self {
        Self { tls: Some(tls) }
    }

    /// Opens a connection to the worker (TCP, then TLS for `https://`), within the connect
    /// timeout.
    pub(crate) async fn connect(&self, addr: &WorkerAddr) -> Result<MaybeTls, String> {
        let target = addr.socket_target();
        let stream = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect(target.as_str()),
        )
        .await
        .map_err(|_| format!("connect to {target} timed out"))?
        .map_err(|e| format!("connect to {target}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let Some(name) = addr.tls_server_name()? else {
            return Ok(MaybeTls::Plain(stream));
        };
        let connector = self
            .tls
            .as_ref()
            .ok_or_else(|| format!("{target}: no TLS client configured for https:// workers"))?;
        let tls = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, stream))
            .await
            .map_err(|_| format!("TLS handshake with {target} timed out"))?
            .map_err(|e| format!("TLS handshake with {target}: {e}"))?;
        Ok(MaybeTls::Tls(Box::new(tls)))
    }
}

/// GETs `path` on the worker, on a connection of its own, and returns the status and (up to
/// `limit` bytes of) the body, within `timeout`.
pub(crate) async fn get(
    client: &HttpClient,
    addr: &WorkerAddr,
    path: &str,
    timeout: Duration,
    limit: usize,
) -> Result<(u16, Bytes), String> {
    send_empty(client, http::Method::GET, addr, path, timeout, limit).await
}

/// Sends a request without a body (`GET` probes, the admin fan-out's `POST /flush_cache`) on a
/// connection of its own and returns the status and (up to `limit` bytes of) the body, within
/// `timeout`.
pub(crate) async fn send_empty(
    client: &HttpClient,
    method: http::Method,
    addr: &WorkerAddr,
    path: &str,
    timeout: Duration,
    limit: usize,
) -> Result<(u16, Bytes), String> {
    let fut = async {
        let mut req = http::Request::builder()
            .method(method)
            .uri(addr.origin_uri(path).map_err(|e| e.to_string())?)
            .body(UpBody::Full(None))
            .map_err(|e| e.to_string())?;
        if let Some(host) = addr.host_header() {
            req.headers_mut().insert(http::header::HOST, host);
        }
        req.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
        let io = client.connect(addr).await?;
        let (mut sender, conn) = http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
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
