//! The invalidation subscriber: another replica moved or deleted a pin, so the local copy is
//! dropped; the next request for that key reads the new pin from the store (place-or-get).
//!
//! It has its own connection (a subscribed connection can do nothing else), reconnects with
//! backoff, and resubscribes. Messages published while it was disconnected are lost; the
//! batched refresh catches those pins within one `--sticky-store-sync-ms` period.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::metrics::{OpLabels, op};
use super::names;
use super::sync::{PinHost, Store};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Runs the subscriber forever (spawned at start).
pub(crate) async fn run<S: PinHost>(store: Arc<Store>, state: Arc<S>) {
    let mut backoff = BACKOFF_MIN;
    loop {
        match subscribe(&store).await {
            Ok(pubsub) => {
                backoff = BACKOFF_MIN;
                tracing::debug!("sticky store invalidations subscribed");
                let mut messages = pubsub.into_on_message();
                while let Some(msg) = messages.next().await {
                    let Ok(payload) = std::str::from_utf8(msg.get_payload_bytes()) else {
                        continue;
                    };
                    let Some((from, hash)) = names::parse_message(payload) else {
                        continue;
                    };
                    if from == store.replica {
                        continue;
                    }
                    let view = state.view();
                    if state.router().drop_pin(hash, &view.snapshot) {
                        store.metrics().invalidations.inc();
                    }
                }
                tracing::debug!("sticky store invalidation subscription lost");
            }
            Err(e) => {
                store
                    .metrics()
                    .errors
                    .get_or_create(&OpLabels { op: op::SUBSCRIBE })
                    .inc();
                tracing::debug!(error = %e, "sticky store subscription failed");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

async fn subscribe(store: &Store) -> Result<redis::aio::PubSub, String> {
    let attempt = async {
        let mut pubsub = store
            .link
            .client
            .get_async_pubsub()
            .await
            .map_err(|e| e.to_string())?;
        pubsub
            .subscribe(&store.names.channel)
            .await
            .map_err(|e| e.to_string())?;
        Ok(pubsub)
    };
    tokio::time::timeout(store.link.timeout * 4, attempt)
        .await
        .unwrap_or_else(|_| Err("timed out".to_owned()))
}
