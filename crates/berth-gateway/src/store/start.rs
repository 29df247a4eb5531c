//! Start-up: one connection attempt (bounded; the gateway starts either way), then the
//! background tasks: reconnection, the batched refresh and the invalidation subscriber.
//! No pin is loaded at start: a restarted replica reads each pin from the store the first time
//! its key comes back (place-or-get), so start-up costs the same at 10 or 10M pins.

use std::sync::Arc;

use tokio::task::JoinSet;

use super::sync::PinHost;
use super::{flush, watch};

/// Connects and spawns the store's tasks into `tasks` (stopped with the gateway).
pub(crate) async fn start<S: PinHost>(state: &Arc<S>, tasks: &mut JoinSet<()>) {
    let Some(store) = state.store().cloned() else {
        return;
    };
    store.link.start().await;
    let woken = store.clone();
    tasks.spawn(store.link.clone().run(move || woken.resync.notify_one()));
    tasks.spawn(flush::run(store.clone(), state.clone()));
    tasks.spawn(flush::run_mover(store.clone(), state.clone()));
    tasks.spawn(watch::run(store, state.clone()));
}
