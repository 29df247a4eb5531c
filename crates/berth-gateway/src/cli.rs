//! `berth serve`: flags (SMG's names), `--config FILE`, and the process entry point.
//!
//! Every flag is optional on the command line so a TOML file (`--config`, same keys as the flags
//! without the dashes, e.g. `worker-urls = ["http://w1:8000"]`) can supply it; the command line
//! wins over the file, the file over the defaults. Enum-valued flags stay strings here and are
//! parsed into the core's closed enums once, in [`GatewayConfig::from_args`].

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::config::{GatewayConfig, defaults};
use crate::error::GatewayError;

mod convert;

/// Flags of `berth serve`. Names follow the SGLang Model Gateway (`smg launch`).
#[derive(clap::Args, Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct Args {
    /// Address to listen on [default: 0.0.0.0].
    #[arg(long)]
    pub host: Option<String>,
    /// Port to listen on [default: 30000].
    #[arg(long)]
    pub port: Option<u16>,
    /// Worker base URLs, e.g. http://10.0.0.1:8000 (space-separated).
    #[arg(long, num_args = 1..)]
    pub worker_urls: Vec<String>,
    /// Routing policy: random, round_robin, power_of_two, cache_aware, consistent_hashing, manual,
    /// ttft_aware, agentic [default: cache_aware].
    #[arg(long)]
    pub policy: Option<String>,
    /// Pin keyed requests (body rid or routing-key header) on top of any policy.
    #[arg(long, alias = "sticky-sessions")]
    #[serde(alias = "sticky-sessions")]
    pub routing_key_override: bool,
    /// Ordered routing-key header names [default: x-smg-routing-key].
    #[arg(long, num_args = 1..)]
    pub routing_key_headers: Vec<String>,
    /// Ordered places a routing key comes from: rid, routing_key_headers, header:<name>,
    /// nvext_session_id, previous_response_id, prompt_cache_key, conversation,
    /// metadata_user_id [default: rid routing_key_headers header:session_id
    /// header:conversation_id header:x-claude-code-session-id nvext_session_id
    /// previous_response_id prompt_cache_key conversation metadata_user_id].
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub routing_key_sources: Vec<String>,
    /// Where new keys go: random, min_load, min_group, delegate [default: random under manual,
    /// delegate under the override].
    #[arg(long)]
    pub assignment_mode: Option<String>,
    /// Pins unused this long are evicted; 0 disables eviction [default: 14400].
    #[arg(long, alias = "sticky-key-idle-secs")]
    #[serde(alias = "sticky-key-idle-secs")]
    pub max_idle_secs: Option<u64>,
    /// Seconds between eviction sweeps; 0 disables (refused with cache_aware) [default: 120].
    #[arg(long, alias = "eviction-interval")]
    #[serde(alias = "eviction-interval")]
    pub eviction_interval_secs: Option<u64>,
    /// Let keyless requests through under consistent_hashing and manual.
    #[arg(long)]
    pub allow_requests_without_routing_key: bool,
    /// cache_aware: prefix-match ratio above which the best-matching worker wins [default: 0.3].
    #[arg(long)]
    pub cache_threshold: Option<f64>,
    /// cache_aware: spill gate, requests in flight above the mean (capped at max(4, 2 sqrt(mean)))
    /// past which the matched worker spills to the least loaded [default: 64].
    #[arg(long, alias = "spill-abs-threshold")]
    #[serde(alias = "spill-abs-threshold")]
    pub balance_abs_threshold: Option<u32>,
    /// cache_aware: spill gate, multiple of the mean load past which the matched worker spills
    /// [default: 1.5].
    #[arg(long, alias = "spill-rel-threshold")]
    #[serde(alias = "spill-rel-threshold")]
    pub balance_rel_threshold: Option<f64>,
    /// cache_aware: maximum prefix-tree size per worker [default: 67108864].
    #[arg(long)]
    pub max_tree_size: Option<usize>,
    /// cache_aware, ttft_aware: memory of the prefix index over all models and workers, MiB;
    /// least recently used prefixes evicted first [default: 32].
    #[arg(long)]
    pub prefix_index_budget_mb: Option<usize>,
    /// cache_aware, ttft_aware, agentic: read the cached tokens workers report in their answers
    /// (usage.prompt_tokens_details.cached_tokens, meta_info.cached_tokens, timings.cache_n):
    /// off, measure (compare with the prefix index, index not corrected; agentic also sizes
    /// its turns and sees KV pressure from the reports) or on (also correct the index and learn
    /// each worker's effective KV capacity) [default: measure].
    #[arg(long)]
    pub cache_feedback: Option<String>,
    /// ttft_aware: starting fixed time to first byte of every worker, ms [default: 10].
    #[arg(long)]
    pub ttft_base_ms: Option<f64>,
    /// ttft_aware: starting prefill cost of every worker, ms per 1000 uncached prompt tokens
    /// [default: 100].
    #[arg(long)]
    pub ttft_prefill_ms_per_1k_tokens: Option<f64>,
    /// ttft_aware: starting cost of each request decoding on a worker, ms [default: 0.5].
    #[arg(long)]
    pub ttft_decode_ms_per_request: Option<f64>,
    /// ttft_aware: characters per token when the prompt is text [default: 4].
    #[arg(long)]
    pub ttft_chars_per_token: Option<f64>,
    /// ttft_aware: a pin moves only when staying is predicted slower than this factor times the
    /// best other worker (plus --ttft-move-margin-ms) [default: 2].
    #[arg(long)]
    pub ttft_move_factor: Option<f64>,
    /// ttft_aware: margin of the move rule, ms [default: 200].
    #[arg(long)]
    pub ttft_move_margin_ms: Option<f64>,
    /// ttft_aware: a key's pin moves at most once per this many seconds [default: 30].
    #[arg(long)]
    pub ttft_move_interval_secs: Option<u32>,
    /// Seed of the generator routing draws from (random placement, power-of-two sampling, tie
    /// breaks): the same seed and the same requests in the same order give the same choices
    /// [default: seeded from the clock].
    #[arg(long)]
    pub routing_seed: Option<u64>,
    /// Largest accepted request body in bytes; larger gets 413 [default: 536870912].
    #[arg(long)]
    pub max_payload_size: Option<usize>,
    /// Bytes held by request bodies the gateway reads whole, over all requests, MiB; a body
    /// that does not fit waits 1 s, then gets 503 body_budget_exhausted [default: 256].
    #[arg(long)]
    pub buffered_body_budget_mb: Option<usize>,
    /// Seconds allowed for a worker's response headers; then 504 [default: 1800].
    #[arg(long)]
    pub request_timeout_secs: Option<u64>,
    /// Retries on other workers before any response byte was sent [default: 5].
    #[arg(long)]
    pub retry_max_retries: Option<u32>,
    /// Consecutive failures that open a worker's circuit breaker [default: 10].
    #[arg(long)]
    pub cb_failure_threshold: Option<u32>,
    /// Half-open successes that close the breaker [default: 3].
    #[arg(long)]
    pub cb_success_threshold: Option<u32>,
    /// Seconds a breaker stays open before a half-open trial [default: 60].
    #[arg(long)]
    pub cb_timeout_duration_secs: Option<u64>,
    /// Seconds between health checks (GET /health) of each worker [default: 60].
    #[arg(long)]
    pub health_check_interval_secs: Option<u64>,
    /// Timeout of one health check [default: 5].
    #[arg(long)]
    pub health_check_timeout_secs: Option<u64>,
    /// Failed checks in a row that take a worker out of routing [default: 3].
    #[arg(long)]
    pub health_failure_threshold: Option<u32>,
    /// Good checks in a row that bring it back [default: 2].
    #[arg(long)]
    pub health_success_threshold: Option<u32>,
    /// Seconds between polls of every worker's GET /v1/loads (queued requests, KV token usage)
    /// [default: 10].
    #[arg(long)]
    pub load_monitor_interval: Option<u64>,
    /// Poll worker loads only when routing reads them (worker overload protection, or
    /// --policy agentic); by default every worker is polled.
    #[arg(long)]
    pub disable_load_monitoring: bool,
    /// Queued requests at or above which a worker is left out of placement while another worker
    /// is under both thresholds (>= 1) [default: 8].
    #[arg(long)]
    pub worker_overload_waiting_requests: Option<u32>,
    /// KV token usage at or above which a worker is left out of placement while another worker
    /// is under both thresholds, in (0, 1] [default: 0.8].
    #[arg(long)]
    pub worker_overload_token_usage: Option<f64>,
    /// Worker overload protection is on by default; accepted so older command lines parse.
    #[arg(long)]
    pub worker_overload_protection: bool,
    /// Switch worker overload protection off.
    #[arg(long)]
    pub disable_worker_overload_protection: bool,
    /// Refuse a request with 503 worker_overload_protection_shed (Retry-After: the load poll
    /// interval) when every worker it could use is overloaded, instead of placing it anyway.
    #[arg(long)]
    pub worker_overload_shed: bool,
    /// Seconds start-up waits for the workers to answer /health [default: 1800].
    #[arg(long)]
    pub worker_startup_timeout_secs: Option<u64>,
    /// Require `Authorization: Bearer <key>` on generation routes.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Address of the Prometheus endpoint [default: 0.0.0.0, or :: when --host is IPv6].
    #[arg(long)]
    pub prometheus_host: Option<String>,
    /// Port of the Prometheus endpoint [default: 29000].
    #[arg(long)]
    pub prometheus_port: Option<u16>,
    /// Log level (trace, debug, info, warn, error) [default: info].
    #[arg(long)]
    pub log_level: Option<String>,
    /// Log as JSON lines.
    #[arg(long)]
    pub log_json: bool,
    /// berth: cap on sticky pins; 0 = unbounded (oldest idle evicted first) [default: 0].
    #[arg(long)]
    pub max_sticky_keys: Option<usize>,
    /// berth: in-flight requests per key on its worker before re-placement [default: 2].
    #[arg(long)]
    pub sticky_inflight_cap: Option<u32>,
    /// berth: require `Authorization: Bearer <key>` on /workers.
    #[arg(long)]
    pub admin_api_key: Option<String>,
    /// Seconds in-flight requests get to finish after SIGTERM/SIGINT [default: 180].
    #[arg(long)]
    pub shutdown_grace_period_secs: Option<u64>,
    /// Close a client connection that sends no complete request head for this long, idle
    /// keep-alive connections included; 0 disables [default: 30].
    #[arg(long)]
    pub header_read_timeout_secs: Option<u64>,
    /// Seconds a client gets to send its whole request body (counted from the request head);
    /// then 408 request_body_timeout; 0 disables [default: 300].
    #[arg(long)]
    pub request_body_timeout_secs: Option<u64>,
    /// Seconds without a request body byte from the client before 408 request_body_timeout;
    /// 0 disables [default: 30].
    #[arg(long)]
    pub request_body_idle_timeout_secs: Option<u64>,
    /// Generation requests whose responses may be in progress at once; more wait in the queue;
    /// -1 turns admission control off [default: -1].
    #[arg(long, allow_negative_numbers = true)]
    pub max_concurrent_requests: Option<i64>,
    /// Requests that may wait for --max-concurrent-requests or the rate limit; when full, 429
    /// queue_full; 0 answers 429 at once [default: 100].
    #[arg(long)]
    pub queue_size: Option<usize>,
    /// Seconds a request may wait in the queue before 429 queue_timeout [default: 60].
    #[arg(long)]
    pub queue_timeout_secs: Option<u64>,
    /// Requests admitted per second (token bucket bursting up to --max-concurrent-requests)
    /// [default: no rate limit].
    #[arg(long)]
    pub rate_limit_tokens_per_second: Option<f64>,
    /// berth: IO threads serving connections, each with its own runtime [default: one per CPU].
    #[arg(long)]
    pub io_threads: Option<usize>,
    /// berth: share pins with every gateway replica through this Redis, kept across restarts
    /// (redis://HOST:PORT[/DB] or rediss://) [default: none, pins stay in this process].
    #[arg(long)]
    pub sticky_store: Option<String>,
    /// berth: longest a request waits for the sticky store, in ms; then it is served from
    /// local pins [default: 50].
    #[arg(long)]
    pub sticky_store_timeout_ms: Option<u64>,
    /// berth: ms between batched TTL refreshes and write-backs to the sticky store
    /// [default: 5000].
    #[arg(long)]
    pub sticky_store_sync_ms: Option<u64>,
    /// berth: prefix of the sticky store's keys and channel [default: berth].
    #[arg(long)]
    pub sticky_store_prefix: Option<String>,
    /// berth: read flags from this TOML file (same keys as the flags); the command line wins.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Prefill/decode disaggregation: route each request to a prefill worker (`--prefill`) and
    /// a decode worker (`--decode`), each leg pinned on its own.
    #[arg(long)]
    pub pd_disaggregation: bool,
    /// PD mode: a prefill worker URL and its bootstrap port (or `none`); repeat per worker.
    #[arg(long, num_args = 1..=2, value_names = ["URL", "BOOTSTRAP_PORT"], action = clap::ArgAction::Append)]
    pub prefill: Vec<String>,
    /// PD mode: a decode worker URL; repeat per worker.
    #[arg(long, value_name = "URL", action = clap::ArgAction::Append)]
    pub decode: Vec<String>,
    /// PD mode: the prefill leg's policy [default: --policy].
    #[arg(long)]
    pub prefill_policy: Option<String>,
    /// PD mode: the decode leg's policy [default: --policy].
    #[arg(long)]
    pub decode_policy: Option<String>,
    /// Service discovery provider: file (kubernetes is not supported yet) [default: none].
    #[arg(long)]
    pub discovery_provider: Option<String>,
    /// File discovery: the JSON manifest of workers, reread when it changes.
    #[arg(long)]
    pub discovery_file: Option<PathBuf>,
    /// Seconds between full rereads of the discovery manifest [default: 30].
    #[arg(long)]
    pub discovery_check_interval_secs: Option<u64>,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key-path.
    #[arg(long)]
    pub tls_cert_path: Option<PathBuf>,
    /// The private key of --tls-cert-path (PEM).
    #[arg(long)]
    pub tls_key_path: Option<PathBuf>,
    /// CA certificates (PEM) that https:// workers are verified against [default: the Mozilla
    /// roots built in].
    #[arg(long, num_args = 1..)]
    pub ca_cert_paths: Vec<PathBuf>,
    /// Client certificate chain (PEM) presented to https:// workers (mTLS); needs
    /// --client-key-path.
    #[arg(long)]
    pub client_cert_path: Option<PathBuf>,
    /// The private key of --client-cert-path (PEM).
    #[arg(long)]
    pub client_key_path: Option<PathBuf>,
}

