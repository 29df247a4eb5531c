//! The simulated engine: admission, prefill, decode, and the KV cache they share.
//!
//! A request becomes a [`Job`]: it waits for one of `max_running` slots (the rest queue, FIFO),
//! looks its prompt up in the KV cache, prefills in a lane serialized per worker, then decodes one
//! token per step while every other running request decodes alongside (a continuous batch whose
//! step time grows with its size). Time to first token is therefore queue wait plus uncached
//! prefill, and a hot worker gets slower.
//!
//! As in SGLang and vLLM, the prefix is matched again when the job's prefill starts (a job that
//! waited behind another with the same prefix reuses what that one just computed), and the
//! prompt's blocks enter the cache as soon as its prefill completes, pinned while the job runs.
//! Finishing adds the output's blocks; a job dropped early (client gone) only unpins what it
//! used.
//!
//! Delays use `tokio::time`, so tests can pause the clock; at time scale 0 no timer is touched.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::SimError;
use crate::kv::{BLOCK_TOKENS, KvCache, block_hashes};
use crate::latency::LatencyModel;
use crate::tokenize::Token;

/// One worker's engine state.
#[derive(Debug)]
pub(crate) struct Engine {
    latency: LatencyModel,
    kv: Mutex<KvCache>,
    slots: Arc<Semaphore>,
    prefill_lane: tokio::sync::Mutex<()>,
    queued: AtomicUsize,
    running: AtomicUsize,
    decoding: AtomicUsize,
    queued_tokens: AtomicU64,
    /// Prompt tokens of running requests beyond their cached prefix (the KV they allocate).
    running_new_tokens: AtomicU64,
}

impl Engine {
    pub(crate) fn new(latency: LatencyModel, kv_capacity_tokens: u64, max_running: usize) -> Self {
        Self {
            latency,
            kv: Mutex::new(KvCache::new(kv_capacity_tokens)),
            slots: Arc::new(Semaphore::new(max_running)),
            prefill_lane: tokio::sync::Mutex::new(()),
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            decoding: AtomicUsize::new(0),
            queued_tokens: AtomicU64::new(0),
            running_new_tokens: AtomicU64::new(0),
        }
    }

    /// Requests waiting for a running slot.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Requests holding a running slot.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// KV blocks held and the cache's capacity, in tokens.
    pub(crate) fn kv_tokens(&self) -> (u64, u64) {
        let kv = self.lock_kv();
        (
            (kv.used_blocks() * BLOCK_TOKENS) as u64,
            (kv.capacity_blocks() * BLOCK_TOKENS) as u64,
        )
    }

    /// KV tokens running requests use, as SGLang counts them for `token_usage`: the cached blocks
    /// they have pinned plus the uncached part of their prompts, at most the capacity. Cached
    /// blocks nobody uses are evictable and do not count.
    pub(crate) fn kv_in_use_tokens(&self) -> u64 {
        let (pinned, capacity) = {
            let kv = self.lock_kv();
            (kv.pinned_blocks(), kv.capacity_blocks())
        };
        let pinned = (pinned * BLOCK_TOKENS) as u64;
        let new = self.running_new_tokens.load(Ordering::Relaxed);
        (pinned + new).min((capacity * BLOCK_TOKENS) as u64)
    }

    /// Prompt tokens of queued requests.
    pub(crate) fn queued_tokens(&self) -> u64 {
        self.queued_tokens.load(Ordering::Relaxed)
    }

    /// Drops every KV block not used by a running request; returns how many.
    pub(crate) fn flush_cache(&self) -> usize {
        self.lock_kv().flush()
    }

    fn lock_kv(&self) -> MutexGuard<'_, KvCache> {
        // A panic while holding the lock leaves a consistent cache (every operation is a few map
        // updates), so a poisoned lock is still usable.
        self.kv
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for a running slot, then looks the prompt up in the cache.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        model: &str,
        prompt: Vec<Token>,
    ) -> Result<Job, SimError> {
        let start = Instant::now();
        let permit = {
            let _queued = CountGuard::new(&self.queued);
            let _tokens = TokenGuard::new(&self.queued_tokens, prompt.len() as u64);
            self.slots
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| SimError::EngineStopped)?
        };
        let queue_wait = start.elapsed();
        self.running.fetch_add(1, Ordering::Relaxed);
        let hashes = block_hashes(model, &prompt);
        // At least one prompt token is always computed, as in real engines.
        let max_blocks = prompt.len().saturating_sub(1) / BLOCK_TOKENS;
        let matched = self.lock_kv().acquire(&hashes, max_blocks);
        let new_tokens = prompt.len().saturating_sub(matched * BLOCK_TOKENS) as u64;
        self.running_new_tokens
            .fetch_add(new_tokens, Ordering::Relaxed);
        Ok(Job {
            engine: Arc::clone(self),
            model: model.to_owned(),
            prompt,
            hashes,
            matched,
            pinned: matched,
            new_tokens,
            queue_wait,
            prefill_time: Duration::ZERO,
            decoding: false,
            finished: false,
            _permit: permit,
        })
    }
}

/// Increments a counter for its lifetime (so a cancelled wait still decrements).
struct CountGuard<'a>(&'a AtomicUsize);

impl<'a> CountGuard<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for CountGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Adds tokens to a gauge for its lifetime.
struct TokenGuard<'a>(&'a AtomicU64, u64);

impl<'a> TokenGuard<'a> {
    fn new(gauge: &'a AtomicU64, n: u64) -> Self {
        gauge.fetch_add(n, Ordering::Relaxed);
        Self(gauge, n)
    }
}

