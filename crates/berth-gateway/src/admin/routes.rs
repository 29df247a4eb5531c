//! The route table of everything the gateway answers itself, and its dispatch.
//!
//! One closed enum: each route's path pattern, methods and guard live here, so the dispatch,
//! the 405 answers and the docs test read the same table. Open routes (health, readiness,
//! `/v1/models` and the info routes answered by a worker) need no key, as in SMG; admin routes
//! need `--admin-api-key`, or `--api-key` when only that is set.

use std::sync::Arc;

use crate::request_body::ConnBody;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};

use super::auth::{admin_key, authorized};
use super::{fanout, info, legacy, sticky, workers};
use crate::error::GatewayError;
use crate::proxy::Body;
use crate::state::AppState;

/// A route the gateway answers itself (the proxied routes are `proxy::Endpoint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    Liveness,
    Readiness,
    Models,
    HealthGenerate,
    ServerInfo,
    ModelInfo,
    Workers,
    Worker,
    AddWorker,
    RemoveWorker,
    ListWorkers,
    FlushCache,
    GetLoads,
    Sticky,
}

impl Route {
    /// Every route, in the order docs/gateway.md lists them.
    #[cfg(test)]
    pub(crate) const ALL: [Self; 15] = [
        Self::Models,
        Self::Health,
        Self::Liveness,
        Self::Readiness,
        Self::HealthGenerate,
        Self::ServerInfo,
        Self::ModelInfo,
        Self::Workers,
        Self::Worker,
        Self::AddWorker,
        Self::RemoveWorker,
        Self::ListWorkers,
        Self::FlushCache,
        Self::GetLoads,
        Self::Sticky,
    ];

    /// The route at `path`, and the path's tail after the route's prefix (`{id}`, `{key}`).
    pub(crate) fn parse(path: &str) -> Option<(Self, &str)> {
        let exact = match path {
            "/health" => Self::Health,
            "/liveness" => Self::Liveness,
            "/readiness" => Self::Readiness,
            "/v1/models" => Self::Models,
            "/health_generate" => Self::HealthGenerate,
            "/get_server_info" => Self::ServerInfo,
            "/get_model_info" => Self::ModelInfo,
            "/workers" | "/workers/" => Self::Workers,
            "/add_worker" => Self::AddWorker,
            "/remove_worker" => Self::RemoveWorker,
            "/list_workers" => Self::ListWorkers,
            "/flush_cache" => Self::FlushCache,
            "/get_loads" => Self::GetLoads,
            _ => {
                if let Some(id) = path.strip_prefix("/workers/") {
                    return Some((Self::Worker, id));
                }
                if let Some(key) = path.strip_prefix("/sticky/") {
                    return Some((Self::Sticky, key));
                }
                return None;
            }
        };
        Some((exact, ""))
    }

    /// The path as docs/gateway.md writes it.
    #[cfg(test)]
    pub(crate) fn pattern(self) -> &'static str {
        match self {
            Self::Health => "/health",
            Self::Liveness => "/liveness",
            Self::Readiness => "/readiness",
            Self::Models => "/v1/models",
            Self::HealthGenerate => "/health_generate",
            Self::ServerInfo => "/get_server_info",
            Self::ModelInfo => "/get_model_info",
            Self::Workers => "/workers",
            Self::Worker => "/workers/{id}",
            Self::AddWorker => "/add_worker",
            Self::RemoveWorker => "/remove_worker",
            Self::ListWorkers => "/list_workers",
            Self::FlushCache => "/flush_cache",
            Self::GetLoads => "/get_loads",
            Self::Sticky => "/sticky/{key}",
        }
    }

    /// The methods the route answers.
    pub(crate) fn methods(self) -> &'static [Method] {
        match self {
            Self::Workers => &[Method::GET, Method::POST],
            Self::Worker | Self::Sticky => &[Method::GET, Method::DELETE],
            Self::AddWorker | Self::RemoveWorker | Self::FlushCache => &[Method::POST],
            Self::Health
            | Self::Liveness
            | Self::Readiness
            | Self::Models
            | Self::HealthGenerate
            | Self::ServerInfo
            | Self::ModelInfo
            | Self::ListWorkers
            | Self::GetLoads => &[Method::GET],
        }
    }

    /// Whether the route needs the admin key (when one is configured).
    fn guarded(self) -> bool {
        match self {
            Self::Health
            | Self::Liveness
            | Self::Readiness
            | Self::Models
            | Self::HealthGenerate
            | Self::ServerInfo
            | Self::ModelInfo => false,
            Self::Workers
            | Self::Worker
            | Self::AddWorker
            | Self::RemoveWorker
            | Self::ListWorkers
            | Self::FlushCache
            | Self::GetLoads
            | Self::Sticky => true,
        }
    }
}

