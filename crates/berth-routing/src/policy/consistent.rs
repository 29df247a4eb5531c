//! The ring behind `consistent_hashing` (`worker/ring.rs`; the snapshot builds it, `policy/mod.rs` looks
//! keys up on it).
//!
//! Each worker contributes `VNODES` (160) points, hashed from its registered URL, so the ring
//! depends only on the set of URLs: every gateway replica that sees the same workers builds the
//! same ring and places every key identically. A key goes to the first point clockwise from
//! its hash whose worker is a candidate; skipping non-candidates is the same as building a
//! ring of the candidates alone, so a worker's absence moves only its own keys, and a new
//! worker takes only about 1/n of them. The hash is XXH3 with seed 0, fixed forever: the
//! golden tests fail if a refactor would move sessions.

#[cfg(test)]
mod tests;
