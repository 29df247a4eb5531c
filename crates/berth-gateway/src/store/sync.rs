//! The request-path hooks around the core's `route`.
//!
//! - A sticky hit (`occupied_hit`) only marks its pin as touched: a set insert, no IO. The
//!   batched refresh (`flush.rs`) later refreshes its TTL in the store.
//! - A new key (`vacant`) was placed locally by the core; before the request is sent, the
//!   place-or-get script stores that placement unless the key is already in the store (placed
//!   by another replica, or before a restart), in which case the stored workers are adopted
//!   and the request is routed again. One round trip, bounded by the timeout.
//! - A pin that moved (`occupied_miss`, `cap_respill`) is published in the background: the
//!   store is overwritten and, if it changed, the other replicas are told to drop their copy.
//!
//! While the store is down every hook is local: moves are remembered as dirty (written back
//! overwriting once the store answers again: this replica saw the old workers fail), new keys
//! as touched (written back with place-or-get: a pin another replica stored first wins).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use super::keyset::KeySet;
use super::link::Link;
use super::metrics::{SetLabels, StoreMetrics, op};
use super::names::{self, Names};
use super::settings::StoreSettings;
use crate::registry::View;
use crate::routing::{Branch, Decision, Error as RouteError, Leg, Router, WorkerId};

/// What the store reads and changes of the gateway around it: the local pins (the router),
/// the current worker view and the routing clock. The gateway's state implements it; the store
/// needs nothing else of it.
pub(crate) trait PinHost: Send + Sync + 'static {
    /// The router whose pins the store mirrors.
    fn router(&self) -> &Router;
    /// The current worker view.
    fn view(&self) -> Arc<View>;
    /// The routing clock's now.
    fn now(&self) -> Duration;
    /// The store, if configured.
    fn store(&self) -> Option<&Arc<Store>>;
}

/// Most pin hashes queued in each of `touched` and `dirty` (about 20 MB each when full): past
/// it a hash is dropped and counted (`berth_sticky_store_dropped_total`). A dropped touched pin
/// is queued again when its key is next used; a dropped move is not written back, so the store
/// keeps the older placement until the key moves again.
pub(crate) const KEYSET_CAP: usize = 1 << 20;

/// The shared pin store of one gateway replica.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) link: Arc<Link>,
    pub(crate) names: Names,
    /// This replica's id in invalidation messages (its own are ignored).
    pub(crate) replica: String,
    /// Pin TTL in ms (the idle-eviction period); 0: pins do not expire.
    pub(crate) ttl_ms: u64,
    pub(crate) sync_every: Duration,
    /// Pins used since the last refresh.
    pub(crate) touched: KeySet,
    /// Pins moved and not yet written (overwriting): by the mover while the store is up, by
    /// the refresh after an outage.
    pub(crate) dirty: KeySet,
    pub(crate) place: redis::Script,
    pub(crate) moved: redis::Script,
    pub(crate) delete: redis::Script,
    /// Wakes the refresh at once (the store came back).
    pub(crate) resync: tokio::sync::Notify,
    /// Wakes the mover: pins moved on the request path wait in `dirty`.
    pub(crate) wake_mover: tokio::sync::Notify,
    /// New keys whose place-or-get is in flight: a concurrent request for one of them waits
    /// for the answer instead of following the provisional local placement.
    pending: Mutex<HashMap<u128, watch::Receiver<bool>>>,
    pending_n: AtomicUsize,
}

impl Store {
    pub(crate) fn new(
        settings: &StoreSettings,
        max_idle_secs: u64,
        metrics: Arc<StoreMetrics>,
    ) -> Result<Self, String> {
        Ok(Self {
            link: Arc::new(Link::new(settings, metrics.clone())?),
            names: Names::new(&settings.prefix),
            replica: format!("{:016x}", crate::rng::fresh_seed()),
            ttl_ms: max_idle_secs.saturating_mul(1000),
            sync_every: settings.sync_every,
            touched: KeySet::new(
                KEYSET_CAP,
                metrics
                    .dropped
                    .get_or_create(&SetLabels { set: "touched" })
                    .clone(),
            ),
            dirty: KeySet::new(
                KEYSET_CAP,
                metrics
                    .dropped
                    .get_or_create(&SetLabels { set: "dirty" })
                    .clone(),
            ),
            wake_mover: tokio::sync::Notify::new(),
            place: names::place_script(),
            moved: names::move_script(),
            delete: names::delete_script(),
            resync: tokio::sync::Notify::new(),
            pending: Mutex::default(),
            pending_n: AtomicUsize::new(0),
        })
    }

    pub(crate) fn metrics(&self) -> &StoreMetrics {
        &self.link.metrics
    }

    /// The store value of the local pin `hash` (`None`: not pinned here).
    pub(crate) fn local_value<S: PinHost>(state: &S, view: &View, hash: u128) -> Option<String> {
        let workers = state.router().pinned(hash)?;
        let urls: Vec<&str> = workers
            .iter()
            .filter_map(|w| view.worker(*w))
            .map(|w| &*w.url)
            .collect();
        (!urls.is_empty()).then(|| names::encode(urls))
    }

