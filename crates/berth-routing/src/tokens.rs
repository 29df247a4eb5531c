//! The `x-smg-routing-tokens` hint: token ids a client computed, so `cache_aware` can place a
//! request without the gateway reading its body.
//!
//! A malformed hint is ignored (the caller falls back to reading the body), never an error:
//! a hint is an optimisation, and refusing a request over it would turn a client bug into an
//! outage.

/// Most ids a hint may carry.
pub const MAX_ROUTING_TOKENS: usize = 512;
/// Most bytes a hint may carry.
pub const MAX_ROUTING_TOKENS_BYTES: usize = 4096;

/// Parses a hint: comma-separated decimal `u32` ids, no spaces, signs or empty items, at most
/// [`MAX_ROUTING_TOKENS`] ids and [`MAX_ROUTING_TOKENS_BYTES`] bytes. `None` when malformed.
pub fn parse_routing_tokens(raw: &[u8]) -> Option<Vec<u32>> {
    if raw.is_empty() || raw.len() > MAX_ROUTING_TOKENS_BYTES {
        return None;
    }
    let mut out = Vec::with_capacity(raw.len() / 4 + 1);
    for item in raw.split(|b| *b == b',') {
        if item.is_empty()
            || !item.iter().all(u8::is_ascii_digit)
            || out.len() == MAX_ROUTING_TOKENS
        {
            return None;
        }
        let mut v: u32 = 0;
        for d in item {
            v = v.checked_mul(10)?.checked_add(u32::from(d - b'0'))?;
        }
        out.push(v);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_hints_parse() {
        assert_eq!(parse_routing_tokens(b"1,2,3"), Some(vec![1, 2, 3]));
        assert_eq!(parse_routing_tokens(b"4294967295"), Some(vec![u32::MAX]));
        assert_eq!(parse_routing_tokens(b"007"), Some(vec![7]));
    }

    #[test]
    fn malformed_hints_are_ignored() {
        for bad in [
            &b""[..],
            b"1,,2",
            b",1",
            b"1,",
            b"1, 2",
            b" 1",
            b"+1",
            b"-1",
            b"4294967296",
            b"1a",
            b"\xff",
        ] {
            assert_eq!(
                parse_routing_tokens(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn limits_are_enforced() {
        let ok = vec!["1"; MAX_ROUTING_TOKENS].join(",");
        assert_eq!(
            parse_routing_tokens(ok.as_bytes()).map(|v| v.len()),
            Some(512)
        );
        let too_many = vec!["1"; MAX_ROUTING_TOKENS + 1].join(",");
        assert_eq!(parse_routing_tokens(too_many.as_bytes()), None);
        let too_long = vec!["1000000000"; 400].join(",");
        assert!(too_long.len() > MAX_ROUTING_TOKENS_BYTES);
        assert_eq!(parse_routing_tokens(too_long.as_bytes()), None);
    }
}
