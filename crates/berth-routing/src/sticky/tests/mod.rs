//! The pinned path, one SPEC.md section 2 sentence at a time: shared fixtures here, one
//! file per rule family.

use std::sync::Arc;
use std::time::Duration;

mod agentic;
mod agentic_children;
mod agentic_life;
mod agentic_load;
mod agentic_reports;
mod config;
mod counters;
mod eviction;
mod failover;
mod model;
mod modes;
mod overload;
mod properties;
mod reuse;
mod spec;
mod threshold;
mod ttft;

use crate::key::HeaderList;
use crate::{
    AssignmentMode, Branch, Decision, Error, KeySource, Leg, PolicyKind, Rng, RouteRequest, Router,
    RouterOptions, WorkerEntry, WorkerId, WorkerSnapshot, WorkerStats,
};

pub(super) const T0: Duration = Duration::from_secs(1);
pub(super) const NO_HEADERS: HeaderList<'static> = HeaderList(&[]);

/// A fleet of `n` workers serving "m"; `down` are unavailable. Stats survive rebuilds.
pub(super) struct Fleet {
    pub(super) stats: Vec<Arc<WorkerStats>>,
    pub(super) models: Vec<Vec<&'static str>>,
}

impl Fleet {
    pub(super) fn new(n: usize) -> Self {
        Self {
            stats: (0..n).map(|_| Arc::default()).collect(),
            models: vec![vec!["m"]; n],
        }
    }
    /// `n` workers whose KV holds `tokens` tokens each.
    pub(super) fn with_kv(n: usize, tokens: u64) -> Self {
        let f = Self::new(n);
        for s in &f.stats {
            s.set_kv_capacity_tokens(tokens);
        }
        f
    }
    pub(super) fn snap(&self, down: &[u32]) -> WorkerSnapshot {
        self.snap_of(&(0..self.stats.len() as u32).collect::<Vec<_>>(), down)
    }
    /// Only the workers in `present` are in the fleet.
    pub(super) fn snap_of(&self, present: &[u32], down: &[u32]) -> WorkerSnapshot {
        WorkerSnapshot::new(
            present
                .iter()
                .map(|&i| WorkerEntry {
                    id: WorkerId(i),
                    url: format!("http://w{i}:8000").into(),
                    models: self.models[i as usize]
                        .iter()
                        .map(|m| Arc::from(*m))
                        .collect(),
                    available: !down.contains(&i),
                    stats: self.stats[i as usize].clone(),
                })
                .collect(),
        )
    }
}

pub(super) fn router(
    policy: PolicyKind,
    override_on: bool,
    mode: Option<AssignmentMode>,
) -> Router {
    Router::new(&RouterOptions {
        policy,
        routing_key_override: override_on,
        assignment_mode: mode,
        ..RouterOptions::default()
    })
    .unwrap()
}

pub(super) fn manual() -> Router {
    router(PolicyKind::Manual, false, None)
}

pub(super) fn sticky_rr() -> Router {
    // the override on round_robin: delegate placements are easy to predict
    router(PolicyKind::RoundRobin, true, None)
}

pub(crate) fn keyed<'a>(headers: &'a HeaderList<'a>) -> RouteRequest<'a> {
    RouteRequest {
        rid: None,
        headers,
        body: None,
        model: Some("m"),
        leg: Leg::Regular,
        text: None,
        tokens: None,
        prefix: None,
        exclude: &[],
        stream: None,
        loads: None,
        feedback_read: false,
    }
}

pub(super) fn route_key(r: &Router, snap: &WorkerSnapshot, key: &str, rng: &mut Rng) -> Decision {
    let pairs = [("x-smg-routing-key", key.as_bytes())];
    let h = HeaderList(&pairs);
    r.route(&keyed(&h), snap, T0, rng).unwrap()
}

pub(super) fn route_rid(
    r: &Router,
    snap: &WorkerSnapshot,
    rid: &str,
    model: &str,
    rng: &mut Rng,
) -> Decision {
    let req = RouteRequest {
        rid: Some(rid),
        model: Some(model),
        ..keyed(&NO_HEADERS)
    };
    r.route(&req, snap, T0, rng).unwrap()
}
