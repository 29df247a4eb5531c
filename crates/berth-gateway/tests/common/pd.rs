//! A prefill/decode fleet of sim workers on loopback and a PD gateway config in front of it.

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_gateway::{GatewayConfig, PdSettings, PrefillUrl};
use berth_sim::{PdMode, SimHandle, SimWorker};

pub struct Fleet {
    pub prefill: Vec<SimHandle>,
    pub decode: Vec<SimHandle>,
}

/// `prefill` sim workers in prefill mode (`p0`, `p1`, ...) and `decode` in decode mode (`d0`, ...).
pub async fn fleet(prefill: usize, decode: usize) -> Fleet {
    let mut f = Fleet {
        prefill: Vec::new(),
        decode: Vec::new(),
    };
    for i in 0..prefill {
        f.prefill.push(
            SimWorker::builder()
                .worker_id(format!("p{i}"))
                .mode(PdMode::Prefill)
                .time_scale(0.0)
                .spawn_on_loopback()
                .await,
        );
    }
    for i in 0..decode {
        f.decode.push(
            SimWorker::builder()
                .worker_id(format!("d{i}"))
                .mode(PdMode::Decode)
                .bootstrap_timeout(Duration::from_secs(5))
                .time_scale(0.0)
                .spawn_on_loopback()
                .await,
        );
    }
    f
}

/// A PD gateway config: decode workers in the regular pool, prefill workers with their
/// bootstrap ports, `policy` on both legs.
pub fn pd_config(f: &Fleet, policy: PolicyKind) -> GatewayConfig {
    let mut c = super::config(&f.decode);
    c.router.policy = policy;
    c.pd = Some(PdSettings {
        prefill: f
            .prefill
            .iter()
            .map(|p| PrefillUrl {
                url: p.url(),
                bootstrap_port: p.bootstrap_port(),
            })
            .collect(),
        prefill_policy: policy,
    });
    c
}
