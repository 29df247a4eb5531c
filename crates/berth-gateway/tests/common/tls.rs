//! A throw-away PKI made at test time (rcgen), and an HTTPS client for the gateway.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::Resp;

/// A certificate and its key, PEM-encoded.
#[derive(Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A test CA that issues server and client certificates; files go to a temporary directory.
pub struct Pki {
    pub dir: PathBuf,
    pub ca_pem: String,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("berth-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("berth test CA {name}"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_pem = ca.pem();
        Self { dir, ca_pem, ca }
    }

    fn issue(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> Identity {
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "berth test");
        params.extended_key_usages = vec![purpose];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A server certificate for 127.0.0.1 and localhost.
    pub fn server(&self) -> Identity {
        self.issue(
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate.
    pub fn client(&self) -> Identity {
        self.issue(&["berth-gateway"], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// Writes `text` to `name` in the directory; returns the path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The identity as a sim worker's TLS settings.
    pub fn sim_tls(id: &Identity, client_ca: Option<&str>) -> berth_sim::TlsPem {
        berth_sim::TlsPem {
            cert_chain_pem: id.cert_pem.clone(),
            key_pem: id.key_pem.clone(),
            client_ca_pem: client_ca.map(str::to_owned),
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One HTTPS request to `addr` (as 127.0.0.1), trusting `ca_pem`, on a new connection.
pub async fn https(
    addr: SocketAddr,
    ca_pem: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Result<Resp, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let fut = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = sender
            .send_request(req.body(Full::new(body.into())).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(Resp {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// Parses a PEM key (checks the test PKI's output is what the gateway will read).
pub fn parses_as_key(pem: &str) -> bool {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).is_ok()
}
