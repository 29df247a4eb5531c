//! The store side of `GET /sticky/{key}` and `DELETE /sticky/{key}` (the HTTP side is
//! `admin/sticky.rs`).

use super::metrics::op;
use super::names;
use super::sync::Store;

/// What the store holds for one pin.
#[derive(Debug)]
pub(crate) struct StoredPin {
    /// The workers' URLs, primary first (`None`: not stored).
    pub(crate) urls: Option<Vec<String>>,
    /// Seconds until it expires, when stored with a TTL.
    pub(crate) ttl_secs: Option<f64>,
}

impl Store {
    /// Reads pin `hash` from the store; `None` when the store did not answer.
    pub(crate) async fn read_pin(&self, hash: u128) -> Option<StoredPin> {
        let key = self.names.key(hash);
        let (value, pttl) = self
            .link
            .call(op::ADMIN, |mut c| async move {
                redis::pipe()
                    .get(&key)
                    .pttl(&key)
                    .query_async::<(Option<String>, i64)>(&mut c)
                    .await
            })
            .await?;
        Some(StoredPin {
            ttl_secs: (pttl >= 0 && value.is_some()).then_some(pttl as f64 / 1000.0),
            urls: value.as_deref().map(decode_urls),
        })
    }

    /// Deletes pin `hash` from the store and tells every replica to drop it; whether it was
    /// stored, or `None` when the store did not answer.
    pub(crate) async fn delete_pin(&self, hash: u128) -> Option<bool> {
        let key = self.names.key(hash);
        let msg = names::message(&self.replica, hash);
        let deleted = self
            .link
            .call(op::ADMIN, |mut c| async move {
                self.delete
                    .key(key)
                    .arg(&self.names.channel)
                    .arg(msg)
                    .invoke_async::<i64>(&mut c)
                    .await
            })
            .await?;
        Some(deleted > 0)
    }
}

/// The URLs of a stored pin value, primary first.
pub(crate) fn decode_urls(value: &str) -> Vec<String> {
    names::decode(value)
        .into_iter()
        .map(str::to_owned)
        .collect()
}
