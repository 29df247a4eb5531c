//! `--tls-cert-path`, `--tls-key-path`, `--ca-cert-paths`, `--client-cert-path`,
//! `--client-key-path` (SMG's names).

use std::path::PathBuf;

/// Where the gateway's certificates and keys are (PEM files), read once at start-up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// The certificate chain served to clients (`--tls-cert-path`); with `key_path`, the gateway
    /// serves HTTPS only.
    pub cert_path: Option<PathBuf>,
    /// The private key of `cert_path` (`--tls-key-path`).
    pub key_path: Option<PathBuf>,
    /// CA certificates that `https://` workers are verified against (`--ca-cert-paths`); none:
    /// the Mozilla roots built into berth (webpki-roots).
    pub ca_cert_paths: Vec<PathBuf>,
    /// The certificate chain presented to `https://` workers that ask for one
    /// (`--client-cert-path`, mTLS).
    pub client_cert_path: Option<PathBuf>,
    /// The private key of `client_cert_path` (`--client-key-path`).
    pub client_key_path: Option<PathBuf>,
}

impl TlsSettings {
    /// Whether the gateway serves HTTPS.
    pub fn serves_https(&self) -> bool {
        self.cert_path.is_some()
    }

    /// Refuses a certificate without its key and the other way round, naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        let pair = |a: &Option<PathBuf>, b: &Option<PathBuf>, fa: &str, fb: &str| match (a, b) {
            (Some(_), None) => Err(format!("{fa}: needs {fb}")),
            (None, Some(_)) => Err(format!("{fb}: needs {fa}")),
            _ => Ok(()),
        };
        pair(
            &self.cert_path,
            &self.key_path,
            "--tls-cert-path",
            "--tls-key-path",
        )?;
        pair(
            &self.client_cert_path,
            &self.client_key_path,
            "--client-cert-path",
            "--client-key-path",
        )
    }
}
