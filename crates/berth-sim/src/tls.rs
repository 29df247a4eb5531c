//! HTTPS for the simulated worker (`--tls-cert-path`/`--tls-key-path`, optionally
//! `--tls-client-ca-path` to require client certificates; or [`crate::SimWorkerBuilder::tls`]), so a gateway's `https://` worker path can be tested
//! against it. rustls with the `ring` provider; HTTP/1.1 only (ALPN `http/1.1`).

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::SimError;

/// The worker's certificate chain and private key, PEM-encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsPem {
    /// One or more `CERTIFICATE` blocks, leaf first.
    pub cert_chain_pem: String,
    /// The leaf's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: String,
    /// When set, clients must present a certificate signed by one of these CAs (mTLS).
    pub client_ca_pem: Option<String>,
}

impl fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsPem")
            .field("cert_chain_pem", &self.cert_chain_pem.len())
            .field("key_pem", &"***")
            .field("client_ca_pem", &self.client_ca_pem.is_some())
            .finish()
    }
}

fn invalid(flag: &'static str, reason: impl fmt::Display) -> SimError {
    SimError::InvalidConfig {
        flag,
        reason: reason.to_string(),
    }
}

/// The acceptor for this identity; errors name the flag.
pub(crate) fn acceptor(pem: &TlsPem) -> Result<TlsAcceptor, SimError> {
    let chain = CertificateDer::pem_slice_iter(pem.cert_chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("tls-cert-path", e))?;
    if chain.is_empty() {
        return Err(invalid("tls-cert-path", "no PEM certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(pem.key_pem.as_bytes())
        .map_err(|e| invalid("tls-key-path", e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("tls-cert-path", e))?;
    let builder = match &pem.client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                let cert = cert.map_err(|e| invalid("tls-client-ca-path", e))?;
                roots
                    .add(cert)
                    .map_err(|e| invalid("tls-client-ca-path", e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| invalid("tls-client-ca-path", e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| invalid("tls-key-path", e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
