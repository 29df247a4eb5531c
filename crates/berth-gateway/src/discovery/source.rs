//! The [`Discovery`] trait and what one look at a provider yields.

use std::future::Future;

/// One worker a provider wants registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DesiredWorker {
    /// The worker URL, as it is registered (`http[s]://host:port[/prefix][@rank]`).
    pub(crate) url: String,
}

/// What one look at a provider found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Nothing changed since the last look (no reconcile needed).
    Unchanged,
    /// The provider has no set yet (the manifest file does not exist yet): nothing to do.
    NotYet,
    /// The full desired set (deduplicated, in the provider's order).
    Desired(Vec<DesiredWorker>),
    /// The provider's source is broken; the last good set stays. Reported once per distinct
    /// problem: a provider yields it again only after something changed.
    Fault(Fault),
}

/// Why a provider could not yield a set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The manifest was there before and is gone now.
    Missing,
    /// The manifest exists but cannot be read.
    Unreadable(String),
    /// The manifest was read but is not a valid manifest.
    Invalid(String),
}

impl Fault {
    /// The `reason` label of `berth_discovery_errors_total`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Unreadable(_) => "unreadable",
            Self::Invalid(_) => "invalid",
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("the manifest file was removed"),
            Self::Unreadable(e) => write!(f, "cannot read the manifest: {e}"),
            Self::Invalid(e) => write!(f, "invalid manifest: {e}"),
        }
    }
}

/// A source of the desired worker set. One job: look, and say what the set is now.
///
/// `full` asks for a complete reread even when the provider sees no change (the periodic
/// `--discovery-check-interval-secs` look); otherwise a provider may answer
/// [`Look::Unchanged`] cheaply.
pub(crate) trait Discovery: Send {
    /// The provider's name, for logs and the `source` metric label.
    fn source(&self) -> &'static str;

    /// Looks at the source once.
    fn look(&mut self, full: bool) -> impl Future<Output = Look> + Send;
}
