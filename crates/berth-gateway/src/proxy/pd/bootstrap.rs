//! The bootstrap fields, written into the body sent to both legs.
//!
//! As SMG does, the body gets `"bootstrap_host"` (the prefill worker's host),
//! `"bootstrap_port"` (its bootstrap port, or `null` for `none`) and `"bootstrap_room"` (a
//! random 63-bit integer, fresh per attempt) at its top level. Every other member is copied as
//! its original bytes (only the whitespace between top-level members goes); bootstrap fields the
//! client sent are replaced. A body that is not a JSON object cannot be disaggregated.

use std::fmt::Write as _;

use bytes::Bytes;

/// SGLang's bootstrap request fields.
const FIELDS: [&str; 3] = ["bootstrap_host", "bootstrap_port", "bootstrap_room"];

/// Where the decode worker fetches the prompt's KV cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bootstrap<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: Option<u16>,
    pub(crate) room: u64,
}

/// A fresh room: 63 random bits (SGLang's rooms are non-negative `int64`s).
pub(crate) fn fresh_room(random: u64) -> u64 {
    random & (u64::MAX >> 1)
}

/// `body` with the bootstrap fields set at its top level; `None` when it is not a JSON object.
pub(crate) fn with_bootstrap(body: &[u8], b: &Bootstrap<'_>) -> Option<Bytes> {
    let mut tail = String::with_capacity(96 + b.host.len());
    tail.push_str("\"bootstrap_host\":");
    tail.push_str(&serde_json::to_string(b.host).ok()?);
    match b.port {
        Some(p) => {
            let _ = write!(tail, ",\"bootstrap_port\":{p}");
        }
        None => tail.push_str(",\"bootstrap_port\":null"),
    }
    let _ = write!(tail, ",\"bootstrap_room\":{}", b.room);
    crate::proxy::rewrite::with_members(body, &FIELDS, &tail)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn parsed(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn the_three_fields_are_added_and_nothing_else_changes() {
        let body = br#"{ "model": "m", "seed": 18446744073709551616, "x": 1.50, "messages": [{"role": "user", "content": "hi"}] }"#;
        let b = Bootstrap {
            host: "10.0.0.1",
            port: Some(9000),
            room: 42,
        };
        let out = with_bootstrap(body, &b).unwrap();
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.contains("18446744073709551616"), "{text}");
        assert!(text.contains("1.50"), "{text}");
        let mut v = parsed(&out);
        let obj = v.as_object_mut().unwrap();
        assert_eq!(obj.remove("bootstrap_host"), Some(json!("10.0.0.1")));
        assert_eq!(obj.remove("bootstrap_port"), Some(json!(9000)));
        assert_eq!(obj.remove("bootstrap_room"), Some(json!(42)));
        let mut original = parsed(body);
        // The big integer and 1.50 compare equal after parsing both sides the same way.
        assert_eq!(v, std::mem::take(&mut original));
    }

    #[test]
    fn none_sends_null_old_fields_are_replaced_and_non_objects_refused() {
        let b = Bootstrap {
            host: "::1",
            port: None,
            room: 7,
        };
        let out = with_bootstrap(br#"{"bootstrap_room": 1, "bootstrap_host": "x"}"#, &b).unwrap();
        assert_eq!(
            parsed(&out),
            json!({"bootstrap_host": "::1", "bootstrap_port": null, "bootstrap_room": 7})
        );
        assert!(with_bootstrap(b"{}", &b).is_some());
        assert!(with_bootstrap(b"[1]", &b).is_none());
        assert!(with_bootstrap(b"{\"a\":1} x", &b).is_none());
    }

    #[test]
    fn rooms_have_63_bits() {
        assert_eq!(fresh_room(u64::MAX), i64::MAX as u64);
        assert_eq!(fresh_room(5), 5);
    }
}
