//! The routes the gateway answers itself: health, models, the admin API and SMG's info routes.
//!
//! - `routes.rs`: the route table (a closed enum: path, methods, who may call it) and the
//!   dispatch; docs/gateway.md lists the same routes and a test keeps the two in step.
//! - `workers.rs`: `GET/POST /workers`, `GET/DELETE /workers/{id}` in SMG's shape
//!   (`{"workers", "total", "stats"}`), with berth's own fields alongside.
//! - `legacy.rs`: SMG's older query-string admin routes (`/add_worker?url=`,
//!   `/remove_worker?url=`, `/list_workers`).
//! - `info.rs`: `/v1/models` and the routes answered by one available worker
//!   (`/health_generate`, `/get_server_info`, `/get_model_info`).
//! - `fanout.rs`: the routes that ask every worker (`/flush_cache`, `/get_loads`).
//! - `respond.rs`: JSON and text responses.

mod fanout;
mod info;
mod legacy;
mod respond;
mod routes;
mod workers;

pub(crate) use respond::json;
pub use routes::docs_route_table;
pub(crate) use routes::serve;
pub(crate) use workers::percent_decode;
