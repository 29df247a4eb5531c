//! Request ids with lineage: `base_t{turn}` and `base_t{turn}_r{retry}`.
//!
//! SGLang wants a unique `rid` per request, while a gateway with the routing-key override wants
//! every turn and every retry of a conversation to share one key. Lineage suffixes give both: the
//! full rid is unique, and the gateway strips `_r{retry}` then `_t{turn}` (each at most once, the
//! retry first) to recover `base`. [`strip_lineage`] is that rule, exposed so clients can check
//! what key a rid will map to.

use std::fmt;

use crate::error::ClientError;
use crate::key::MAX_ROUTING_KEY_BYTES;

/// The base of a family of request ids: one conversation or sample.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestId {
    base: String,
}

impl RequestId {
    /// Checks that `base` can serve as a routing key once the gateway strips the lineage:
    /// non-empty, at most 128 bytes, no whitespace or control characters.
    ///
    /// ```
    /// let rid = berth_client::RequestId::new("conv")?;
    /// assert_eq!(rid.turn(3).to_string(), "conv_t3");
    /// assert_eq!(rid.turn(3).retry(2).to_string(), "conv_t3_r2");
    /// # Ok::<(), berth_client::ClientError>(())
    /// ```
    pub fn new(base: impl Into<String>) -> Result<Self, ClientError> {
        let base = base.into();
        let reason = if base.is_empty() {
            Some("empty")
        } else if base.len() > MAX_ROUTING_KEY_BYTES {
            Some("longer than 128 bytes, the gateway would ignore it as a key")
        } else if base.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Some("contains whitespace or control characters")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(ClientError::InvalidRequestId { base, reason }),
            None => Ok(Self { base }),
        }
    }

    /// The base, which is also the key a gateway derives from every rid of this family.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The id of one turn (first attempt).
    pub fn turn(&self, turn: u32) -> TurnId {
        TurnId {
            base: self.base.clone(),
            turn,
            retry: None,
        }
    }
}

/// The id of one turn, optionally a retry of it; `Display` gives the wire form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TurnId {
    base: String,
    turn: u32,
    retry: Option<u32>,
}

impl TurnId {
    /// The same turn, retried for the `retry`-th time (`retry` 0 means the first attempt and
    /// carries no suffix).
    pub fn retry(mut self, retry: u32) -> Self {
        self.retry = (retry > 0).then_some(retry);
        self
    }

    /// The family's base.
    pub fn base(&self) -> &str {
        &self.base
    }
}

impl fmt::Display for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_t{}", self.base, self.turn)?;
        if let Some(r) = self.retry {
            write!(f, "_r{r}")?;
        }
        Ok(())
    }
}

/// The key a gateway derives from a rid (SPEC.md section 1): remove one `_r<digits>` suffix,
/// then one `_t<digits>` suffix; if nothing would be left, the whole rid is the key. This is
/// the gateway's own function, re-exported, so client and gateway cannot disagree.
///
/// ```
/// use berth_client::strip_lineage;
/// assert_eq!(strip_lineage("conv_t2_r1"), "conv");
/// assert_eq!(strip_lineage("conv_r1_t2"), "conv_r1");
/// assert_eq!(strip_lineage("conv_r3"), "conv");
/// assert_eq!(strip_lineage("_t2"), "_t2");
/// ```
pub use berth_routing::key::strip_lineage;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineage_table_from_the_spec() {
        for (rid, key) in [
            ("conv_t2_r1", "conv"),
            ("conv_r1_t2", "conv_r1"),
            ("conv_t2", "conv"),
            ("conv_r3", "conv"),
            ("conv", "conv"),
            ("conv_t", "conv_t"),
            ("conv_T2", "conv_T2"),
            ("conv_t2_t3", "conv_t2"),
            ("conv_r1_r2", "conv_r1"),
            ("_t2_r1", "_t2_r1"),
            ("t2", "t2"),
            ("a_t007", "a"),
        ] {
            assert_eq!(strip_lineage(rid), key, "rid {rid}");
        }
    }

    #[test]
    fn built_ids_strip_back_to_their_base() {
        for base in ["conv", "conv_t3", "conv_r3", "x_r1_t2", "7f9c-uuid", "_"] {
            let id = RequestId::new(base).unwrap();
            for turn in [0, 1, 17] {
                assert_eq!(strip_lineage(&id.turn(turn).to_string()), base);
                for retry in [0, 1, 5] {
                    let rid = id.turn(turn).retry(retry).to_string();
                    assert_eq!(strip_lineage(&rid), base, "rid {rid}");
                }
            }
        }
    }

    #[test]
    fn retry_zero_has_no_suffix() {
        let id = RequestId::new("s").unwrap();
        assert_eq!(id.turn(4).retry(0).to_string(), "s_t4");
        assert_eq!(id.turn(4).retry(2).to_string(), "s_t4_r2");
    }

    #[test]
    fn bad_bases_are_refused() {
        assert!(RequestId::new("").is_err());
        assert!(RequestId::new("a b").is_err());
        assert!(RequestId::new("x".repeat(129)).is_err());
        assert!(RequestId::new("x".repeat(128)).is_ok());
    }
}
