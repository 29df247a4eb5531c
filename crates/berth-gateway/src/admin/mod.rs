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
//! - `sticky.rs`: `GET /sticky/{key}` and `DELETE /sticky/{key}` (the shared pin store's side
//!   is `store/ops.rs`).
//! - `pd.rs`: the admin API over both pools in PD mode (`"worker_type"`, `"bootstrap_port"`).
//! - `auth.rs`: bearer keys (`--api-key`, `--admin-api-key`), for these and the generation routes.
//! - `respond.rs`: JSON and text responses.

mod auth;
mod fanout;
mod info;
mod legacy;
mod pd;
mod respond;
mod routes;
mod sticky;
mod workers;

pub(crate) use auth::authorized;
pub(crate) use routes::serve;
