//! What the store holds: one key per pin, named from the core's 128-bit pin hash (scope, leg,
//! model, key), whose value lists the pinned workers by URL (replicas may number workers
//! differently), primary first; and the Lua scripts that make each step one atomic round trip.

use redis::Script;

/// Key and channel names under one prefix.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    prefix: String,
    /// The pub/sub channel pin moves and deletions are announced on.
    pub(crate) channel: String,
}

impl Names {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            channel: format!("{prefix}:pin-moves"),
        }
    }

    /// The key of pin `hash`.
    pub(crate) fn key(&self, hash: u128) -> String {
        format!("{}:pin:{hash:032x}", self.prefix)
    }

    /// The key of a Responses chain entry: response `id` -> its session key.
    pub(crate) fn chain(&self, id: &str) -> String {
        format!("{}:chain:{id}", self.prefix)
    }
}

/// The value format's version tag.
const TAG: &str = "v1";

/// A pin's value: `v1 <primary url> [<failover url>]`.
pub(crate) fn encode<'a>(urls: impl IntoIterator<Item = &'a str>) -> String {
    let mut s = String::from(TAG);
    for u in urls {
        s.push(' ');
        s.push_str(u);
    }
    s
}

/// The URLs of a value (none for a value this version does not understand).
pub(crate) fn decode(value: &str) -> Vec<&str> {
    let mut parts = value.split(' ');
    if parts.next() != Some(TAG) {
        return Vec::new();
    }
    parts.filter(|p| !p.is_empty()).take(2).collect()
}

/// An invalidation message: `<replica id> <pin hash in hex>`.
pub(crate) fn message(replica: &str, hash: u128) -> String {
    format!("{replica} {hash:032x}")
}

/// (replica id, pin hash) of an invalidation message.
pub(crate) fn parse_message(payload: &str) -> Option<(&str, u128)> {
    let (replica, hex) = payload.split_once(' ')?;
    Some((replica, u128::from_str_radix(hex, 16).ok()?))
}

/// Place-or-get: if the pin exists, refresh its TTL and return it (the caller adopts it);
/// otherwise store ours (`SET` with the TTL) and return nil. One round trip, atomic, so two
/// replicas placing one new key at once agree on the first writer's workers.
/// KEYS[1] pin key; ARGV[1] our value; ARGV[2] TTL in ms (0: none).
pub(crate) fn place_script() -> Script {
    Script::new(
        r"
local cur = redis.call('GET', KEYS[1])
local ttl = tonumber(ARGV[2])
if cur then
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
  return cur
end
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl) else redis.call('SET', KEYS[1], ARGV[1]) end
return false
",
    )
}

/// Move: store our value (overwriting) and, only if it changed, announce it so the other
/// replicas drop their local copy. Returns 1 when it changed.
/// KEYS[1] pin key; ARGV[1] value; ARGV[2] TTL ms; ARGV[3] channel; ARGV[4] message.
pub(crate) fn move_script() -> Script {
    Script::new(
        r"
local cur = redis.call('GET', KEYS[1])
local ttl = tonumber(ARGV[2])
if cur == ARGV[1] then
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
  return 0
end
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl) else redis.call('SET', KEYS[1], ARGV[1]) end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
",
    )
}

/// Delete: remove the pin and announce it. Returns how many keys were deleted.
/// KEYS[1] pin key; ARGV[1] channel; ARGV[2] message.
pub(crate) fn delete_script() -> Script {
    Script::new(
        r"
local n = redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return n
",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_messages_round_trip() {
        let v = encode(["http://a:1", "http://b:2@3"]);
        assert_eq!(v, "v1 http://a:1 http://b:2@3");
        assert_eq!(decode(&v), ["http://a:1", "http://b:2@3"]);
        assert!(decode("v9 http://a:1").is_empty());
        let m = message("r1", 0xabc);
        assert_eq!(parse_message(&m), Some(("r1", 0xabc)));
        assert_eq!(parse_message("nonsense"), None);
        let n = Names::new("berth");
        assert_eq!(n.key(1), "berth:pin:00000000000000000000000000000001");
        assert_eq!(n.channel, "berth:pin-moves");
    }
}
