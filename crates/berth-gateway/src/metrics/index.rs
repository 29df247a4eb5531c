//! The routing core's prefix index as metrics (`cache_aware`, `ttft_aware`, `agentic`),
//! refreshed when scraped: `berth_prefix_index_bytes`, `berth_prefix_index_chunks` and
//! `berth_prefix_index_evicted_chunks_total{reason}`; and `agentic`'s session ledger:
//! `berth_agentic_sessions` and `berth_agentic_sessions_dropped_total`.

use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::ReasonLabels;
use crate::routing::policy::{IndexEviction, IndexStats, LedgerStats};

#[derive(Debug, Default)]
pub(crate) struct IndexMetrics {
    bytes: Gauge,
    chunks: Gauge,
    evicted: Family<ReasonLabels, Counter>,
    /// Totals already counted (the core reports totals since start).
    seen: Mutex<[u64; 4]>,
    sessions: Gauge,
    dropped: Counter,
    dropped_seen: Mutex<u64>,
}

impl IndexMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "berth_prefix_index_bytes",
            "cache_aware, ttft_aware: bytes held by the prefix index (bounded by \
             --prefix-index-budget-mb)",
            m.bytes.clone(),
        );
        registry.register(
            "berth_prefix_index_chunks",
            "cache_aware, ttft_aware: prompt chunks held by the prefix index, over all models and \
             workers",
            m.chunks.clone(),
        );
        registry.register(
            "berth_prefix_index_evicted_chunks",
            "cache_aware, ttft_aware: prompt chunks evicted from the prefix index, by reason \
             (budget, tenant_bound, worker_removed, reported)",
            m.evicted.clone(),
        );
        registry.register(
            "berth_agentic_sessions",
            "agentic: live sessions in the session ledger (their last prompt sizes are the \
             workers' KV working sets; bounded at 65536)",
            m.sessions.clone(),
        );
        registry.register(
            "berth_agentic_sessions_dropped",
            "agentic: sessions dropped from the full session ledger (least recently used first)",
            m.dropped.clone(),
        );
        for r in IndexEviction::ALL {
            let _ = m
                .evicted
                .get_or_create(&ReasonLabels { reason: r.as_str() });
        }
        m
    }

    /// Sets the ledger figures (summed over PD legs).
    pub(crate) fn update_ledger<'a>(&self, stats: impl Iterator<Item = &'a LedgerStats>) {
        let (mut sessions, mut dropped) = (0usize, 0u64);
        for s in stats {
            sessions += s.sessions;
            dropped += s.dropped_full;
        }
        self.sessions
            .set(i64::try_from(sessions).unwrap_or(i64::MAX));
        let mut seen = self.dropped_seen.lock().unwrap_or_else(|p| p.into_inner());
        self.dropped.inc_by(dropped.saturating_sub(*seen));
        *seen = dropped.max(*seen);
    }

    /// Sets the figures from the routers' indexes (summed over PD legs).
    pub(crate) fn update<'a>(&self, stats: impl Iterator<Item = &'a IndexStats>) {
        let mut total = IndexStats::default();
        for s in stats {
            total.bytes += s.bytes;
            total.chunks += s.chunks;
            for (t, e) in total.evicted_chunks.iter_mut().zip(s.evicted_chunks) {
                *t += e;
            }
        }
        self.bytes
            .set(i64::try_from(total.bytes).unwrap_or(i64::MAX));
        self.chunks
            .set(i64::try_from(total.chunks).unwrap_or(i64::MAX));
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for ((r, now), last) in IndexEviction::ALL
            .iter()
            .zip(total.evicted_chunks)
            .zip(seen.iter_mut())
        {
            let counter = self
                .evicted
                .get_or_create(&ReasonLabels { reason: r.as_str() });
            counter.inc_by(now.saturating_sub(*last));
            *last = now.max(*last);
        }
    }
}
