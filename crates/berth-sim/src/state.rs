//! The state one worker's handle and request handlers share. Owned by the worker instance (an
//! `Arc`), never global, so any number of workers run in one process.

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::SimConfig;
use crate::engine::Engine;
use crate::faults::FaultState;
use crate::pd::RoomBoard;
use crate::record::Recorder;
use crate::stats::{Counters, SimStats};

/// Why the server loop stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Keep serving.
    Run,
    /// Stop: asked by the handle.
    Shutdown,
    /// Die: an injected `exit` fault.
    Exit,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) worker_id: String,
    pub(crate) config: SimConfig,
    pub(crate) engine: Arc<Engine>,
    pub(crate) faults: FaultState,
    pub(crate) counters: Counters,
    pub(crate) recorder: Recorder,
    pub(crate) stop: watch::Sender<Stop>,
    pub(crate) started_unix: u64,
    /// Prefill mode: rooms whose KV cache is ready for their decode worker.
    pub(crate) rooms: RoomBoard,
}

impl Shared {
    pub(crate) fn new(worker_id: String, config: SimConfig) -> Self {
        let engine = Arc::new(Engine::new(
            config.latency.clone(),
            config.kv_capacity_tokens,
            config.max_running,
        ));
        Self {
            worker_id,
            faults: FaultState::new(config.faults.clone()),
            recorder: Recorder::new(config.record_capacity),
            engine,
            counters: Counters::default(),
            stop: watch::Sender::new(Stop::Run),
            started_unix: unix_now(),
            rooms: RoomBoard::default(),
            config,
        }
    }

    /// Whether `model` is served here.
    pub(crate) fn serves(&self, model: &str) -> bool {
        self.config.models.iter().any(|m| m == model)
    }

    /// The default model (the first configured).
    pub(crate) fn default_model(&self) -> &str {
        self.config
            .models
            .first()
            .map_or(crate::config::DEFAULT_MODEL, String::as_str)
    }

    pub(crate) fn stats(&self) -> SimStats {
        let c = &self.counters;
        let (kv_used, kv_capacity) = self.engine.kv_tokens();
        SimStats {
            requests: Counters::get(&c.requests),
            completed: Counters::get(&c.completed),
            errors_injected: Counters::get(&c.errors_injected),
            unknown_model: Counters::get(&c.unknown_model),
            prompt_tokens: Counters::get(&c.prompt_tokens),
            cached_tokens: Counters::get(&c.cached_tokens),
            completion_tokens: Counters::get(&c.completion_tokens),
            running: self.engine.running() as u64,
            queued: self.engine.queued() as u64,
            kv_used_tokens: kv_used,
            kv_in_use_tokens: self.engine.kv_in_use_tokens(),
            kv_capacity_tokens: kv_capacity,
        }
    }

    /// Makes the worker die: every connection is cut and the listener closes.
    pub(crate) fn exit(&self) {
        self.stop.send_replace(Stop::Exit);
    }
}

/// Seconds since the Unix epoch (for `created` fields).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
