//! One process-wide budget for the bytes held in buffered request bodies
//! (`--buffered-body-budget-mb`).
//!
//! A body that routing must read is held whole until its request is done (a retry re-sends
//! it), so concurrent large uploads could otherwise grow the process without bound and end it,
//! and every local pin with it. Each buffered body reserves its bytes before they are read: its
//! `Content-Length` at once when it has one, else frame by frame. A reservation that does not
//! fit waits up to [`WAIT`] for other bodies to be released, then the request gets 503
//! `body_budget_exhausted` with `Retry-After`; a body larger than the whole budget gets 413
//! `payload_too_large` at once. The reservation travels with the bytes (the `Bytes` own it),
//! so it is released exactly when the last copy of the body is freed. Streamed bodies do not
//! take from the budget: they are never held whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::Notify;

use crate::error::GatewayError;

/// The `reason` label of the rejection counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// How long a body waits for room before its request is refused.
pub(crate) const WAIT: Duration = Duration::from_secs(1);

/// `berth_buffered_body_bytes` and `berth_body_budget_rejected_total`.
#[derive(Debug, Default)]
pub(crate) struct BodyBudgetMetrics {
    held: Gauge,
    limit: Gauge,
    rejected: Family<ReasonLabels, Counter>,
}

impl BodyBudgetMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "berth_buffered_body_bytes",
            "Bytes reserved by buffered request bodies (bounded by --buffered-body-budget-mb)",
            m.held.clone(),
        );
        registry.register(
            "berth_buffered_body_budget_bytes",
            "The buffered-body budget (--buffered-body-budget-mb) in bytes",
            m.limit.clone(),
        );
        registry.register(
            "berth_body_budget_rejected",
            "Requests refused for the buffered-body budget, by reason (exhausted: 503 after \
             waiting; over_budget: 413, the body alone exceeds the budget)",
            m.rejected.clone(),
        );
        for reason in ["exhausted", "over_budget"] {
            let _ = m.rejected.get_or_create(&ReasonLabels { reason });
        }
        m
    }
}

/// The budget.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    limit: usize,
    used: AtomicUsize,
    freed: Notify,
    metrics: Arc<BodyBudgetMetrics>,
}

/// Bytes reserved for one body; released on drop.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<BodyBudget>,
    bytes: usize,
}

impl BodyBudget {
    pub(crate) fn new(limit: usize, metrics: Arc<BodyBudgetMetrics>) -> Arc<Self> {
        metrics.limit.set(i64::try_from(limit).unwrap_or(i64::MAX));
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
            freed: Notify::new(),
            metrics,
        })
    }

    /// Bytes reserved now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|t| *t <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, n: usize) {
        if n > 0 {
            let left = self.used.fetch_sub(n, Ordering::AcqRel) - n;
            self.metrics
                .held
                .set(i64::try_from(left).unwrap_or(i64::MAX));
            self.freed.notify_waiters();
        }
    }

    /// An empty reservation, to grow as a body is read.
    pub(crate) fn empty(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: 0,
        }
    }

    fn over_budget(&self) -> GatewayError {
        self.metrics
            .rejected
            .get_or_create(&ReasonLabels {
                reason: "over_budget",
            })
            .inc();
        GatewayError::BodyOverBudget(self.limit)
    }
}

impl Reservation {
    /// Grows the reservation to `total` bytes, waiting until `deadline` for room: 413 when
    /// `total` exceeds the whole budget, 503 `body_budget_exhausted` when no room came in time.
    pub(crate) async fn grow_to(
        &mut self,
        total: usize,
        deadline: tokio::time::Instant,
    ) -> Result<(), GatewayError> {
        let Some(more) = total.checked_sub(self.bytes).filter(|m| *m > 0) else {
            return Ok(());
        };
        let b = &self.budget;
        if total > b.limit {
            return Err(b.over_budget());
        }
        loop {
            // registered before the check, so a release in between is not missed
            let freed = b.freed.notified();
            if b.try_take(more) {
                self.bytes = total;
                b.metrics
                    .held
                    .set(i64::try_from(b.used()).unwrap_or(i64::MAX));
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                b.metrics
                    .rejected
                    .get_or_create(&ReasonLabels {
                        reason: "exhausted",
                    })
                    .inc();
                return Err(GatewayError::BodyBudgetExhausted);
            }
        }
    }

    /// Bytes reserved.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// `data` owning this reservation: it is released when the last copy of `data` is freed.
    pub(crate) fn attach(self, data: Bytes) -> Bytes {
        if self.bytes == 0 {
            return data;
        }
        Bytes::from_owner(Owned { data, _r: self })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(std::mem::take(&mut self.bytes));
    }
}

/// A body's bytes and their reservation.
struct Owned {
    data: Bytes,
    _r: Reservation,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: usize) -> Arc<BodyBudget> {
        BodyBudget::new(limit, Arc::default())
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + WAIT
    }

    #[tokio::test(start_paused = true)]
    async fn reservations_wait_for_room_then_give_up() {
        let b = budget(100);
        let mut a = b.empty();
        a.grow_to(60, soon()).await.unwrap();
        assert_eq!(b.used(), 60);
        // 60 + 50 > 100: waits, and gets room when the first body is freed
        let b2 = b.clone();
        let waiter = tokio::spawn(async move {
            let mut r = b2.empty();
            r.grow_to(50, soon()).await.map(|()| r)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let data = a.attach(Bytes::from(vec![7u8; 60]));
        let copy = data.clone();
        drop(data);
        assert_eq!(b.used(), 60, "a copy still holds the body");
        drop(copy);
        let r = waiter.await.unwrap().unwrap();
        assert_eq!((b.used(), r.bytes()), (50, 50));
        // nothing is freed within the wait: 503
        let mut c = b.empty();
        let err = c.grow_to(60, soon()).await.unwrap_err();
        assert!(matches!(err, GatewayError::BodyBudgetExhausted));
        assert_eq!(b.used(), 50);
        // larger than the whole budget: 413 at once
        let err = b.empty().grow_to(101, soon()).await.unwrap_err();
        assert!(matches!(err, GatewayError::BodyOverBudget(100)));
        drop(r);
        assert_eq!(b.used(), 0);
    }
}
