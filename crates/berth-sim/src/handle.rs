//! `SimHandle`: a running worker's address, controls, counters and lifetime.
//!
//! Dropping the handle stops the worker. `join` waits for it and re-raises a panic from any of
//! its request handlers, so a bug in the harness fails the test that hit it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::faults::Faults;
use crate::record::RequestRecord;
use crate::state::{Shared, Stop};
use crate::stats::{Counters, SimStats};

/// A running simulated worker.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
    bootstrap: Option<SocketAddr>,
}

impl SimHandle {
    pub(crate) fn new(
        addr: SocketAddr,
        shared: Arc<Shared>,
        task: JoinHandle<()>,
        bootstrap: Option<SocketAddr>,
    ) -> Self {
        Self {
            addr,
            shared,
            task: Some(task),
            bootstrap,
        }
    }

    /// A prefill worker's bootstrap listener port (what `--prefill URL PORT` names); `None`
    /// for other modes.
    pub fn bootstrap_port(&self) -> Option<u16> {
        self.bootstrap.map(|a| a.port())
    }

    /// Rooms this prefill worker finished that no decode worker has taken yet.
    pub fn pending_rooms(&self) -> usize {
        self.shared.rooms.pending()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT` (`https://` when serving TLS), as a gateway would register it.
    pub fn url(&self) -> String {
        let scheme = if self.shared.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The worker id sent in `x-sim-worker-id`.
    pub fn worker_id(&self) -> &str {
        &self.shared.worker_id
    }

    /// The current faults.
    pub fn faults(&self) -> Faults {
        self.shared.faults.get()
    }

    /// Replaces every fault at once (`Faults::default()` clears them).
    pub fn set_faults(&self, faults: Faults) {
        self.shared.faults.set(faults);
    }

    /// Clears every fault.
    pub fn clear_faults(&self) {
        self.set_faults(Faults::default());
    }

    /// Answers this fraction of inference requests (0..=1) with `status`.
    pub fn set_error_rate(&self, rate: f64, status: u16) {
        self.shared.faults.modify(|f| {
            f.error_rate = rate.clamp(0.0, 1.0);
            f.error_status = status;
        });
    }

    /// Holds inference requests before their first byte until set back to `false`.
    pub fn set_hang(&self, hang: bool) {
        self.shared.faults.modify(|f| f.hang = hang);
    }

    /// Multiplies every simulated delay (1 = normal).
    pub fn set_slowdown(&self, factor: f64) {
        self.shared.faults.modify(|f| f.slowdown = factor.max(0.0));
    }

    /// Delays the first byte of inference responses by this much wall-clock time (not scaled).
    pub fn set_first_byte_delay(&self, delay: std::time::Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.shared.faults.modify(|f| f.first_byte_delay_ms = ms);
    }

    /// Aborts responses after this many body chunks (`None`: never).
    pub fn set_drop_after_chunks(&self, chunks: Option<u32>) {
        self.shared.faults.modify(|f| f.drop_after_chunks = chunks);
    }

    /// Makes every connection that carried a streamed response dead afterwards (the next request
    /// on it is dropped unanswered), as llama-server does.
    pub fn set_close_after_stream(&self, on: bool) {
        self.shared.faults.modify(|f| f.close_after_stream = on);
    }

    /// Connections cut by the close-after-stream fault.
    pub fn stale_connections_cut(&self) -> u64 {
        Counters::get(&self.shared.counters.stale_cut)
    }

    /// Makes `/health` and `/health_generate` answer 503.
    pub fn set_health_failing(&self, failing: bool) {
        self.shared.faults.modify(|f| f.fail_health = failing);
    }

    /// Kills the worker as if its process died: the listener closes and every connection is cut.
    pub fn kill(&self) {
        self.shared.exit();
    }

    /// Whether the worker died from [`SimHandle::kill`] or an injected exit fault.
    pub fn exited(&self) -> bool {
        *self.shared.stop.borrow() == Stop::Exit
    }

    pub(crate) fn stop_watch(&self) -> tokio::sync::watch::Receiver<Stop> {
        self.shared.stop.subscribe()
    }

    /// Inference requests received.
    pub fn requests(&self) -> u64 {
        Counters::get(&self.shared.counters.requests)
    }

    /// Prompt tokens of admitted generation requests.
    pub fn prompt_tokens(&self) -> u64 {
        Counters::get(&self.shared.counters.prompt_tokens)
    }

    /// Prompt tokens found in the KV cache.
    pub fn cached_tokens(&self) -> u64 {
        Counters::get(&self.shared.counters.cached_tokens)
    }

    /// Tokens generated.
    pub fn completion_tokens(&self) -> u64 {
        Counters::get(&self.shared.counters.completion_tokens)
    }

    /// Every counter and gauge at once.
    pub fn stats(&self) -> SimStats {
        self.shared.stats()
    }

    /// The inference requests received, oldest first (bounded by the record capacity).
    pub fn received(&self) -> Vec<RequestRecord> {
        self.shared.recorder.snapshot()
    }

    /// Forgets the received requests.
    pub fn clear_received(&self) {
        self.shared.recorder.clear();
    }

    /// Stops the worker (cutting open connections) and waits for it; re-raises handler panics.
    pub async fn shutdown(mut self) {
        self.shared.stop.send_if_modified(|s| {
            if *s == Stop::Run {
                *s = Stop::Shutdown;
                true
            } else {
                false
            }
        });
        self.wait().await;
    }

    /// Waits until the worker stops (by [`SimHandle::shutdown`], [`SimHandle::kill`] or an exit
    /// fault); re-raises a panic from any of its request handlers.
    pub async fn join(mut self) {
        self.wait().await;
    }

    async fn wait(&mut self) {
        if let Some(task) = self.task.take()
            && let Err(err) = task.await
            && err.is_panic()
        {
            std::panic::resume_unwind(err.into_panic());
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.shared.stop.send_if_modified(|s| {
                let run = *s == Stop::Run;
                if run {
                    *s = Stop::Shutdown;
                }
                run
            });
        }
    }
}

#[cfg(test)]
mod tests;
