//! Service discovery: where the gateway learns which workers it should have, besides
//! `--worker-urls` and the admin API.
//!
//! - `settings.rs`: the validated `--discovery-*` settings ([`DiscoverySettings`]).
//! - `source.rs`: the [`Discovery`] trait (one job: yield the desired worker set) and what a
//!   look can return.
//! - `manifest.rs`: the file manifest (`{"version": 1, "workers": [{"url": ...}, ...]}`).
//! - `file.rs`: the file provider: rereads the manifest when it changes and every interval.
//! - `reconcile.rs`: diffs the desired set against the workers discovery added, and adds and
//!   removes through the same registry path as `POST /workers` and `DELETE /workers/{id}`.
//! - `task.rs`: the background loop that drives a provider and the reconciler.
//! - `metrics.rs`: `smg_discovery_*` and `berth_discovery_errors_total`.
//!
//! Discovery owns only the workers it added (as SMG's Kubernetes discovery does): a URL that
//! is already registered by `--worker-urls` or the admin API is left alone, and never removed
//! when it leaves the manifest. A manifest that cannot be read or parsed changes nothing: the
//! last good set stays, the problem is logged once and counted.

mod file;
mod manifest;
mod metrics;
mod reconcile;
mod settings;
mod source;
mod task;

pub(crate) use metrics::DiscoveryMetrics;
pub use settings::{DiscoveryProvider, DiscoverySettings};
pub(crate) use task::{Fleet, run};
