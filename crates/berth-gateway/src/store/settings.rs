//! `--sticky-store`, `--sticky-store-timeout-ms`, `--sticky-store-sync-ms`,
//! `--sticky-store-prefix`, validated once.

use std::time::Duration;

use super::defaults;

/// Where the shared pins live and how long the gateway may wait for them.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// `redis://HOST:PORT[/DB]` or `rediss://` (TLS), with optional `user:password@`.
    pub url: String,
    /// The longest a request waits for the store (a new key's placement); also the connect
    /// timeout. Past it the request is served from the local pin table.
    pub timeout: Duration,
    /// How often touched pins have their TTL refreshed and are checked against the store
    /// (batched), and pins placed while the store was down are written back.
    pub sync_every: Duration,
    /// Prefix of every key and of the invalidation channel, so fleets can share a Redis.
    pub prefix: String,
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the URL may carry a password
        f.debug_struct("StoreSettings")
            .field("url", &redact(&self.url))
            .field("timeout", &self.timeout)
            .field("sync_every", &self.sync_every)
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// The URL with any `user:password@` part replaced, for logs.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

impl StoreSettings {
    /// Settings for this URL with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            timeout: Duration::from_millis(defaults::STICKY_STORE_TIMEOUT_MS),
            sync_every: Duration::from_millis(defaults::STICKY_STORE_SYNC_MS),
            prefix: defaults::STICKY_STORE_PREFIX.to_owned(),
        }
    }

    /// Refuses, naming the flag, a URL that is not `redis://` or `rediss://`, or zero times.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.url.starts_with("redis://") || self.url.starts_with("rediss://")) {
            return Err(format!(
                "--sticky-store: `{}` is not a redis://HOST:PORT[/DB] or rediss:// URL",
                redact(&self.url)
            ));
        }
        redis::Client::open(self.url.as_str())
            .map_err(|e| format!("--sticky-store: `{}`: {e}", redact(&self.url)))?;
        if self.timeout.is_zero() {
            return Err("--sticky-store-timeout-ms: must be at least 1".to_owned());
        }
        if self.sync_every.is_zero() {
            return Err("--sticky-store-sync-ms: must be at least 1".to_owned());
        }
        if self.prefix.is_empty() || self.prefix.contains(char::is_whitespace) {
            return Err("--sticky-store-prefix: must be non-empty, without spaces".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_passwords_never_shown() {
        assert!(
            StoreSettings::new("redis://127.0.0.1:6379/2")
                .validate()
                .is_ok()
        );
        assert!(StoreSettings::new("rediss://h:6380").validate().is_ok());
        let e = StoreSettings::new("http://h:1").validate().unwrap_err();
        assert!(e.starts_with("--sticky-store:"), "{e}");
        let s = StoreSettings::new("redis://u:secret@h:1/0");
        assert!(!format!("{s:?}").contains("secret"));
        let mut z = StoreSettings::new("redis://h:1");
        z.timeout = Duration::ZERO;
        assert!(
            z.validate()
                .unwrap_err()
                .starts_with("--sticky-store-timeout-ms")
        );
    }
}
