//! SMG's older admin routes, kept for operators' scripts: `POST /add_worker?url=`,
//! `POST /remove_worker?url=`, `GET /list_workers`.
//!
//! SMG (sglang-router before the `/workers` API) answers the first two with a plain-text
//! sentence and the third with `{"urls": [...]}`; berth does the same, on top of the same
//! registration as `POST /workers` and `DELETE /workers/{id}`. Errors are berth's JSON errors
//! (SMG's legacy routes answered with a bare text line).

use std::sync::Arc;

use http::{Response, StatusCode};

use super::respond::{json, text};
use super::workers::{percent_decode, register, unregister};
use crate::error::GatewayError;
use crate::proxy::Body;
use crate::state::AppState;

/// The `url` query parameter, percent-decoded.
fn url_param(query: Option<&str>) -> Result<String, GatewayError> {
    query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("url="))
        .filter(|v| !v.is_empty())
        .map(percent_decode)
        .ok_or_else(|| {
            GatewayError::BadRequest(
                "missing `url` query parameter (`?url=http://host:port`)".into(),
            )
        })
}

/// `POST /add_worker?url=http://host:port`.
pub(crate) async fn add(
    state: &Arc<AppState>,
    query: Option<&str>,
) -> Result<Response<Body>, GatewayError> {
    let url = url_param(query)?;
    let worker = register(state, &url, None, None).await?;
    Ok(text(
        StatusCode::OK,
        format!("Successfully added worker: {}", worker.url),
    ))
}

/// `POST /remove_worker?url=http://host:port`.
pub(crate) fn remove(
    state: &AppState,
    query: Option<&str>,
) -> Result<Response<Body>, GatewayError> {
    let url = url_param(query)?;
    let worker = unregister(state, &url)?;
    Ok(text(
        StatusCode::OK,
        format!("Successfully removed worker: {}", worker.url),
    ))
}

/// `GET /list_workers`: the registered URLs.
pub(crate) fn list(state: &AppState) -> Response<Body> {
    let urls: Vec<String> = state
        .registry
        .workers()
        .iter()
        .map(|w| w.url.to_string())
        .collect();
    json(StatusCode::OK, &serde_json::json!({ "urls": urls }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_url_parameter_is_found_and_decoded() {
        let got = super::url_param(Some("x=1&url=http%3A%2F%2Fh%3A1")).unwrap();
        assert_eq!(got, "http://h:1");
        assert_eq!(
            super::url_param(Some("url=http://h:2")).unwrap(),
            "http://h:2"
        );
        assert!(super::url_param(None).is_err());
        assert!(super::url_param(Some("url=")).is_err());
    }
}
