//! Four simulated workers and a gateway in front of them, all in this process (for a PD row,
//! two in prefill mode and two in decode mode).

use anyhow::Context;
use berth_gateway::{Gateway, GatewayConfig, GatewayHandle};
use berth_sim::{PdMode, SimHandle, SimWorker};
use tokio::net::TcpListener;

use super::scenario::Scenario;
use super::workload::FleetShape;

/// Workers per fleet.
pub(super) const WORKERS: usize = 4;

/// A running fleet.
#[derive(Debug)]
pub(super) struct Fleet {
    workers: Vec<SimHandle>,
    gateway: GatewayHandle,
}

impl Fleet {
    /// Starts the workers, then a gateway configured for `scenario`.
    pub(super) async fn start(scenario: &Scenario, shape: &FleetShape) -> anyhow::Result<Self> {
        let mut workers = Vec::with_capacity(WORKERS);
        for i in 0..WORKERS {
            let listener = TcpListener::bind(("127.0.0.1", 0))
                .await
                .context("binding a sim worker")?;
            // PD: the first half prefill, the second half decode.
            let mode = match (scenario.pd, i < WORKERS / 2) {
                (false, _) => PdMode::Regular,
                (true, true) => PdMode::Prefill,
                (true, false) => PdMode::Decode,
            };
            let worker = SimWorker::builder()
                .kv_capacity_tokens(shape.kv_capacity_tokens)
                .prefill_tokens_per_sec(shape.prefill_tokens_per_sec)
                .cached_token_cost(0.05)
                .decode_step(std::time::Duration::from_millis(12))
                .time_scale(shape.time_scale)
                .max_running(64)
                .record_capacity(0)
                .mode(mode)
                .try_spawn(listener)
                .context("starting a sim worker")?;
            workers.push(worker);
        }
        let urls = workers.iter().map(SimHandle::url);
        let args = if scenario.pd {
            let (prefill, decode) = workers.split_at(WORKERS / 2);
            berth_gateway::cli::Args {
                pd_disaggregation: true,
                prefill: prefill
                    .iter()
                    .map(|w| match w.bootstrap_port() {
                        Some(port) => format!("{} {port}", w.url()),
                        None => w.url(),
                    })
                    .collect(),
                decode: decode.iter().map(SimHandle::url).collect(),
                policy: Some(scenario.policy.to_owned()),
                routing_key_override: scenario.routing_key_override,
                ..Default::default()
            }
        } else {
            berth_gateway::cli::Args {
                worker_urls: urls.collect(),
                policy: Some(scenario.policy.to_owned()),
                routing_key_override: scenario.routing_key_override,
                ..Default::default()
            }
        };
        let mut config = GatewayConfig::from_args(&args).context("gateway configuration")?;
        // The demo reads its figures from the bench, not Prometheus: bind no fixed port.
        config.prometheus_addr = None;
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("binding the gateway")?;
        let gateway = Gateway::builder(config)
            .listener(listener)
            .start()
            .await
            .context("starting the gateway")?;
        Ok(Self { workers, gateway })
    }

    /// The gateway's URL.
    pub(super) fn url(&self) -> String {
        format!("http://{}", self.gateway.addr())
    }

    /// Stops the gateway, then the workers.
    pub(super) async fn stop(self) {
        self.gateway.shutdown().await;
        for worker in self.workers {
            worker.shutdown().await;
        }
    }
}
