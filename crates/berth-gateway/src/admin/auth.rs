//! Who may call what: bearer keys, compared in constant time. The generation routes
//! (`service.rs`) and the admin routes (`routes.rs`) both check here.

use http::{HeaderMap, header};

use crate::config::Secret;
use crate::state::AppState;

/// The key the admin routes need: `--admin-api-key`, else `--api-key` (the admin API is never open
/// while generation is guarded).
pub(crate) fn admin_key(state: &AppState) -> Option<&Secret> {
    state
        .config
        .admin_api_key
        .as_ref()
        .or(state.config.api_key.as_ref())
}

/// `Authorization: Bearer <key>` matches `key` (or no key is configured).
pub(crate) fn authorized(headers: &HeaderMap, key: Option<&Secret>) -> bool {
    let Some(key) = key else { return true };
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
    else {
        return false;
    };
    constant_time_eq(given, key.0.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