impl Args {
    /// Fills every flag not given on the command line from `file`.
    pub fn merged_with(self, file: Args) -> Args {
        fn vec_or(a: Vec<String>, b: Vec<String>) -> Vec<String> {
            if a.is_empty() { b } else { a }
        }
        Args {
            host: self.host.or(file.host),
            port: self.port.or(file.port),
            worker_urls: vec_or(self.worker_urls, file.worker_urls),
            policy: self.policy.or(file.policy),
            routing_key_override: self.routing_key_override || file.routing_key_override,
            routing_key_headers: vec_or(self.routing_key_headers, file.routing_key_headers),
            routing_key_sources: vec_or(self.routing_key_sources, file.routing_key_sources),
            assignment_mode: self.assignment_mode.or(file.assignment_mode),
            max_idle_secs: self.max_idle_secs.or(file.max_idle_secs),
            eviction_interval_secs: self.eviction_interval_secs.or(file.eviction_interval_secs),
            allow_requests_without_routing_key: self.allow_requests_without_routing_key
                || file.allow_requests_without_routing_key,
            cache_threshold: self.cache_threshold.or(file.cache_threshold),
            balance_abs_threshold: self.balance_abs_threshold.or(file.balance_abs_threshold),
            balance_rel_threshold: self.balance_rel_threshold.or(file.balance_rel_threshold),
            max_tree_size: self.max_tree_size.or(file.max_tree_size),
            prefix_index_budget_mb: self.prefix_index_budget_mb.or(file.prefix_index_budget_mb),
            cache_feedback: self.cache_feedback.or(file.cache_feedback),
            ttft_base_ms: self.ttft_base_ms.or(file.ttft_base_ms),
            ttft_prefill_ms_per_1k_tokens: self
                .ttft_prefill_ms_per_1k_tokens
                .or(file.ttft_prefill_ms_per_1k_tokens),
            ttft_decode_ms_per_request: self
                .ttft_decode_ms_per_request
                .or(file.ttft_decode_ms_per_request),
            ttft_chars_per_token: self.ttft_chars_per_token.or(file.ttft_chars_per_token),
            ttft_move_factor: self.ttft_move_factor.or(file.ttft_move_factor),
            ttft_move_margin_ms: self.ttft_move_margin_ms.or(file.ttft_move_margin_ms),
            routing_seed: self.routing_seed.or(file.routing_seed),
            ttft_move_interval_secs: self
                .ttft_move_interval_secs
                .or(file.ttft_move_interval_secs),
            max_payload_size: self.max_payload_size.or(file.max_payload_size),
            buffered_body_budget_mb: self
                .buffered_body_budget_mb
                .or(file.buffered_body_budget_mb),
            request_timeout_secs: self.request_timeout_secs.or(file.request_timeout_secs),
            retry_max_retries: self.retry_max_retries.or(file.retry_max_retries),
            cb_failure_threshold: self.cb_failure_threshold.or(file.cb_failure_threshold),
            cb_success_threshold: self.cb_success_threshold.or(file.cb_success_threshold),
            cb_timeout_duration_secs: self
                .cb_timeout_duration_secs
                .or(file.cb_timeout_duration_secs),
            health_check_interval_secs: self
                .health_check_interval_secs
                .or(file.health_check_interval_secs),
            health_check_timeout_secs: self
                .health_check_timeout_secs
                .or(file.health_check_timeout_secs),
            health_failure_threshold: self
                .health_failure_threshold
                .or(file.health_failure_threshold),
            health_success_threshold: self
                .health_success_threshold
                .or(file.health_success_threshold),
            worker_startup_timeout_secs: self
                .worker_startup_timeout_secs
                .or(file.worker_startup_timeout_secs),
            load_monitor_interval: self.load_monitor_interval.or(file.load_monitor_interval),
            disable_load_monitoring: self.disable_load_monitoring || file.disable_load_monitoring,
            worker_overload_waiting_requests: self
                .worker_overload_waiting_requests
                .or(file.worker_overload_waiting_requests),
            worker_overload_token_usage: self
                .worker_overload_token_usage
                .or(file.worker_overload_token_usage),
            worker_overload_protection: self.worker_overload_protection
                || file.worker_overload_protection,
            disable_worker_overload_protection: self.disable_worker_overload_protection
                || file.disable_worker_overload_protection,
            worker_overload_shed: self.worker_overload_shed || file.worker_overload_shed,
            api_key: self.api_key.or(file.api_key),
            prometheus_host: self.prometheus_host.or(file.prometheus_host),
            prometheus_port: self.prometheus_port.or(file.prometheus_port),
            log_level: self.log_level.or(file.log_level),
            log_json: self.log_json || file.log_json,
            max_sticky_keys: self.max_sticky_keys.or(file.max_sticky_keys),
            sticky_inflight_cap: self.sticky_inflight_cap.or(file.sticky_inflight_cap),
            admin_api_key: self.admin_api_key.or(file.admin_api_key),
            shutdown_grace_period_secs: self
                .shutdown_grace_period_secs
                .or(file.shutdown_grace_period_secs),
            io_threads: self.io_threads.or(file.io_threads),
            header_read_timeout_secs: self
                .header_read_timeout_secs
                .or(file.header_read_timeout_secs),
            sticky_store: self.sticky_store.or(file.sticky_store),
            sticky_store_timeout_ms: self
                .sticky_store_timeout_ms
                .or(file.sticky_store_timeout_ms),
            sticky_store_sync_ms: self.sticky_store_sync_ms.or(file.sticky_store_sync_ms),
            sticky_store_prefix: self.sticky_store_prefix.or(file.sticky_store_prefix),
            request_body_timeout_secs: self
                .request_body_timeout_secs
                .or(file.request_body_timeout_secs),
            request_body_idle_timeout_secs: self
                .request_body_idle_timeout_secs
                .or(file.request_body_idle_timeout_secs),
            max_concurrent_requests: self
                .max_concurrent_requests
                .or(file.max_concurrent_requests),
            queue_size: self.queue_size.or(file.queue_size),
            queue_timeout_secs: self.queue_timeout_secs.or(file.queue_timeout_secs),
            rate_limit_tokens_per_second: self
                .rate_limit_tokens_per_second
                .or(file.rate_limit_tokens_per_second),
            config: self.config,
            pd_disaggregation: self.pd_disaggregation || file.pd_disaggregation,
            prefill: vec_or(self.prefill, file.prefill),
            decode: vec_or(self.decode, file.decode),
            prefill_policy: self.prefill_policy.or(file.prefill_policy),
            decode_policy: self.decode_policy.or(file.decode_policy),
            discovery_provider: self.discovery_provider.or(file.discovery_provider),
            discovery_file: self.discovery_file.or(file.discovery_file),
            discovery_check_interval_secs: self
                .discovery_check_interval_secs
                .or(file.discovery_check_interval_secs),
            tls_cert_path: self.tls_cert_path.or(file.tls_cert_path),
            tls_key_path: self.tls_key_path.or(file.tls_key_path),
            ca_cert_paths: if self.ca_cert_paths.is_empty() {
                file.ca_cert_paths
            } else {
                self.ca_cert_paths
            },
            client_cert_path: self.client_cert_path.or(file.client_cert_path),
            client_key_path: self.client_key_path.or(file.client_key_path),
        }
    }

