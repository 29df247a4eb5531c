//! The flags onto the typed configuration: [`GatewayConfig::from_args`] parses every
//! string-valued flag into the core's closed enums and domain types once, then validates.

use std::time::Duration;

use super::{Args, socket_addr};
use crate::config::{GatewayConfig, Secret, defaults};
use crate::discovery::DiscoverySettings;
use crate::error::GatewayError;
use crate::pd::{PdSettings, PrefillUrl};
use crate::routing::policy::FeedbackMode;
use crate::routing::{AssignmentMode, PolicyKind};
use crate::store::StoreSettings;
use crate::tls::TlsSettings;

impl GatewayConfig {
    /// Validated configuration from the flags (after [`Args::resolve`]).
    pub fn from_args(args: &Args) -> Result<GatewayConfig, GatewayError> {
        let mut c = GatewayConfig::new(args.worker_urls.clone());
        let r = &mut c.router;
        if let Some(p) = &args.policy {
            r.policy = p
                .parse::<PolicyKind>()
                .map_err(|e| GatewayError::Config(format!("--policy: {e}")))?;
        }
        r.routing_key_override = args.routing_key_override;
        if !args.routing_key_headers.is_empty() {
            r.routing_key_headers = args.routing_key_headers.clone();
        }
        if !args.routing_key_sources.is_empty() {
            r.routing_key_sources = args.routing_key_sources.clone();
        }
        if let Some(m) = &args.assignment_mode {
            r.assignment_mode = Some(
                m.parse::<AssignmentMode>()
                    .map_err(|e| GatewayError::Config(format!("--assignment-mode: {e}")))?,
            );
        }
        set(&mut r.max_idle_secs, args.max_idle_secs);
        set(&mut r.eviction_interval_secs, args.eviction_interval_secs);
        r.allow_requests_without_routing_key = args.allow_requests_without_routing_key;
        set(&mut r.cache_threshold, args.cache_threshold);
        set(&mut r.balance_abs_threshold, args.balance_abs_threshold);
        set(&mut r.balance_rel_threshold, args.balance_rel_threshold);
        set(&mut r.max_tree_size, args.max_tree_size);
        set(&mut r.prefix_index_budget_mb, args.prefix_index_budget_mb);
        if let Some(m) = &args.cache_feedback {
            r.cache_feedback = m
                .parse::<FeedbackMode>()
                .map_err(|e| GatewayError::Config(e.to_string()))?;
        }
        set(
            &mut r.overload.waiting_requests,
            args.worker_overload_waiting_requests,
        );
        set(
            &mut r.overload.token_usage,
            args.worker_overload_token_usage,
        );
        r.overload.enabled = !args.disable_worker_overload_protection;
        r.overload.shed = args.worker_overload_shed;
        set(&mut r.max_sticky_keys, args.max_sticky_keys);
        set(&mut r.sticky_inflight_cap, args.sticky_inflight_cap);
        let t = &mut r.ttft;
        set(&mut t.prior.base_ms, args.ttft_base_ms);
        set(
            &mut t.prior.per_token_ms,
            args.ttft_prefill_ms_per_1k_tokens.map(|v| v / 1000.0),
        );
        set(&mut t.prior.per_decode_ms, args.ttft_decode_ms_per_request);
        set(&mut t.chars_per_token, args.ttft_chars_per_token);
        set(&mut t.move_factor, args.ttft_move_factor);
        set(&mut t.move_margin_ms, args.ttft_move_margin_ms);
        set(&mut t.move_interval_secs, args.ttft_move_interval_secs);
        c.routing_seed = args.routing_seed;
        set(&mut c.max_payload_size, args.max_payload_size);
        set(&mut c.buffered_body_budget_mb, args.buffered_body_budget_mb);
        set(
            &mut c.request_timeout,
            args.request_timeout_secs.map(Duration::from_secs),
        );
        set(&mut c.retry_max_retries, args.retry_max_retries);
        set(&mut c.breaker.failure_threshold, args.cb_failure_threshold);
        set(&mut c.breaker.success_threshold, args.cb_success_threshold);
        set(
            &mut c.breaker.open_timeout,
            args.cb_timeout_duration_secs.map(Duration::from_secs),
        );
        set(
            &mut c.health.interval,
            args.health_check_interval_secs.map(Duration::from_secs),
        );
        set(
            &mut c.health.timeout,
            args.health_check_timeout_secs.map(Duration::from_secs),
        );
        set(
            &mut c.health.failure_threshold,
            args.health_failure_threshold,
        );
        set(
            &mut c.health.success_threshold,
            args.health_success_threshold,
        );
        set(
            &mut c.load_monitor.interval,
            args.load_monitor_interval.map(Duration::from_secs),
        );
        c.load_monitor.always = !args.disable_load_monitoring;
        set(
            &mut c.worker_startup_timeout,
            args.worker_startup_timeout_secs.map(Duration::from_secs),
        );
        set(
            &mut c.shutdown_grace,
            args.shutdown_grace_period_secs.map(Duration::from_secs),
        );
        c.io_threads = args.io_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        if let Some(secs) = args.header_read_timeout_secs {
            c.header_read_timeout = (secs > 0).then(|| Duration::from_secs(secs));
        }
        c.sticky_store = store_settings(args)?;
        c.discovery = discovery_settings(args)?;
        c.tls = TlsSettings {
            cert_path: args.tls_cert_path.clone(),
            key_path: args.tls_key_path.clone(),
            ca_cert_paths: args.ca_cert_paths.clone(),
            client_cert_path: args.client_cert_path.clone(),
            client_key_path: args.client_key_path.clone(),
        };
        if let Some(secs) = args.request_body_timeout_secs {
            c.body_timeouts.total = (secs > 0).then(|| Duration::from_secs(secs));
        }
        if let Some(secs) = args.request_body_idle_timeout_secs {
            c.body_timeouts.idle = (secs > 0).then(|| Duration::from_secs(secs));
        }
        if let Some(n) = args.max_concurrent_requests {
            // SMG's convention: -1 (any value below 1) turns the limit off.
            c.admission.max_concurrent = (n > 0).then(|| u32::try_from(n).unwrap_or(u32::MAX));
        }
        set(&mut c.admission.queue_size, args.queue_size);
        set(
            &mut c.admission.queue_timeout,
            args.queue_timeout_secs.map(Duration::from_secs),
        );
        if args.rate_limit_tokens_per_second.is_some() {
            c.admission.rate = args.rate_limit_tokens_per_second;
        }
        c.api_key = args.api_key.clone().map(Secret);
        c.admin_api_key = args.admin_api_key.clone().map(Secret);
        let ipv6 = args.host.as_deref().is_some_and(|h| h.contains(':'));
        let prom_host = args.prometheus_host.as_deref().unwrap_or(if ipv6 {
            "::"
        } else {
            defaults::PROMETHEUS_HOST
        });
        let prom_port = args.prometheus_port.unwrap_or(defaults::PROMETHEUS_PORT);
        c.prometheus_addr = Some(
            socket_addr(prom_host, prom_port)
                .map_err(|e| GatewayError::Config(format!("--prometheus-host: {e}")))?,
        );
        c.pd = pd_settings(args, &mut c)?;
        c.validate()?;
        Ok(c)
    }
}

