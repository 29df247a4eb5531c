//! The shared limiter: the [`Gate`] behind a lock, permits that release themselves, and the
//! wait of a queued request (its timeout, its wake-ups, and leaving the queue when dropped).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::gate::{Arrival, Gate, Ticket};
use super::metrics::AdmissionMetrics;
use super::{AdmissionSettings, Rejection, RejectionKind};

/// Admission control for the generation routes, shared by every IO thread.
#[derive(Debug)]
pub(crate) struct Admission {
    settings: AdmissionSettings,
    inner: Mutex<Inner>,
    /// Told when the queue waits on tokens while a permit is free (no release will wake it).
    tokens: Notify,
    metrics: Arc<AdmissionMetrics>,
}

#[derive(Debug)]
struct Inner {
    gate: Gate,
    /// Where each queued ticket's permit is sent when it is admitted.
    waiting: HashMap<Ticket, oneshot::Sender<Permit>>,
}

/// Held for a request's whole response (streams included); dropping it admits the next.
#[derive(Debug)]
pub(crate) struct Permit {
    admission: Arc<Admission>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.admission.release();
    }
}

/// What [`Admission::arrive`] gives a new request.
#[derive(Debug)]
pub(crate) enum Arrived {
    /// Admitted at once.
    Now(Permit),
    /// In the queue: [`Waiter::wait`] for the permit.
    Queued(Waiter),
}

/// A queued request. Dropping it (its client left) takes it out of the queue.
#[derive(Debug)]
pub(crate) struct Waiter {
    admission: Arc<Admission>,
    ticket: Ticket,
    rx: oneshot::Receiver<Permit>,
    since: Instant,
    done: bool,
}

fn now_std() -> std::time::Instant {
    Instant::now().into_std()
}

impl Admission {
    pub(crate) fn new(settings: AdmissionSettings, metrics: Arc<AdmissionMetrics>) -> Arc<Self> {
        let gate = Gate::new(&settings, now_std());
        Arc::new(Self {
            settings,
            inner: Mutex::new(Inner {
                gate,
                waiting: HashMap::new(),
            }),
            tokens: Notify::new(),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, inner: &Inner) {
        self.metrics
            .set_levels(inner.gate.in_use(), inner.gate.queued());
    }

    /// A new request: admitted, queued, or turned away (429 `queue_full`).
    pub(crate) fn arrive(self: &Arc<Self>) -> Result<Arrived, Rejection> {
        let mut inner = self.lock();
        let arrived = match inner.gate.arrive(now_std()) {
            Arrival::Admit => {
                self.metrics.allowed();
                Ok(Arrived::Now(Permit {
                    admission: self.clone(),
                }))
            }
            Arrival::Queued(ticket) => {
                let (tx, rx) = oneshot::channel();
                inner.waiting.insert(ticket, tx);
                Ok(Arrived::Queued(Waiter {
                    admission: self.clone(),
                    ticket,
                    rx,
                    since: Instant::now(),
                    done: false,
                }))
            }
            Arrival::Full { retry_after } => {
                self.metrics.rejected(RejectionKind::QueueFull);
                Err(self.rejection(RejectionKind::QueueFull, retry_after))
            }
        };
        self.publish(&inner);
        arrived
    }

    fn rejection(&self, kind: RejectionKind, retry_after: Duration) -> Rejection {
        Rejection {
            kind,
            retry_after_secs: retry_after.as_secs_f64().ceil().max(1.0) as u64,
            max_concurrent: self.settings.max_concurrent,
            queue_size: self.settings.queue_size,
            queue_timeout: self.settings.queue_timeout,
            rate: self.settings.rate,
        }
    }

    /// A permit came back: admit whom the gate now lets in.
    fn release(self: &Arc<Self>) {
        let granted = {
            let mut inner = self.lock();
            inner.gate.release();
            let granted = self.admit_queued(&mut inner);
            self.publish(&inner);
            granted
        };
        self.deliver(granted);
    }

    /// Pops every queued ticket the gate admits now; wakes the waiters if the queue is left
    /// waiting on tokens alone.
    fn admit_queued(&self, inner: &mut Inner) -> Vec<oneshot::Sender<Permit>> {
        let now = now_std();
        let mut granted = Vec::new();
        while let Some(ticket) = inner.gate.next_admitted(now) {
            match inner.waiting.remove(&ticket) {
                Some(tx) => granted.push(tx),
                None => inner.gate.release(),
            }
        }
        if inner.gate.starved_of_tokens(now) {
            self.tokens.notify_waiters();
        }
        granted
    }

    /// Sends the permits (outside the lock: a permit whose waiter is gone is dropped here,
    /// which releases it and admits the next).
    fn deliver(self: &Arc<Self>, granted: Vec<oneshot::Sender<Permit>>) {
        for tx in granted {
            let permit = Permit {
                admission: self.clone(),
            };
            if let Err(unwanted) = tx.send(permit) {
                drop(unwanted);
            }
        }
    }
}

impl Waiter {
    /// Waits for the permit, at most `--queue-timeout-secs` from arrival. Cancel-safe: if this
    /// future is dropped, dropping the waiter leaves the queue (or releases a permit granted
    /// meanwhile).
    pub(crate) async fn wait(&mut self) -> Result<Permit, Rejection> {
        let adm = self.admission.clone();
        let deadline = self.since + adm.settings.queue_timeout;
        loop {
            // Registered before the look at the gate, so a wake-up in between is not lost.
            let tokens_changed = adm.tokens.notified();
            let token_wait = adm.lock().gate.token_wait(self.ticket, now_std());
            tokio::select! {
                permit = &mut self.rx => {
                    self.done = true;
                    return match permit {
                        Ok(p) => {
                            adm.metrics.admitted_after(self.since.elapsed());
                            Ok(p)
                        }
                        // The sender is only dropped with the limiter itself.
                        Err(_) => Err(adm.rejection(RejectionKind::QueueTimeout, Duration::ZERO)),
                    };
                }
                _ = tokio::time::sleep_until(deadline) => {
                    let left = {
                        let mut inner = adm.lock();
                        let left = inner.gate.leave(self.ticket);
                        if left {
                            inner.waiting.remove(&self.ticket);
                        }
                        adm.publish(&inner);
                        (left, inner.gate.retry_after(now_std()))
                    };
                    if let (true, retry_after) = left {
                        self.done = true;
                        adm.metrics.rejected(RejectionKind::QueueTimeout);
                        return Err(adm.rejection(RejectionKind::QueueTimeout, retry_after));
                    }
                    // Admitted as the timeout fired: the permit is on its way.
                }
                _ = tokio::time::sleep(token_wait.unwrap_or_default()), if token_wait.is_some() => {
                    let granted = {
                        let mut inner = adm.lock();
                        let granted = adm.admit_queued(&mut inner);
                        adm.publish(&inner);
                        granted
                    };
                    adm.deliver(granted);
                }
                _ = tokens_changed => {}
            }
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let adm = &self.admission;
        let mut inner = adm.lock();
        if inner.gate.leave(self.ticket) {
            inner.waiting.remove(&self.ticket);
            adm.metrics.left();
        }
        // Otherwise it was admitted: the permit, sent or in flight, is dropped with the
        // channel and releases itself.
        adm.publish(&inner);
    }
}
