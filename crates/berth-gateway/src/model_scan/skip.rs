//! The scan's fast paths: a nested value nobody keeps passed in one loop, and the next quote or
//! backslash of a string found eight bytes at a time.
//!
//! Most of a request body is nested (`messages`) and kept by nobody: the scan only has to find
//! where it closes. Going through `step` for each of its structural bytes (every quote,
//! bracket and escape of every message) cost about 30 instructions a byte on a small chat body;
//! here the same bytes are passed in one loop with the string runs found a word at a time.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::{Expect, Field, ModelScan};

/// A searcher for `field`'s name (built once).
pub(super) fn finder(field: Field) -> &'static Finder<'static> {
    static FINDERS: LazyLock<[Finder<'static>; 5]> =
        LazyLock::new(|| Field::ALL.map(|f| Finder::new(f.name())));
    &FINDERS[field as usize]
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The bytes of `w` equal to `b`, as their high bits. Only the lowest set bit is exact (a
/// borrow can set the bit of a byte above a match), which is the one [`stop`] reads.
fn matches(w: u64, b: u8) -> u64 {
    let x = w ^ (LO * u64::from(b));
    x.wrapping_sub(LO) & !x & HI
}

/// Where a string's next quote or backslash is (`bytes.len()`: none): eight bytes at a time
/// for the first 32 (message fields and short values), then `memchr2` (long text).
pub(super) fn stop(bytes: &[u8]) -> usize {
    let head = bytes.len().min(32);
    let mut words = bytes[..head].chunks_exact(8);
    let mut at = 0;
    for c in words.by_ref() {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        let w = u64::from_le_bytes(a);
        let m = matches(w, b'"') | matches(w, b'\\');
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    if let Some(i) = words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\')
    {
        return at + i;
    }
    let rest = &bytes[head..];
    head + memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len())
}

impl ModelScan {
    /// At depth > 1 with nothing kept: passes the nested value's bytes up to and including the
    /// bracket that brings the scan back to depth 1 (or all of `bytes`); returns how many. The
    /// same as `step` on each byte, without its per-byte dispatch.
    pub(super) fn skip_nested(&mut self, bytes: &[u8]) -> usize {
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                if self.escape {
                    self.escape = false;
                    i += 1;
                    continue;
                }
                i += stop(&bytes[i..]);
                let Some(&b) = bytes.get(i) else { break };
                i += 1;
                if b == b'\\' {
                    self.escape = true;
                } else {
                    self.in_string = false;
                }
                continue;
            }
            let b = bytes[i];
            i += 1;
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 1 {
                        self.expect = Expect::Comma;
                        return i;
                    }
                }
                _ => {}
            }
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn naive(bytes: &[u8]) -> usize {
        bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\')
            .unwrap_or(bytes.len())
    }

    #[test]
    fn stop_finds_the_first_quote_or_backslash() {
        assert_eq!(stop(b""), 0);
        assert_eq!(stop(b"abc"), 3);
        assert_eq!(stop(b"\""), 0);
        assert_eq!(stop(b"abcdefg\\\""), 7);
        // a match after a byte whose borrow would mark the next one (0x22 - 1 = 0x21, '!')
        assert_eq!(stop(b"!!!!!!!\"!!!!!!!!"), 7);
        assert_eq!(stop(b"\x23\x22"), 1);
        for at in 0..100 {
            let mut v = vec![b'x'; 100];
            v[at] = b'"';
            assert_eq!(stop(&v), at);
            v[at] = b'\\';
            assert_eq!(stop(&v), at);
        }
    }

    proptest! {
        #[test]
        fn stop_is_the_naive_search(bytes in proptest::collection::vec(
            prop_oneof![
                8 => prop_oneof![Just(0x21u8), Just(0x5bu8), Just(0xa2u8), Just(0x23u8), any::<u8>()],
                1 => prop_oneof![Just(b'"'), Just(b'\\')],
            ],
            0..80,
        )) {
            prop_assert_eq!(stop(&bytes), naive(&bytes));
        }
    }

    #[test]
    fn a_nested_value_is_passed_to_its_close() {
        let mut s = ModelScan::new();
        s.feed(br#"{"messages":["#);
        assert_eq!(s.depth, 2);
        let rest = br#"{"c":"a \"}]\\"},["]"]],"model":"m"}"#;
        let n = s.skip_nested(rest);
        assert_eq!(&rest[n..], br#","model":"m"}"#);
        assert_eq!((s.depth, s.expect, s.in_string), (1, Expect::Comma, false));
        // cut inside a string, after a backslash: the next call goes on from there
        let mut s = ModelScan::new();
        s.feed(br#"{"messages":["#);
        assert_eq!(s.skip_nested(br#"{"c":"x\"#), 8);
        assert!(s.in_string && s.escape);
        assert_eq!(s.skip_nested(br#"""}],"#), 4);
        assert_eq!(s.depth, 1);
    }
}