/// Answers a request for a route the gateway serves itself (404 `not_found` for any other path).
pub(crate) async fn serve(
    state: &Arc<AppState>,
    req: Request<ConnBody>,
) -> Result<Response<Body>, GatewayError> {
    let path = req.uri().path().to_owned();
    let Some((route, tail)) = Route::parse(&path) else {
        return Err(GatewayError::NotFound(path));
    };
    if route.guarded()
        && !authorized(
            req.headers()
                .get(http::header::AUTHORIZATION)
                .map(http::HeaderValue::as_bytes),
            admin_key(state),
        )
    {
        return Err(GatewayError::Unauthorized);
    }
    let method = req.method().clone();
    if !route.methods().contains(&method) {
        // The error's usual response, plus the `Allow` header RFC 9110 asks of a 405 (SMG sends
        // it too), from the route table.
        let mut resp = GatewayError::MethodNotAllowed(method.to_string()).to_response();
        let allow: Vec<&str> = route.methods().iter().map(Method::as_str).collect();
        if let Ok(v) = HeaderValue::from_str(&allow.join(", ")) {
            resp.headers_mut().insert(header::ALLOW, v);
        }
        return Ok(resp);
    }
    let query = req.uri().query().map(str::to_owned);
    let query = query.as_deref();
    match (route, method) {
        (Route::Health | Route::Liveness, _) => Ok(super::respond::json(
            StatusCode::OK,
            &serde_json::json!({"status": "ok"}),
        )),
        (Route::Readiness, _) => info::readiness(state),
        (Route::Models, _) => Ok(info::models(state)),
        (Route::HealthGenerate, _) => info::forward(state, "/health_generate").await,
        (Route::ServerInfo, _) => info::forward(state, "/get_server_info").await,
        (Route::ModelInfo, _) => info::forward(state, "/get_model_info").await,
        (Route::Workers, Method::POST) => workers::add(state, req.into_body()).await,
        (Route::Workers, _) => Ok(workers::list(state)),
        (Route::Worker, Method::DELETE) => workers::remove(state, tail),
        (Route::Worker, _) => workers::get(state, tail),
        (Route::AddWorker, _) => legacy::add(state, query).await,
        (Route::RemoveWorker, _) => legacy::remove(state, query),
        (Route::ListWorkers, _) => Ok(legacy::list(state)),
        (Route::FlushCache, _) => Ok(fanout::flush_cache(state).await),
        (Route::GetLoads, _) => Ok(fanout::get_loads(state).await),
        (Route::Sticky, Method::DELETE) => sticky::delete(state, tail, query).await,
        (Route::Sticky, _) => sticky::show(state, tail, query).await,
    }
}

#[cfg(test)]
#[path = "../../tests/support/route_table.rs"]
mod route_table;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::Route;
    use crate::proxy::Endpoint;

    /// `(method, path)` of every route in docs/gateway.md's Routes table, each once.
    fn documented() -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for route in
            super::route_table::docs_route_table(include_str!("../../../../docs/gateway.md"))
        {
            assert!(out.insert(route.clone()), "{route:?} twice");
        }
        out
    }

    #[test]
    fn the_docs_route_table_lists_exactly_the_routes_served() {
        let mut served = BTreeSet::new();
        for route in Route::ALL {
            for m in route.methods() {
                served.insert((m.to_string(), route.pattern().to_owned()));
            }
            let concrete = route.pattern().replace("{id}", "3").replace("{key}", "k");
            assert_eq!(Route::parse(&concrete).map(|r| r.0), Some(route));
        }
        for e in Endpoint::ALL {
            assert_eq!(Endpoint::from_path(e.as_str().as_bytes()), Some(e));
            served.insert(("POST".to_owned(), e.as_str().to_owned()));
        }
        let documented = documented();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&served).collect();
        assert!(
            undocumented.is_empty() && unserved.is_empty(),
            "served but not in docs/gateway.md: {undocumented:?}; documented but not served: {unserved:?}"
        );
    }
}
