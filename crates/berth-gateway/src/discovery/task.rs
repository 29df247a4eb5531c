//! The discovery loop: look at the provider, reconcile what it yields, report faults.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::file::FileDiscovery;
use super::metrics::DiscoveryMetrics;
use super::metrics::ReasonLabels;
use super::reconcile::Reconciler;
use super::settings::{DiscoveryProvider, DiscoverySettings};
use super::source::{Discovery, Look};
use crate::registry::Registry;
use crate::upstream::HttpClient;

/// How often a provider is asked for changes between full looks.
const CHANGE_CHECK: Duration = Duration::from_secs(1);

/// Far enough to never come (about 30 years), and representable on every platform.
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// What discovery changes and reports to: the regular pool, the client that probes a worker
/// before it joins, and the discovery metrics.
#[derive(Clone, Debug)]
pub(crate) struct Fleet {
    pub(crate) registry: Arc<Registry>,
    pub(crate) client: HttpClient,
    /// `--health-check-timeout-secs`: the joining probe's bound.
    pub(crate) probe_timeout: Duration,
    pub(crate) metrics: Arc<DiscoveryMetrics>,
}

/// Runs the configured provider until the future is dropped (the gateway's shutdown).
pub(crate) async fn run(fleet: Fleet, settings: DiscoverySettings) {
    match settings.provider {
        DiscoveryProvider::File(path) => {
            tracing::info!(path = %path.display(), interval_secs = settings.check_interval.as_secs_f64(), "file service discovery");
            drive(FileDiscovery::new(path), fleet, settings.check_interval).await;
        }
    }
}

async fn drive<D: Discovery>(mut provider: D, fleet: Fleet, interval: Duration) {
    let source = provider.source();
    let mut reconciler = Reconciler::new(source);
    let pause = CHANGE_CHECK.min(interval);
    let mut next_full = Instant::now();
    loop {
        let now = Instant::now();
        let full = now >= next_full;
        if full {
            // saturating: a huge interval means "one full look"
            next_full = now.checked_add(interval).unwrap_or(now + FAR);
        }
        if full {
            tracing::debug!(source, "service discovery full look");
        }
        match provider.look(full).await {
            Look::Unchanged | Look::NotYet => {}
            Look::Desired(set) => {
                let changes = reconciler.apply(&fleet, &set).await;
                if changes.added + changes.removed + changes.failed > 0 {
                    tracing::info!(
                        source,
                        desired = set.len(),
                        added = changes.added,
                        removed = changes.removed,
                        failed = changes.failed,
                        "service discovery reconciled"
                    );
                }
            }
            Look::Fault(fault) => {
                tracing::warn!(source, error = %fault, "service discovery: keeping the last good worker set");
                fleet
                    .metrics
                    .errors
                    .get_or_create(&ReasonLabels {
                        source,
                        reason: fault.reason(),
                    })
                    .inc();
            }
        }
        tokio::time::sleep(pause).await;
    }
}
