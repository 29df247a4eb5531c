//! `berth sim-worker`: flags, validation, and running one worker until Ctrl-C or an exit fault.

use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{DEFAULT_MODEL, SimConfig};
use crate::faults::Faults;
use crate::latency::LatencyModel;
use crate::state::Stop;
use crate::{SimError, SimWorker};

/// Flags of `berth sim-worker`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one and logs it).
    #[arg(long, default_value_t = 30000)]
    pub port: u16,
    /// Worker id sent in `x-sim-worker-id` (default `sim-<port>`).
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Model served; repeat for several. Requests for another model get 404.
    #[arg(long = "model", default_value = DEFAULT_MODEL)]
    pub models: Vec<String>,
    /// KV cache capacity in tokens (16-token blocks).
    #[arg(long, default_value_t = 262_144)]
    pub kv_capacity_tokens: u64,
    /// Uncached prompt tokens prefilled per second; prefill is serialized per worker.
    #[arg(long, default_value_t = 10_000.0)]
    pub prefill_tokens_per_sec: f64,
    /// Cost of a cached prompt token relative to an uncached one.
    #[arg(long, default_value_t = 0.05)]
    pub cached_token_cost: f64,
    /// Decode step time with a batch of one, in milliseconds.
    #[arg(long, default_value_t = 10.0)]
    pub decode_step_ms: f64,
    /// Added to each decode step per request in the batch, in milliseconds.
    #[arg(long, default_value_t = 0.1)]
    pub decode_step_per_running_ms: f64,
    /// Multiplies every delay; 0 makes the worker instant.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Requests running at once; the rest queue.
    #[arg(long, default_value_t = 64)]
    pub max_running: usize,
    /// Longest prompt plus generation a request may ask for; longer requests get 400.
    #[arg(long, default_value_t = 131_072)]
    pub context_length: u64,
    /// Tokens generated when a request sets no `max_tokens`.
    #[arg(long, default_value_t = 32)]
    pub default_max_tokens: u32,
    /// Received requests remembered for `GET /sim/requests` (0 disables).
    #[arg(long, default_value_t = 1024)]
    pub record_capacity: usize,
    /// Fault: fraction of inference requests answered with `--error-status`.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Fault: HTTP status of injected errors.
    #[arg(long, default_value_t = 500)]
    pub error_status: u16,
    /// Fault: hold inference requests before their first byte (until cleared by `POST /sim/faults`).
    #[arg(long)]
    pub hang: bool,
    /// Fault: fixed extra delay before the first byte, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub first_byte_delay_ms: u64,
    /// Fault: multiplies every simulated delay.
    #[arg(long, default_value_t = 1.0)]
    pub slowdown: f64,
    /// Fault: abort responses after this many body chunks.
    #[arg(long)]
    pub drop_after_chunks: Option<u32>,
    /// Fault: health endpoints answer 503.
    #[arg(long)]
    pub fail_health: bool,
    /// Fault: the process exits after receiving this many inference requests.
    #[arg(long)]
    pub exit_after_requests: Option<u64>,
    /// Fault (llama-server's habit): a connection that carried a streamed response is dead
    /// afterwards, without `Connection: close`; the next request on it is dropped unanswered.
    #[arg(long)]
    pub close_after_stream: bool,
    /// Role in a prefill/decode pair: regular, prefill (opens a bootstrap listener) or decode
    /// (waits for each request's room on `bootstrap_host:bootstrap_port`).
    #[arg(long, default_value = "regular")]
    pub mode: String,
    /// Prefill mode: the bootstrap listener's port, on `--host` [default: a free one, logged].
    #[arg(long)]
    pub bootstrap_port: Option<u16>,
    /// Decode mode: how long a request waits for its room's KV cache before it fails (real
    /// milliseconds, not scaled by `--time-scale`).
    #[arg(long, default_value_t = 30_000)]
    pub bootstrap_timeout_ms: u64,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key-path.
    #[arg(long)]
    pub tls_cert_path: Option<std::path::PathBuf>,
    /// The private key of --tls-cert-path (PEM).
    #[arg(long)]
    pub tls_key_path: Option<std::path::PathBuf>,
    /// With TLS, require client certificates signed by these CAs (PEM): mTLS.
    #[arg(long)]
    pub tls_client_ca_path: Option<std::path::PathBuf>,
}

