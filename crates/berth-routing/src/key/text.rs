//! A routing key's text, as the request path holds it.
//!
//! The pinned path only hashes a key's bytes (`sticky::scoped_key`), so a key taken from a
//! header is kept as the bytes it arrived as: an ASCII value (the usual key) is checked by
//! words ([`<[u8]>::is_ascii`]), not byte by byte as `str::from_utf8` checks a short one, and
//! a short key is copied into the key's own inline buffer (no allocation per request; the
//! buffer keeps the type as small as a `String`, so a [`crate::Decision`] moves as before). A
//! key is valid UTF-8 whichever way it was made (the rule of SPEC.md section 1.3 is
//! unchanged); [`KeyText::as_str`] gives the text to logs, the shared store and the chain
//! table, off the hit path.

use std::fmt;

/// The longest key held inline; a longer one is on the heap (the type is a `String`'s 24 bytes).
const INLINE: usize = 22;

/// A routing key's text: valid UTF-8, at most [`super::MAX_KEY_BYTES`] bytes when made by the
/// extractor.
#[derive(Clone)]
pub struct KeyText(Repr);

#[derive(Clone)]
enum Repr {
    /// `buf[..len]`, valid UTF-8.
    Inline { len: u8, buf: [u8; INLINE] },
    /// Valid UTF-8.
    Heap(Box<[u8]>),
}

impl KeyText {
    /// `raw` as a key when it is valid UTF-8 (an ASCII value is checked by words); `None`
    /// otherwise.
    pub(crate) fn from_utf8(raw: &[u8]) -> Option<Self> {
        (raw.is_ascii() || std::str::from_utf8(raw).is_ok()).then(|| Self::valid(raw))
    }

    /// `raw` (valid UTF-8) as a key: inline when short.
    fn valid(raw: &[u8]) -> Self {
        if raw.len() > INLINE {
            return Self(Repr::Heap(Box::from(raw)));
        }
        let mut buf = [0u8; INLINE];
        buf[..raw.len()].copy_from_slice(raw);
        Self(Repr::Inline {
            len: raw.len() as u8,
            buf,
        })
    }

    /// The key's bytes (what the pin table's hash reads).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, buf } => &buf[..usize::from(*len)],
            Repr::Heap(b) => b,
        }
    }

    /// The key as text (checked again here: for logs, the store and tests, not the hit path).
    pub fn as_str(&self) -> &str {
        // (valid UTF-8 by construction: the fallback is never taken)
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// The key's length in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the key is empty (the extractor never makes an empty key).
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
}

impl From<&str> for KeyText {
    fn from(s: &str) -> Self {
        Self::valid(s.as_bytes())
    }
}

impl From<String> for KeyText {
    fn from(s: String) -> Self {
        Self::from(s.as_str())
    }
}

impl From<KeyText> for String {
    fn from(k: KeyText) -> Self {
        k.as_str().to_owned()
    }
}

impl AsRef<[u8]> for KeyText {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for KeyText {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for KeyText {}

impl std::hash::Hash for KeyText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq<str> for KeyText {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for KeyText {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<String> for KeyText {
    fn eq(&self, other: &String) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_made_inline_or_on_the_heap() {
        let long = "k".repeat(INLINE + 1);
        let edge = "é".repeat(INLINE / 2);
        for s in [
            "a",
            "session-42",
            "caf\u{e9}",
            &edge,
            &"x".repeat(INLINE),
            &long,
            "\u{1f600}",
        ] {
            let from_str = KeyText::from(s);
            let from_bytes = KeyText::from_utf8(s.as_bytes()).unwrap();
            for k in [&from_str, &from_bytes] {
                assert_eq!(k.as_str(), s);
                assert_eq!(k.as_bytes(), s.as_bytes());
                assert_eq!(k.len(), s.len());
                assert_eq!(*k, s);
                assert_eq!(k.to_string(), s);
                assert_eq!(format!("{k:?}"), format!("{s:?}"));
                assert_eq!(String::from(k.clone()), s);
            }
            assert_eq!(from_str, from_bytes);
        }
        assert_ne!(KeyText::from("a"), KeyText::from("ab"));
        assert_ne!(KeyText::from(long.as_str()), KeyText::from(&long[1..]));
    }

    #[test]
    fn a_key_is_as_small_as_a_string() {
        // (a larger key makes every `Decision` larger, and its moves `memcpy` calls)
        assert_eq!(
            std::mem::size_of::<KeyText>(),
            std::mem::size_of::<String>()
        );
        assert_eq!(
            std::mem::size_of::<Option<KeyText>>(),
            std::mem::size_of::<Option<String>>()
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_make_no_key() {
        for bad in [&b"\xff"[..], b"ab\xc3", b"\xc3\x28", b"\xed\xa0\x80"] {
            assert!(KeyText::from_utf8(bad).is_none(), "{bad:?}");
            let mut long = vec![b'a'; INLINE + 8];
            long.extend_from_slice(bad);
            assert!(
                KeyText::from_utf8(&long).is_none(),
                "{bad:?} after {} bytes",
                INLINE + 8
            );
        }
    }
}
