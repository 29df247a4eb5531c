//! `--discovery-provider`, `--discovery-file`, `--discovery-check-interval-secs`.

use std::path::PathBuf;
use std::time::Duration;

/// `--discovery-check-interval-secs` default.
pub(crate) const DEFAULT_CHECK_INTERVAL_SECS: u64 = 30;

/// Where discovered workers come from (a closed set; `kubernetes` is refused at start-up as
/// not supported yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiscoveryProvider {
    /// A JSON manifest on disk (`--discovery-provider file --discovery-file PATH`).
    File(PathBuf),
}

/// Validated discovery settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoverySettings {
    /// The provider.
    pub provider: DiscoveryProvider,
    /// The manifest is reread at least this often, changed or not
    /// (`--discovery-check-interval-secs`); changes are noticed sooner (see `file.rs`).
    pub check_interval: Duration,
}

impl DiscoverySettings {
    /// File discovery of `path`, rereading every [`DEFAULT_CHECK_INTERVAL_SECS`].
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            provider: DiscoveryProvider::File(path.into()),
            check_interval: Duration::from_secs(DEFAULT_CHECK_INTERVAL_SECS),
        }
    }

    /// Refuses what cannot run, naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.check_interval.is_zero() {
            return Err("--discovery-check-interval-secs: must be at least 1".to_owned());
        }
        match &self.provider {
            DiscoveryProvider::File(p) if p.as_os_str().is_empty() => {
                Err("--discovery-file: must not be empty".to_owned())
            }
            DiscoveryProvider::File(_) => Ok(()),
        }
    }
}
