//! The registry's settings (part of [`crate::GatewayConfig`], validated there).

use std::time::Duration;

/// Per-worker circuit breaker settings.
#[derive(Clone, Debug)]
pub struct BreakerSettings {
    /// Consecutive failures that open the breaker (`--cb-failure-threshold`).
    pub failure_threshold: u32,
    /// Successes in half-open that close it again (`--cb-success-threshold`).
    pub success_threshold: u32,
    /// How long it stays open before a half-open trial (`--cb-timeout-duration-secs`).
    pub open_timeout: Duration,
}

/// Active health-check settings.
#[derive(Clone, Debug)]
pub struct HealthSettings {
    /// Time between probes of each worker (`--health-check-interval-secs`).
    pub interval: Duration,
    /// Timeout of one probe (`--health-check-timeout-secs`).
    pub timeout: Duration,
    /// Consecutive failed probes that take a worker out (`--health-failure-threshold`).
    pub failure_threshold: u32,
    /// Consecutive good probes that bring it back (`--health-success-threshold`).
    pub success_threshold: u32,
}

/// The load monitor (SMG 1.13's load monitoring).
#[derive(Clone, Debug)]
pub struct LoadMonitorSettings {
    /// Time between polls of every worker's `GET /v1/loads` (`--load-monitor-interval`).
    pub interval: Duration,
    /// Poll even when nothing routes on the loads (only the `berth_worker_waiting_requests`
    /// and `berth_worker_token_usage` gauges read them); off with `--disable-load-monitoring`.
    pub always: bool,
}

impl LoadMonitorSettings {
    /// Whether the monitor runs: always by default, else only when routing reads the loads
    /// (`overload`: worker overload protection is on; `policy_reads`: the policy uses them).
    pub fn runs(&self, overload: bool, policy_reads: bool) -> bool {
        self.always || overload || policy_reads
    }
}
