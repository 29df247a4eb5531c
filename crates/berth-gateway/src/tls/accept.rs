//! A client's TLS handshake on the HTTPS listener.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Time a client gets to complete the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Completes the handshake, or logs why not (at debug: a client's failure is not the gateway's)
/// and returns `None` so the connection is closed.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake with a client failed");
            None
        }
        Err(_) => {
            tracing::debug!("TLS handshake with a client timed out");
            None
        }
    }
}
