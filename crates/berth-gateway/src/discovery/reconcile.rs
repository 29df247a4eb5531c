//! Makes the registry hold the desired set: the workers discovery added and that left the set
//! are removed, the desired workers not registered yet are added.
//!
//! Adding and removing go through the admin API's path ([`crate::registry::join`] probes a
//! worker and registers it healthy or not; an unhealthy one joins routing when its health checks
//! pass; removal drops the worker, so only its keys are re-placed). Discovery owns only the
//! workers it added: a desired URL already registered by `--worker-urls` or `POST /workers` is
//! left as it is, and is not removed when it leaves the set. A discovered worker removed by
//! `DELETE /workers/{id}` is no longer owned, and is added again by the next look that still
//! lists it (the manifest is the source of truth).

use std::collections::HashSet;
use tokio::task::JoinSet;

use super::metrics::{ReasonLabels, ResultLabels, SourceLabels};
use super::source::DesiredWorker;
use super::task::Fleet;
use crate::registry::join;

/// What one reconcile changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    pub(crate) added: usize,
    pub(crate) removed: usize,
    pub(crate) failed: usize,
}

/// The workers one provider registered.
#[derive(Debug)]
pub(crate) struct Reconciler {
    source: &'static str,
    owned: HashSet<String>,
}

impl Reconciler {
    pub(crate) fn new(source: &'static str) -> Self {
        Self {
            source,
            owned: HashSet::new(),
        }
    }

    /// Brings the registry to `desired`.
    pub(crate) async fn apply(&mut self, fleet: &Fleet, desired: &[DesiredWorker]) -> Changes {
        let source = self.source;
        let metrics = &fleet.metrics;
        let registered: HashSet<String> = fleet
            .registry
            .workers()
            .iter()
            .map(|w| w.url.to_string())
            .collect();
        // Removed behind discovery's back (admin API): no longer ours.
        self.owned.retain(|u| registered.contains(u));
        let wanted: HashSet<&str> = desired.iter().map(|w| w.url.as_str()).collect();
        let mut changes = Changes::default();
        let leaving: Vec<String> = self
            .owned
            .iter()
            .filter(|u| !wanted.contains(u.as_str()))
            .cloned()
            .collect();
        for url in leaving {
            self.owned.remove(&url);
            if fleet.registry.remove(&url).is_some() {
                tracing::info!(worker = %url, source, "worker removed by service discovery");
                changes.removed += 1;
                metrics
                    .deregistrations
                    .get_or_create(&ReasonLabels {
                        source,
                        reason: "reconciled",
                    })
                    .inc();
            }
        }
        let mut joining = JoinSet::new();
        for w in desired.iter().filter(|w| !registered.contains(&w.url)) {
            let (fleet, url) = (fleet.clone(), w.url.clone());
            joining.spawn(async move {
                let joined = join(&fleet.registry, &fleet.client, &url, fleet.probe_timeout).await;
                (url, joined)
            });
        }
        while let Some(done) = joining.join_next().await {
            let Ok((url, joined)) = done else { continue };
            let result = match joined {
                Ok(worker) => {
                    let healthy = worker.state().health.is_healthy();
                    tracing::info!(worker = %url, source, healthy, "worker added by service discovery");
                    self.owned.insert(url);
                    changes.added += 1;
                    "success"
                }
                Err(e) => {
                    tracing::warn!(worker = %url, source, error = %e, "service discovery could not add a worker");
                    changes.failed += 1;
                    "failed"
                }
            };
            metrics
                .registrations
                .get_or_create(&ResultLabels { source, result })
                .inc();
        }
        metrics
            .discovered
            .get_or_create(&SourceLabels { source })
            .set(self.owned.len() as i64);
        changes
    }
}
