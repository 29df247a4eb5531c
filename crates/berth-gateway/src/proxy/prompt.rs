//! The prompt text of a request body, found while serde parses the body: no DOM is built.
//!
//! The text fields (`system`, `messages`, `prompt`, `text`, `input`) are walked by a visitor
//! that keeps each string leaf as a span borrowed from the body (an owned copy only for a
//! string with escapes), in document order; numbers, booleans and keys are skipped. The spans
//! are then hashed once, field by field in that fixed order (a `system` sent after `messages`
//! still comes first, so a conversation's text only grows at its end from turn to turn), each
//! leaf followed by a newline, into the chunk hashes the router matches and inserts.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::routing::policy::{PrefixHasher, PrefixHashes};

/// The body fields that hold prompt text, in the order they are hashed.
pub(crate) const TEXT_FIELDS: [&str; 5] = ["system", "messages", "prompt", "text", "input"];

/// String leaves of one field, in document order.
#[derive(Debug, Default)]
pub(crate) struct Spans<'de>(Vec<Cow<'de, str>>);

impl<'de> DeserializeSeed<'de> for &mut Spans<'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Spans<'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<(), E> {
        self.0.push(Cow::Borrowed(s));
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.0.push(Cow::Owned(s.to_owned()));
        Ok(())
    }

    fn visit_string<E>(self, s: String) -> Result<(), E> {
        self.0.push(Cow::Owned(s));
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(&mut *self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(&mut *self)?;
        }
        Ok(())
    }
}

/// Hashes the fields' spans in [`TEXT_FIELDS`] order.
pub(crate) fn hash_prompt(fields: &[Spans<'_>; 5]) -> PrefixHashes {
    let mut h = PrefixHasher::new();
    for span in fields.iter().flat_map(|f| &f.0) {
        h.write(span.as_bytes());
        h.write(b"\n");
    }
    h.finish()
}

/// A value that is `true` (the body's `stream`); anything else, of any size, is skipped.
pub(crate) struct IsTrue(pub(crate) bool);

impl<'de> serde::Deserialize<'de> for IsTrue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<bool, E> {
                Ok(v)
            }
            fn visit_str<E>(self, _: &str) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_unit<E>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_none<E>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(false)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(false)
            }
        }
        d.deserialize_any(V).map(IsTrue)
    }
}
