//! Setting top-level members of a JSON request body without re-encoding the rest: every other
//! member is copied as its original bytes (only the whitespace between top-level members goes),
//! members of the same names the client sent are replaced. Used for the data-parallel rank
//! (`rank.rs`) and PD's bootstrap fields (`pd/bootstrap.rs`).

use std::fmt;

use bytes::Bytes;
use serde::Deserializer;
use serde::de::{Error as _, MapAccess, Visitor};
use serde_json::value::RawValue;

/// `body` with its members named in `replaced` dropped and `members` (already encoded
/// `"name":value` pairs, comma-separated) appended; `None` when `body` is not one JSON object.
pub(crate) fn with_members(body: &[u8], replaced: &[&str], members: &str) -> Option<Bytes> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let out = de
        .deserialize_map(Rewrite {
            replaced,
            members,
            capacity: body.len() + members.len() + 2,
        })
        .ok()?;
    de.end().ok()?;
    Some(Bytes::from(out))
}

/// Copies an object's members (values as raw bytes), dropping the replaced ones and appending
/// the new.
struct Rewrite<'a> {
    replaced: &'a [&'a str],
    members: &'a str,
    capacity: usize,
}

impl<'de> Visitor<'de> for Rewrite<'_> {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(self.capacity);
        out.push(b'{');
        while let Some(key) = map.next_key::<String>()? {
            let value: &'de RawValue = map.next_value()?;
            if self.replaced.contains(&key.as_str()) {
                continue;
            }
            serde_json::to_writer(&mut out, &key).map_err(A::Error::custom)?;
            out.push(b':');
            out.extend_from_slice(value.get().as_bytes());
            out.push(b',');
        }
        out.extend_from_slice(self.members.as_bytes());
        out.push(b'}');
        Ok(out)
    }
}
