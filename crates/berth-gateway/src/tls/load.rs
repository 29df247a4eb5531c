//! PEM files into rustls configurations.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::TlsSettings;
use crate::error::GatewayError;

fn config_error(flag: &str, path: &Path, why: impl std::fmt::Display) -> GatewayError {
    GatewayError::Config(format!("{flag} {}: {why}", path.display()))
}

/// Every certificate in a PEM file (at least one).
fn certs(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, GatewayError> {
    let pem = std::fs::read(path).map_err(|e| config_error(flag, path, e))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_error(flag, path, e))?;
    if certs.is_empty() {
        return Err(config_error(flag, path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
fn key(flag: &str, path: &Path) -> Result<PrivateKeyDer<'static>, GatewayError> {
    let pem = std::fs::read(path).map_err(|e| config_error(flag, path, e))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| config_error(flag, path, e))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

const HTTP1: &[u8] = b"http/1.1";

/// The acceptor for HTTPS clients, when `--tls-cert-path`/`--tls-key-path` are set.
pub(crate) fn acceptor(s: &TlsSettings) -> Result<Option<TlsAcceptor>, GatewayError> {
    let (Some(cert_path), Some(key_path)) = (&s.cert_path, &s.key_path) else {
        return Ok(None);
    };
    let chain = certs("--tls-cert-path", cert_path)?;
    let key = key("--tls-key-path", key_path)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| GatewayError::Config(format!("--tls-cert-path: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| GatewayError::Config(format!("--tls-key-path: {e}")))?;
    config.alpn_protocols = vec![HTTP1.to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// The connector for `https://` workers: `--ca-cert-paths` (or the built-in Mozilla roots),
/// and the client certificate when `--client-cert-path`/`--client-key-path` are set.
pub(crate) fn connector(s: &TlsSettings) -> Result<TlsConnector, GatewayError> {
    let mut roots = RootCertStore::empty();
    if s.ca_cert_paths.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    for path in &s.ca_cert_paths {
        for cert in certs("--ca-cert-paths", path)? {
            roots
                .add(cert)
                .map_err(|e| config_error("--ca-cert-paths", path, e))?;
        }
    }
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| GatewayError::Config(format!("--ca-cert-paths: {e}")))?
        .with_root_certificates(roots);
    let mut config = match (&s.client_cert_path, &s.client_key_path) {
        (Some(cert_path), Some(key_path)) => builder
            .with_client_auth_cert(
                certs("--client-cert-path", cert_path)?,
                key("--client-key-path", key_path)?,
            )
            .map_err(|e| config_error("--client-key-path", key_path, e))?,
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![HTTP1.to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}