    /// Reads `--config` (when given) and merges it under the command line.
    pub fn resolve(self) -> Result<Args, GatewayError> {
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| GatewayError::Config(format!("--config {}: {e}", path.display())))?;
        let file: Args = toml::from_str(&text)
            .map_err(|e| GatewayError::Config(format!("--config {}: {e}", path.display())))?;
        Ok(self.merged_with(file))
    }

    /// The effective `--log-level`.
    pub fn log_level(&self) -> &str {
        self.log_level.as_deref().unwrap_or("info")
    }

    /// The `tracing` filter for `--log-level`: `debug` and `trace` apply to berth's own crates
    /// (dependencies stay at `info`, so the `Sticky routing decision` lines are not buried in
    /// connection-pool chatter); any other value, e.g. a full `EnvFilter` directive, as given.
    pub fn log_filter(&self) -> String {
        match self.log_level() {
            l @ ("debug" | "trace") => {
                format!("info,berth={l},berth_gateway={l},berth_routing={l}")
            }
            other => other.to_owned(),
        }
    }

    /// The address `--host`/`--port` name.
    pub fn listen_addr(&self) -> Result<SocketAddr, GatewayError> {
        socket_addr(
            self.host.as_deref().unwrap_or(defaults::HOST),
            self.port.unwrap_or(defaults::PORT),
        )
        .map_err(|e| GatewayError::Config(format!("--host: {e}")))
    }
}

pub(crate) fn socket_addr(host: &str, port: u16) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| format!("{host} resolves to no address"))
}

/// Runs `berth serve` until SIGTERM or SIGINT, then drains in-flight requests.
pub async fn run(args: Args) -> Result<(), GatewayError> {
    let args = args.resolve()?;
    let config = GatewayConfig::from_args(&args)?;
    let listener = tokio::net::TcpListener::bind(args.listen_addr()?)
        .await
        .map_err(|e| GatewayError::Startup(format!("--host/--port: cannot listen: {e}")))?;
    crate::server::serve(listener, config, shutdown_signal()).await
}

/// Resolves on the first SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}
