//! TLS with rustls (the `ring` provider): HTTPS towards clients, and `https://` workers verified
//! against `--ca-cert-paths`, optionally presenting a client certificate (mTLS).
//!
//! - `settings.rs`: the `--tls-*`, `--ca-cert-paths`, `--client-*` settings ([`TlsSettings`]).
//! - `load.rs`: reading PEM files into rustls server and client configurations; every failure
//!   names the flag.
//! - `stream.rs`: a worker connection that is plain TCP or TLS, one type for the pool.
//! - `accept.rs`: a client's handshake on the HTTPS listener, bounded in time.
//!
//! Both directions speak HTTP/1.1 only (ALPN `http/1.1`), as the gateway does over plain TCP.

mod accept;
mod load;
mod settings;
mod stream;

pub(crate) use accept::handshake;
pub(crate) use load::{acceptor, connector};
pub use settings::TlsSettings;
pub(crate) use stream::MaybeTls;