/// `--pd-disaggregation` and its flags: the decode workers become the regular pool (with the
/// decode policy), the prefill workers the second. PD flags without `--pd-disaggregation`, and
/// `--worker-urls` with it, are refused.
fn pd_settings(args: &Args, c: &mut GatewayConfig) -> Result<Option<PdSettings>, GatewayError> {
    let bad = |msg: &str| Err(GatewayError::Config(msg.to_owned()));
    if !args.pd_disaggregation {
        let stray = [
            ("--prefill", !args.prefill.is_empty()),
            ("--decode", !args.decode.is_empty()),
            ("--prefill-policy", args.prefill_policy.is_some()),
            ("--decode-policy", args.decode_policy.is_some()),
        ];
        return match stray.iter().find(|(_, given)| *given) {
            Some((flag, _)) => bad(&format!("{flag}: needs --pd-disaggregation")),
            None => Ok(None),
        };
    }
    if !args.worker_urls.is_empty() {
        return bad(
            "--worker-urls: not used with --pd-disaggregation (give --prefill and --decode)",
        );
    }
    let policy = |flag: &str, value: &Option<String>| -> Result<PolicyKind, GatewayError> {
        match value {
            Some(p) => p
                .parse::<PolicyKind>()
                .map_err(|e| GatewayError::Config(format!("{flag}: {e}"))),
            None => Ok(c.router.policy),
        }
    };
    let prefill_policy = policy("--prefill-policy", &args.prefill_policy)?;
    let decode_policy = policy("--decode-policy", &args.decode_policy)?;
    let prefill = PrefillUrl::parse_all(&args.prefill)
        .map_err(|e| GatewayError::Config(format!("--prefill: {e}")))?;
    c.worker_urls = args.decode.clone();
    c.router.policy = decode_policy;
    Ok(Some(PdSettings {
        prefill,
        prefill_policy,
    }))
}

