//! Who may call what: bearer keys, compared in constant time. The generation routes
//! (`service.rs`) and the admin routes (`routes.rs`) both check here.

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

/// `Authorization: Bearer <key>` matches `key` (or no key is configured); `authorization` is
/// the request's first `Authorization` value.
pub(crate) fn authorized(authorization: Option<&[u8]>, key: Option<&Secret>) -> bool {
    let Some(key) = key else { return true };
    let Some(given) = authorization.and_then(|v| v.strip_prefix(b"Bearer ")) else {
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
