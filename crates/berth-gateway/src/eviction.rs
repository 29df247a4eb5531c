//! The periodic pin-eviction task.
//!
//! Every `--eviction-interval-secs` it drives the core's incremental sweep to the end, yielding
//! between steps so a large pin table never holds a runtime thread for long. A sweep that removes
//! pins logs `ManualPolicy TTL eviction` at info with the counts.

use std::sync::Arc;

use crate::registry::Registry;
use crate::routing::Router;
use crate::state::AppState;

/// Runs one full sweep now; returns how many idle pins it removed.
pub(crate) async fn sweep(state: &AppState) -> usize {
    let mut removed = sweep_leg(state, &state.router, &state.registry).await;
    // PD mode: the prefill leg's pins too (the regular router is the decode leg's).
    if let Some(pd) = &state.pd {
        removed += sweep_leg(state, &pd.router, &pd.registry).await;
    }
    if removed > 0 {
        let remaining = state.router.stats().pins;
        tracing::info!(
            removed,
            remaining,
            max_idle_secs = state.config.router.max_idle_secs,
            "ManualPolicy TTL eviction"
        );
    }
    removed
}

async fn sweep_leg(state: &AppState, router: &Router, registry: &Registry) -> usize {
    let view = registry.view();
    let mut removed = 0;
    loop {
        let step = router.sweep_step(state.clock.now(), &view.snapshot);
        removed += step.removed_idle;
        if step.finished {
            break;
        }
        tokio::task::yield_now().await;
    }
    removed
}

/// Spawns the periodic sweep (not when `--eviction-interval-secs 0` disables it).
pub(crate) fn spawn(state: Arc<AppState>) -> Option<tokio::task::JoinHandle<()>> {
    let every = state
        .router
        .eviction_interval()
        .or_else(|| state.pd.as_ref()?.router.eviction_interval())?;
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            sweep(&state).await;
        }
    }))
}