/// `--sticky-store*`; the tuning flags without `--sticky-store` are refused (they would do
/// nothing).
fn store_settings(args: &Args) -> Result<Option<StoreSettings>, GatewayError> {
    let Some(url) = &args.sticky_store else {
        let stray = [
            (
                "--sticky-store-timeout-ms",
                args.sticky_store_timeout_ms.is_some(),
            ),
            (
                "--sticky-store-sync-ms",
                args.sticky_store_sync_ms.is_some(),
            ),
            ("--sticky-store-prefix", args.sticky_store_prefix.is_some()),
        ];
        return match stray.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(GatewayError::Config(format!(
                "{flag}: needs --sticky-store"
            ))),
            None => Ok(None),
        };
    };
    let mut s = StoreSettings::new(url.clone());
    set(
        &mut s.timeout,
        args.sticky_store_timeout_ms.map(Duration::from_millis),
    );
    set(
        &mut s.sync_every,
        args.sticky_store_sync_ms.map(Duration::from_millis),
    );
    set(&mut s.prefix, args.sticky_store_prefix.clone());
    Ok(Some(s))
}

/// `--discovery-*`: a provider needs its own flags, and those flags need a provider.
fn discovery_settings(args: &Args) -> Result<Option<DiscoverySettings>, GatewayError> {
    let bad = |m: &str| Err(GatewayError::Config(m.to_owned()));
    let mut settings = match args.discovery_provider.as_deref() {
        None => {
            if args.discovery_file.is_some() {
                return bad("--discovery-file: needs --discovery-provider file");
            }
            if args.discovery_check_interval_secs.is_some() {
                return bad("--discovery-check-interval-secs: needs --discovery-provider");
            }
            return Ok(None);
        }
        Some("file") => match &args.discovery_file {
            Some(path) => DiscoverySettings::file(path.clone()),
            None => return bad("--discovery-provider file: needs --discovery-file PATH"),
        },
        Some("kubernetes" | "k8s") => {
            return bad(
                "--discovery-provider: kubernetes discovery is not supported yet (use file, \
                 e.g. a manifest kept up to date by a sidecar)",
            );
        }
        Some(other) => {
            return Err(GatewayError::Config(format!(
                "--discovery-provider: unknown provider `{other}` (expected file)"
            )));
        }
    };
    if let Some(secs) = args.discovery_check_interval_secs {
        settings.check_interval = Duration::from_secs(secs);
    }
    Ok(Some(settings))
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}