impl Drop for TokenGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}

/// A request holding a running slot.
#[derive(Debug)]
pub(crate) struct Job {
    engine: Arc<Engine>,
    model: String,
    prompt: Vec<Token>,
    hashes: Vec<u64>,
    /// Blocks of the prompt found cached (what the job reports as cached tokens).
    matched: usize,
    /// Leading blocks of `hashes` this job holds pinned: the matched prefix, then, once
    /// prefilled, the whole prompt.
    pinned: usize,
    /// Prompt tokens past the cached prefix, counted in `Engine::running_new_tokens`.
    new_tokens: u64,
    queue_wait: Duration,
    prefill_time: Duration,
    decoding: bool,
    finished: bool,
    _permit: OwnedSemaphorePermit,
}

impl Job {
    /// Prompt tokens.
    pub(crate) fn prompt_tokens(&self) -> u64 {
        self.prompt.len() as u64
    }

    /// Prompt tokens found in the KV cache (whole blocks).
    pub(crate) fn cached_tokens(&self) -> u64 {
        (self.matched * BLOCK_TOKENS) as u64
    }

    /// The prompt's tokens.
    pub(crate) fn prompt(&self) -> &[Token] {
        &self.prompt
    }

    /// Time spent waiting for a running slot.
    pub(crate) fn queue_wait(&self) -> Duration {
        self.queue_wait
    }

    /// Time spent prefilling (including waiting for the prefill lane).
    pub(crate) fn prefill_time(&self) -> Duration {
        self.prefill_time
    }

    /// Prefills the uncached part of the prompt, serialized with every other prefill: the prefix
    /// is matched again once the lane is free, and the prompt is cached when its prefill ends.
    pub(crate) async fn prefill(&mut self, slowdown: f64) {
        if self.engine.latency.is_instant() {
            self.rematch();
            self.cache_prompt();
        } else {
            let start = Instant::now();
            let engine = Arc::clone(&self.engine);
            let lane = engine.prefill_lane.lock().await;
            self.rematch();
            let cached = self.cached_tokens();
            let uncached = self.prompt_tokens() - cached;
            let delay = self.engine.latency.prefill(uncached, cached, slowdown);
            tokio::time::sleep(delay).await;
            // Before the lane is free: the next job in it sees this prompt cached.
            self.cache_prompt();
            drop(lane);
            self.prefill_time = start.elapsed();
        }
        self.engine.decoding.fetch_add(1, Ordering::Relaxed);
        self.decoding = true;
    }

    /// Matches the prompt again (blocks another job cached while this one queued count as
    /// cached, as a real engine's scheduler matches when it schedules the prefill).
    fn rematch(&mut self) {
        let max_blocks = self.prompt.len().saturating_sub(1) / BLOCK_TOKENS;
        let mut kv = self.engine.lock_kv();
        let now = kv.acquire(&self.hashes, max_blocks);
        // Pinned blocks cannot be evicted, so `now >= self.pinned` always holds.
        kv.release(&self.hashes, self.pinned);
        drop(kv);
        let gained = now.saturating_sub(self.matched);
        let fewer = (gained * BLOCK_TOKENS) as u64;
        let fewer = fewer.min(self.new_tokens);
        self.engine
            .running_new_tokens
            .fetch_sub(fewer, Ordering::Relaxed);
        self.new_tokens -= fewer;
        self.matched = self.matched.max(now);
        self.pinned = now;
    }

    /// Inserts the prompt's blocks into the cache and pins them while the job runs; its new
    /// tokens are then counted as pinned blocks instead of `running_new_tokens`.
    fn cache_prompt(&mut self) {
        let mut kv = self.engine.lock_kv();
        kv.insert(&self.hashes);
        let held = kv.acquire(&self.hashes, self.hashes.len());
        kv.release(&self.hashes, self.pinned);
        drop(kv);
        self.pinned = held;
        // What did not become a pinned block (a partial last block, or blocks a full cache could
        // not hold) stays counted as the job's own.
        let outside =
            (self.prompt.len().saturating_sub(held * BLOCK_TOKENS) as u64).min(self.new_tokens);
        self.engine
            .running_new_tokens
            .fetch_sub(self.new_tokens - outside, Ordering::Relaxed);
        self.new_tokens = outside;
    }

    /// Waits one decode step of the current batch.
    /// Starts decoding without a prefill (a decode worker that received the KV cache).
    pub(crate) fn skip_prefill(&mut self) {
        self.engine.decoding.fetch_add(1, Ordering::Relaxed);
        self.decoding = true;
    }

    pub(crate) async fn decode_step(&self, slowdown: f64) {
        let batch = self.engine.decoding.load(Ordering::Relaxed);
        let delay = self.engine.latency.decode_step(batch, slowdown);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }

    /// Completes the request: its output blocks enter the cache after its prompt's.
    pub(crate) fn finish(mut self, output: &[Token]) {
        let mut full = std::mem::take(&mut self.prompt);
        full.extend_from_slice(output);
        let full_hashes = block_hashes(&self.model, &full);
        let mut kv = self.engine.lock_kv();
        kv.insert(&full_hashes);
        kv.release(&self.hashes, self.pinned);
        drop(kv);
        self.finished = true;
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.finished {
            self.engine.lock_kv().release(&self.hashes, self.pinned);
        }
        if self.decoding {
            self.engine.decoding.fetch_sub(1, Ordering::Relaxed);
        }
        self.engine.running.fetch_sub(1, Ordering::Relaxed);
        self.engine
            .running_new_tokens
            .fetch_sub(self.new_tokens, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