fn millis(flag: &'static str, ms: f64) -> Result<Duration, SimError> {
    Duration::try_from_secs_f64(ms / 1e3).map_err(|_| SimError::InvalidConfig {
        flag,
        reason: "must be a finite number >= 0".into(),
    })
}

fn read_pem(flag: &'static str, path: &std::path::Path) -> Result<String, SimError> {
    std::fs::read_to_string(path).map_err(|e| SimError::InvalidConfig {
        flag,
        reason: format!("{}: {e}", path.display()),
    })
}

impl Args {
    /// `--tls-cert-path`/`--tls-key-path`/`--tls-client-ca-path`, read.
    fn tls_pem(&self) -> Result<Option<crate::TlsPem>, SimError> {
        let missing = |flag: &'static str, needs: &str| SimError::InvalidConfig {
            flag,
            reason: format!("needs --{needs}"),
        };
        match (&self.tls_cert_path, &self.tls_key_path) {
            (None, None) if self.tls_client_ca_path.is_some() => {
                Err(missing("tls-client-ca-path", "tls-cert-path"))
            }
            (None, None) => Ok(None),
            (Some(_), None) => Err(missing("tls-cert-path", "tls-key-path")),
            (None, Some(_)) => Err(missing("tls-key-path", "tls-cert-path")),
            (Some(cert), Some(key)) => Ok(Some(crate::TlsPem {
                cert_chain_pem: read_pem("tls-cert-path", cert)?,
                key_pem: read_pem("tls-key-path", key)?,
                client_ca_pem: self
                    .tls_client_ca_path
                    .as_deref()
                    .map(|p| read_pem("tls-client-ca-path", p))
                    .transpose()?,
            })),
        }
    }

    /// The validated configuration these flags describe.
    pub fn to_config(&self) -> Result<SimConfig, SimError> {
        let config = SimConfig {
            worker_id: self.worker_id.clone(),
            models: self.models.clone(),
            kv_capacity_tokens: self.kv_capacity_tokens,
            latency: LatencyModel {
                time_scale: self.time_scale,
                prefill_tokens_per_sec: self.prefill_tokens_per_sec,
                cached_token_cost: self.cached_token_cost,
                decode_step: millis("decode-step-ms", self.decode_step_ms)?,
                decode_step_per_running: millis(
                    "decode-step-per-running-ms",
                    self.decode_step_per_running_ms,
                )?,
            },
            max_running: self.max_running,
            context_length: self.context_length,
            default_max_tokens: self.default_max_tokens,
            record_capacity: self.record_capacity,
            faults: Faults {
                error_rate: self.error_rate,
                error_status: self.error_status,
                hang: self.hang,
                first_byte_delay_ms: self.first_byte_delay_ms,
                slowdown: self.slowdown,
                drop_after_chunks: self.drop_after_chunks,
                fail_health: self.fail_health,
                exit_after_requests: self.exit_after_requests,
                close_after_stream: self.close_after_stream,
            },
            mode: self
                .mode
                .parse()
                .map_err(|reason| SimError::InvalidConfig {
                    flag: "mode",
                    reason,
                })?,
            bootstrap_port: self.bootstrap_port,
            bootstrap_timeout: Duration::from_millis(self.bootstrap_timeout_ms),
            tls: self.tls_pem()?,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Runs the worker until Ctrl-C (`Ok`) or an injected exit fault (`Err(ExitFault)`).
pub async fn run(args: Args) -> Result<(), SimError> {
    let config = args.to_config()?;
    let listener = TcpListener::bind((args.host.as_str(), args.port)).await?;
    let handle = SimWorker::builder().config(config).try_spawn(listener)?;
    tracing::info!(
        url = %handle.url(),
        worker_id = handle.worker_id(),
        mode = args.mode.as_str(),
        bootstrap_port = ?handle.bootstrap_port(),
        "sim worker listening"
    );
    let mut stop = handle.stop_watch();
    let exited = tokio::select! {
        _ = tokio::signal::ctrl_c() => false,
        _ = async { drop(stop.wait_for(|s| *s == Stop::Exit).await) } => true,
    };
    if exited {
        handle.join().await;
        return Err(SimError::ExitFault);
    }
    tracing::info!("interrupted, shutting down");
    handle.shutdown().await;
    Ok(())
}