    /// Makes the local pin `hash` what the store says (workers this replica does not know
    /// are skipped); returns whether it changed anything.
    pub(crate) fn adopt<S: PinHost>(state: &S, view: &View, hash: u128, value: &str) -> bool {
        let ids: Vec<WorkerId> = names::decode(value)
            .into_iter()
            .filter_map(|url| view.workers.iter().find(|w| &*w.url == url).map(|w| w.id))
            .collect();
        !ids.is_empty()
            && state
                .router()
                .install_pin(hash, &ids, state.now(), &view.snapshot)
    }

    /// Marks `hash` as being placed until the returned guard drops.
    fn begin_placing(&self, hash: u128) -> Placing<'_> {
        let (tx, rx) = watch::channel(false);
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if p.insert(hash, rx).is_none() {
            self.pending_n.fetch_add(1, Ordering::Relaxed);
        }
        Placing {
            store: self,
            hash,
            done: tx,
        }
    }

    /// The placement in flight for `hash`, if any (one atomic load when there is none).
    fn placing(&self, hash: u128) -> Option<watch::Receiver<bool>> {
        if self.pending_n.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.get(&hash).cloned()
    }

    /// Publishes the local pin `hash` as moved: queued for the mover task (one task writes
    /// every move, batched), or for the refresh while the store is down.
    fn publish_move(&self, hash: u128) {
        self.dirty.insert(hash);
        if self.link.is_up() {
            self.wake_mover.notify_one();
        }
    }
}

/// The pin hash of a keyed decision.
fn hash_of<S: PinHost>(state: &S, d: &Decision, model: Option<&str>) -> Option<u128> {
    let key = d.key.as_ref()?;
    state.router().pin_hash(&key.key, model, Leg::Regular)
}

/// After every routing decision (no IO): a hit marks its pin touched, a move is published.
pub(crate) fn observe<S: PinHost>(state: &Arc<S>, d: &Decision, model: Option<&str>) {
    let Some(store) = state.store() else { return };
    let Some(branch) = d.branch else { return };
    match branch {
        // a new key is written by `settle` (or marked touched there when the store is down); a
        // retry's new pin (its key was evicted meanwhile) is written when its key is next hit
        Branch::NoRoutingId | Branch::NoHealthyWorkers | Branch::Vacant => {}
        Branch::OccupiedHit => {
            if let Some(h) = hash_of(&**state, d, model) {
                store.touched.insert(h);
            }
        }
        // `occupied_miss` (failover), `cap_respill`, and any branch a policy adds that moves
        // pins: the move script publishes only when the pin really changed
        _ => {
            if let Some(h) = hash_of(&**state, d, model) {
                store.publish_move(h);
            }
        }
    }
}

/// Ends a placement in flight: wakes the requests waiting for it.
struct Placing<'a> {
    store: &'a Store,
    hash: u128,
    done: watch::Sender<bool>,
}

impl Drop for Placing<'_> {
    fn drop(&mut self) {
        let mut p = self
            .store
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if p.remove(&self.hash).is_some() {
            self.store.pending_n.fetch_sub(1, Ordering::Relaxed);
        }
        drop(p);
        let _ = self.done.send(true);
    }
}

/// A new key's first decision consults the store: stores this placement, or adopts the one
/// already there and routes again (`reroute`). A sticky hit on a key whose placement is still
/// in flight (a concurrent first request on this replica) waits for it, bounded by the
/// timeout, and routes again. Other decisions pass through untouched.
pub(crate) async fn settle<S: PinHost>(
    state: &Arc<S>,
    d: Decision,
    model: Option<&str>,
    reroute: impl FnOnce() -> Result<Decision, RouteError>,
) -> Decision {
    let Some(store) = state.store() else { return d };
    if d.branch == Some(Branch::OccupiedHit) {
        if store.pending_n.load(Ordering::Relaxed) == 0 {
            return d;
        }
        let Some(mut placing) = hash_of(&**state, &d, model).and_then(|h| store.placing(h)) else {
            return d;
        };
        let _ = tokio::time::timeout(store.link.timeout, placing.wait_for(|done| *done)).await;
        return reroute().unwrap_or(d);
    }
    if d.branch != Some(Branch::Vacant) {
        return d;
    }
    let Some(hash) = hash_of(&**state, &d, model) else {
        return d;
    };
    if !store.link.is_up() {
        // written back by the refresh with place-or-get: a pin already stored wins
        store.touched.insert(hash);
        return d;
    }
    let _placing = store.begin_placing(hash);
    let view = state.view();
    let Some(ours) = Store::local_value(&**state, &view, hash) else {
        return d;
    };
    let key = store.names.key(hash);
    let stored = store
        .link
        .call(op::PLACE, |mut c| {
            let ours = ours.clone();
            async move {
                store
                    .place
                    .key(key)
                    .arg(ours)
                    .arg(store.ttl_ms)
                    .invoke_async::<Option<String>>(&mut c)
                    .await
            }
        })
        .await;
    match stored {
        None => {
            store.touched.insert(hash);
            d
        }
        Some(None) => d,
        Some(Some(theirs)) if theirs == ours => d,
        Some(Some(theirs)) => {
            if !Store::adopt(&**state, &view, hash, &theirs) {
                return d;
            }
            store.metrics().adopted.inc();
            match reroute() {
                Ok(next) => next,
                Err(_) => d,
            }
        }
    }
}
