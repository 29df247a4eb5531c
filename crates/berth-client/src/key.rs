//! Routing keys: one per sample or session, minted once, kept across retries.
//!
//! The key is the affinity identity a key-based router hashes or pins. It must be minted when the
//! sample (or live session) is created, not when a request is sent, so that a retry of the same
//! sample carries the same key and lands where the sample's KV prefix already is. Independent
//! samples (every evaluation sample, too) get independent keys, so traffic spreads across workers.

use std::fmt;

use crate::error::ClientError;

/// Longest key a gateway accepts (SPEC.md section 1): longer values are skipped silently there,
/// so this library refuses them up front.
pub const MAX_ROUTING_KEY_BYTES: usize = 128;

/// A routing key (a UUID v4 in its hyphenated form, or a caller-chosen value).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoutingKey(String);

impl RoutingKey {
    /// Mints a fresh random key (UUID v4 from the OS random source).
    ///
    /// ```
    /// let a = berth_client::RoutingKey::mint();
    /// let b = berth_client::RoutingKey::mint();
    /// assert_ne!(a, b);
    /// assert_eq!(a.as_str().len(), 36);
    /// ```
    pub fn mint() -> Self {
        Self(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// Builds a UUID v4 key from 16 caller-supplied random bytes: a benchmark with a seeded RNG
    /// gets the same keys, hence the same consistent-hashing placements, on every run.
    ///
    /// ```
    /// let k = berth_client::RoutingKey::from_random_bytes([7; 16]);
    /// assert_eq!(k, berth_client::RoutingKey::from_random_bytes([7; 16]));
    /// assert_eq!(&k.as_str()[14..15], "4"); // version nibble
    /// ```
    pub fn from_random_bytes(bytes: [u8; 16]) -> Self {
        let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
        Self(id.hyphenated().to_string())
    }

    /// Wraps a caller-chosen key after checking that a gateway would accept it: non-empty, at
    /// most 128 bytes, and printable ASCII (a valid header value everywhere).
    ///
    /// ```
    /// assert!(berth_client::RoutingKey::new("conv-42").is_ok());
    /// assert!(berth_client::RoutingKey::new("").is_err());
    /// ```
    pub fn new(key: impl Into<String>) -> Result<Self, ClientError> {
        let key = key.into();
        let reason = if key.is_empty() {
            Some("empty")
        } else if key.len() > MAX_ROUTING_KEY_BYTES {
            Some("longer than 128 bytes")
        } else if !key.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            Some("not printable ASCII without spaces")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(ClientError::InvalidRoutingKey { key, reason }),
            None => Ok(Self(key)),
        }
    }

    /// The key as sent on the wire.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RoutingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_are_uuid_v4_and_distinct() {
        let keys: std::collections::HashSet<_> = (0..1000).map(|_| RoutingKey::mint()).collect();
        assert_eq!(keys.len(), 1000);
        for k in &keys {
            let parsed = uuid::Uuid::parse_str(k.as_str()).unwrap();
            assert_eq!(parsed.get_version_num(), 4);
        }
    }

    #[test]
    fn seeded_keys_are_reproducible_uuid_v4() {
        let a = RoutingKey::from_random_bytes([1; 16]);
        let b = RoutingKey::from_random_bytes([1; 16]);
        let c = RoutingKey::from_random_bytes([2; 16]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            uuid::Uuid::parse_str(a.as_str()).unwrap().get_version_num(),
            4
        );
    }

    #[test]
    fn caller_keys_are_validated() {
        assert!(RoutingKey::new("a").is_ok());
        assert!(RoutingKey::new("x".repeat(128)).is_ok());
        assert!(RoutingKey::new("x".repeat(129)).is_err());
        assert!(RoutingKey::new("").is_err());
        assert!(RoutingKey::new("has space").is_err());
        assert!(RoutingKey::new("é").is_err());
        assert!(RoutingKey::new("line\nbreak").is_err());
    }
}
