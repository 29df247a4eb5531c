//! The discovery loop: look at the provider, reconcile what it yields, report faults.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::file::FileDiscovery;
use super::metrics::ReasonLabels;
use super::reconcile::Reconciler;
use super::settings::{DiscoveryProvider, DiscoverySettings};
use super::source::{Discovery, Look};
use crate::state::AppState;

/// How often a provider is asked for changes between full looks.
const CHANGE_CHECK: Duration = Duration::from_secs(1);

/// Runs the configured provider until the future is dropped (the gateway's shutdown).
pub(crate) async fn run(state: Arc<AppState>, settings: DiscoverySettings) {
    match settings.provider {
        DiscoveryProvider::File(path) => {
            tracing::info!(path = %path.display(), interval_secs = settings.check_interval.as_secs_f64(), "file service discovery");
            drive(FileDiscovery::new(path), state, settings.check_interval).await;
        }
    }
}

async fn drive<D: Discovery>(mut provider: D, state: Arc<AppState>, interval: Duration) {
    let source = provider.source();
    let mut reconciler = Reconciler::new(source);
    let pause = CHANGE_CHECK.min(interval);
    let mut next_full = Instant::now();
    loop {
        let now = Instant::now();
        let full = now >= next_full;
        if full {
            next_full = now + interval;
        }
        match provider.look(full).await {
            Look::Unchanged | Look::NotYet => {}
            Look::Desired(set) => {
                let changes = reconciler.apply(&state, &set).await;
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
                state
                    .metrics
                    .discovery
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
