//! The worker's configuration, validated once before the worker starts.

use crate::SimError;
use crate::faults::Faults;
use crate::latency::LatencyModel;
use crate::pd::PdMode;

/// Model name served when none is configured.
pub const DEFAULT_MODEL: &str = "sim-model";

/// Everything a simulated worker is started with.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Identity reported in `x-sim-worker-id` and in JSON; `None` means `sim-<port>`.
    pub worker_id: Option<String>,
    /// Models served; requests naming another model get 404. The first is the default.
    pub models: Vec<String>,
    /// KV cache capacity in tokens (rounded down to 16-token blocks).
    pub kv_capacity_tokens: u64,
    /// Timing of prefill and decode.
    pub latency: LatencyModel,
    /// Requests running at once; the rest queue.
    pub max_running: usize,
    /// Longest prompt plus generation a request may ask for; longer requests get 400, as an
    /// engine refuses them (this also bounds the work one request can cause).
    pub context_length: u64,
    /// Tokens generated when a request sets no `max_tokens` (or alias).
    pub default_max_tokens: u32,
    /// Inference requests remembered for inspection (0 disables recording).
    pub record_capacity: usize,
    /// Faults injected from the start.
    pub faults: Faults,
    /// The worker's role in a prefill/decode pair (`--mode`).
    pub mode: PdMode,
    /// Prefill mode: the bootstrap listener's port (`--bootstrap-port`); `None` picks a free one.
    pub bootstrap_port: Option<u16>,
    /// Decode mode: how long a request waits for its room's KV cache before it fails
    /// (`--bootstrap-timeout-ms`; real time, not scaled).
    pub bootstrap_timeout: std::time::Duration,
    /// Serve HTTPS with this identity (`--tls-cert-path`/`--tls-key-path`); `None`: plain HTTP.
    pub tls: Option<crate::tls::TlsPem>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            worker_id: None,
            models: vec![DEFAULT_MODEL.to_owned()],
            kv_capacity_tokens: 262_144,
            latency: LatencyModel::default(),
            max_running: 64,
            context_length: 131_072,
            default_max_tokens: 32,
            record_capacity: 1024,
            faults: Faults::default(),
            mode: PdMode::Regular,
            bootstrap_port: None,
            bootstrap_timeout: std::time::Duration::from_secs(30),
            tls: None,
        }
    }
}

fn invalid(flag: &'static str, reason: &str) -> SimError {
    SimError::InvalidConfig {
        flag,
        reason: reason.to_owned(),
    }
}

impl SimConfig {
    /// Refuses values the worker cannot run with; the error names the flag.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.models.is_empty() || self.models.iter().any(String::is_empty) {
            return Err(invalid(
                "model",
                "at least one non-empty model name is required",
            ));
        }
        if self
            .worker_id
            .as_deref()
            .is_some_and(|id| http::HeaderValue::from_str(id).is_err())
        {
            return Err(invalid(
                "worker-id",
                "must be printable ASCII (it is sent as a header)",
            ));
        }
        if self.kv_capacity_tokens < crate::kv::BLOCK_TOKENS as u64 {
            return Err(invalid(
                "kv-capacity-tokens",
                "must hold at least one 16-token block",
            ));
        }
        let l = &self.latency;
        if !(l.time_scale.is_finite() && l.time_scale >= 0.0) {
            return Err(invalid("time-scale", "must be a finite factor >= 0"));
        }
        if !(l.prefill_tokens_per_sec.is_finite() && l.prefill_tokens_per_sec > 0.0) {
            return Err(invalid("prefill-tokens-per-sec", "must be > 0"));
        }
        if !(0.0..=1.0).contains(&l.cached_token_cost) {
            return Err(invalid("cached-token-cost", "must be between 0 and 1"));
        }
        if self.context_length == 0 {
            return Err(invalid("context-length", "must be at least 1"));
        }
        if self.max_running == 0 {
            return Err(invalid("max-running", "must be at least 1"));
        }
        if self.max_running > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(invalid("max-running", "too large"));
        }
        if self.mode != PdMode::Prefill && self.bootstrap_port.is_some() {
            return Err(invalid("bootstrap-port", "needs --mode prefill"));
        }
        if self.mode == PdMode::Decode && self.bootstrap_timeout.is_zero() {
            return Err(invalid("bootstrap-timeout-ms", "must be at least 1"));
        }
        self.faults.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_flag() {
        assert!(SimConfig::default().validate().is_ok());
        let bad = SimConfig {
            max_running: 0,
            ..SimConfig::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("--max-running")
        );
        let bad = SimConfig {
            models: vec![],
            ..SimConfig::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("--model"));
        let mut bad = SimConfig::default();
        bad.latency.time_scale = -1.0;
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("--time-scale")
        );
    }
}
