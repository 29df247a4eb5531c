//! The client side of berth's routing-key contract (seed `000`, SPEC.md section 4).
//!
//! # Layout
//!
//! - [`key`]: [`RoutingKey`], a UUID minted once per sample or session and kept across retries.
//! - [`rid`]: [`RequestId`], request ids with lineage (`base_t{turn}`, `base_t{turn}_r{retry}`)
//!   that a gateway strips back to `base`, and [`strip_lineage`], the same rule the gateway uses.
//! - [`policy`]: [`RouterPolicy`] and the one predicate [`policy_uses_routing_key`].
//! - [`headers`]: [`routing_headers`], the headers a request must carry for a router policy.
//! - [`error`]: [`ClientError`], this crate's one error type.
//!
//! # Why a library
//!
//! A router that places requests by key (`consistent_hashing`, `manual`) can only keep a
//! conversation on one worker if every client sends the same key on every turn, and a fresh key
//! for every independent sample. Scattering `policy == "consistent_hashing"` checks and hand-built
//! headers across call sites is how keys go missing; this crate is the one place that decides.
//!
//! ```
//! use berth_client::{RouterPolicy, RoutingKey, RequestId, routing_headers};
//!
//! let key = RoutingKey::mint();
//! let headers = routing_headers(RouterPolicy::Manual, Some(&key))?;
//! assert_eq!(headers.get("X-SMG-Routing-Key"), Some(key.as_str()));
//!
//! let rid = RequestId::new(key.as_str())?;
//! assert_eq!(rid.turn(2).retry(1).to_string(), format!("{key}_t2_r1"));
//! # Ok::<(), berth_client::ClientError>(())
//! ```

pub mod error;
pub mod headers;
pub mod key;
pub mod policy;
pub mod rid;

pub use error::ClientError;
pub use headers::{ROUTING_KEY_HEADER, RoutingHeaders, routing_headers};
pub use key::RoutingKey;
pub use policy::{RouterPolicy, policy_uses_routing_key};
pub use rid::{RequestId, TurnId, strip_lineage};
