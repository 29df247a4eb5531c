//! The admission decision, without IO: how many requests hold a permit, the rate bucket, and
//! the FIFO queue of waiting requests. Time is an argument, so every rule is tested without
//! sleeping; [`super::limiter`] wraps it with a lock, wake-ups and timeouts.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::AdmissionSettings;

/// A queued request's place in line.
pub(crate) type Ticket = u64;

/// What [`Gate::arrive`] decided for a new request.
#[derive(Debug, PartialEq)]
pub(crate) enum Arrival {
    /// Admitted now: the caller holds a permit until [`Gate::release`].
    Admit,
    /// Waiting in the queue under this ticket.
    Queued(Ticket),
    /// Turned away: no permit and no room in the queue.
    Full {
        /// When a retry may succeed (the `Retry-After` header).
        retry_after: Duration,
    },
}

/// The rate bucket (`--rate-limit-tokens-per-second`): refills at `rate` per second up to
/// `capacity`; each admission takes one token.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.last = now;
    }

    /// Time until `n` tokens are there (zero if they are).
    fn time_for(&self, n: f64) -> Duration {
        let missing = n - self.tokens;
        if missing <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(missing / self.rate)
        }
    }
}

/// Permits in use, tokens, and the queue.
#[derive(Debug)]
pub(crate) struct Gate {
    max: Option<u32>,
    in_use: u32,
    bucket: Option<Bucket>,
    queue: VecDeque<Ticket>,
    queue_size: usize,
    next_ticket: Ticket,
}

impl Gate {
    /// A gate with these settings, its bucket full at `now`.
    pub(crate) fn new(settings: &AdmissionSettings, now: Instant) -> Self {
        let bucket = settings.rate.map(|rate| {
            let capacity = settings.burst();
            Bucket {
                rate,
                capacity,
                tokens: capacity,
                last: now,
            }
        });
        Self {
            max: settings.max_concurrent,
            in_use: 0,
            bucket,
            queue: VecDeque::new(),
            queue_size: settings.queue_size,
            next_ticket: 0,
        }
    }

    /// A permit and a token are free now.
    fn room(&mut self, now: Instant) -> bool {
        if self.max.is_some_and(|max| self.in_use >= max) {
            return false;
        }
        match &mut self.bucket {
            Some(b) => {
                b.refill(now);
                b.tokens >= 1.0
            }
            None => true,
        }
    }

    fn take(&mut self) {
        self.in_use += 1;
        if let Some(b) = &mut self.bucket {
            b.tokens -= 1.0;
        }
    }

    /// A new request: admitted if there is room and nobody waits ahead of it, else queued if
    /// the queue has room, else turned away.
    pub(crate) fn arrive(&mut self, now: Instant) -> Arrival {
        if self.queue.is_empty() && self.room(now) {
            self.take();
            return Arrival::Admit;
        }
        if self.queue.len() < self.queue_size {
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            self.queue.push_back(ticket);
            return Arrival::Queued(ticket);
        }
        Arrival::Full {
            retry_after: self.retry_after(now),
        }
    }

    /// A permit came back (its response ended, however it ended).
    pub(crate) fn release(&mut self) {
        self.in_use = self.in_use.saturating_sub(1);
    }

    /// The next queued request that can be admitted now, which then holds a permit.
    pub(crate) fn next_admitted(&mut self, now: Instant) -> Option<Ticket> {
        if self.queue.is_empty() || !self.room(now) {
            return None;
        }
        let ticket = self.queue.pop_front()?;
        self.take();
        Some(ticket)
    }

    /// Takes `ticket` out of the queue (it timed out, or its client left); false if it is no
    /// longer there (it was admitted meanwhile).
    pub(crate) fn leave(&mut self, ticket: Ticket) -> bool {
        match self.queue.iter().position(|t| *t == ticket) {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }

    /// How long `ticket` waits for tokens alone (a permit is free, the bucket holds fewer
    /// tokens than the queue up to and including it needs): a timer must then wake it, as no
    /// release will. `None` while permits are the bound (a release wakes the queue), without a
    /// bucket, or once `ticket` is not queued.
    pub(crate) fn token_wait(&mut self, ticket: Ticket, now: Instant) -> Option<Duration> {
        if self.max.is_some_and(|max| self.in_use >= max) {
            return None;
        }
        let place = self.queue.iter().position(|t| *t == ticket)?;
        let b = self.bucket.as_mut()?;
        b.refill(now);
        Some(b.time_for(place as f64 + 1.0))
    }

    /// The queue waits for tokens while a permit is free (see [`Gate::token_wait`]).
    pub(crate) fn starved_of_tokens(&mut self, now: Instant) -> bool {
        match self.queue.front() {
            Some(&head) => self.token_wait(head, now).is_some_and(|d| !d.is_zero()),
            None => false,
        }
    }

    /// The `Retry-After` a turned-away request gets: with a rate bucket, the time until the
    /// tokens for everyone queued and this request are there; otherwise one second (the
    /// release of a permit cannot be predicted).
    pub(crate) fn retry_after(&mut self, now: Instant) -> Duration {
        let queued = self.queue.len() as f64;
        let by_rate = match &mut self.bucket {
            Some(b) => {
                b.refill(now);
                b.time_for(queued + 1.0)
            }
            None => Duration::ZERO,
        };
        by_rate.max(Duration::from_secs(1))
    }

    /// Requests waiting.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Permits held.
    pub(crate) fn in_use(&self) -> u32 {
        self.in_use
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(max: Option<u32>, queue: usize, rate: Option<f64>) -> AdmissionSettings {
        AdmissionSettings {
            max_concurrent: max,
            queue_size: queue,
            queue_timeout: Duration::from_secs(60),
            rate,
        }
    }

    #[test]
    fn admits_up_to_the_bound_then_queues_then_turns_away() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(2), 1, None), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert_eq!(g.arrive(t0), Arrival::Queued(0));
        assert_eq!(
            g.arrive(t0),
            Arrival::Full {
                retry_after: Duration::from_secs(1)
            }
        );
        assert_eq!((g.in_use(), g.queued()), (2, 1));
    }

    #[test]
    fn queue_size_zero_turns_away_at_once() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(1), 0, None), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert!(matches!(g.arrive(t0), Arrival::Full { .. }));
    }

    #[test]
    fn a_release_admits_the_queue_in_order() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(1), 5, None), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert_eq!(g.arrive(t0), Arrival::Queued(0));
        assert_eq!(g.arrive(t0), Arrival::Queued(1));
        assert_eq!(g.next_admitted(t0), None, "no permit is free yet");
        g.release();
        assert_eq!(g.next_admitted(t0), Some(0));
        assert_eq!(g.next_admitted(t0), None);
        g.release();
        assert_eq!(g.next_admitted(t0), Some(1));
        assert_eq!((g.in_use(), g.queued()), (1, 0));
    }

    #[test]
    fn a_newcomer_does_not_overtake_the_queue() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(1), 5, None), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert_eq!(g.arrive(t0), Arrival::Queued(0));
        g.release();
        // A permit is free, but ticket 0 waits ahead: the newcomer queues behind it.
        assert_eq!(g.arrive(t0), Arrival::Queued(1));
        assert_eq!(g.next_admitted(t0), Some(0));
    }

    #[test]
    fn leaving_frees_the_place_and_is_false_once_admitted() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(1), 1, None), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert_eq!(g.arrive(t0), Arrival::Queued(0));
        assert!(g.leave(0));
        assert_eq!(g.queued(), 0);
        assert_eq!(g.arrive(t0), Arrival::Queued(1));
        g.release();
        assert_eq!(g.next_admitted(t0), Some(1));
        assert!(
            !g.leave(1),
            "admitted: the caller must release the permit instead"
        );
    }

    #[test]
    fn the_bucket_bursts_to_the_bound_then_refills_at_the_rate() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(4), 10, Some(2.0)), t0);
        for _ in 0..4 {
            assert_eq!(g.arrive(t0), Arrival::Admit);
            g.release();
        }
        // Permits are free, tokens are not: queued, and a timer must wake the queue.
        assert_eq!(g.arrive(t0), Arrival::Queued(0));
        assert_eq!(g.arrive(t0), Arrival::Queued(1));
        assert_eq!(g.token_wait(0, t0), Some(Duration::from_millis(500)));
        assert_eq!(g.token_wait(1, t0), Some(Duration::from_secs(1)));
        assert!(g.starved_of_tokens(t0));
        assert_eq!(g.next_admitted(t0 + Duration::from_millis(400)), None);
        assert_eq!(g.next_admitted(t0 + Duration::from_millis(500)), Some(0));
        assert_eq!(g.token_wait(0, t0 + Duration::from_millis(500)), None);
        assert_eq!(
            g.token_wait(1, t0 + Duration::from_millis(500)),
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn the_bucket_never_holds_more_than_its_burst() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(2), 0, Some(100.0)), t0);
        let later = t0 + Duration::from_secs(60);
        for _ in 0..2 {
            assert_eq!(g.arrive(later), Arrival::Admit);
            g.release();
        }
        assert!(matches!(g.arrive(later), Arrival::Full { .. }));
    }

    #[test]
    fn a_rate_without_a_bound_bursts_one_second_of_tokens() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(None, 0, Some(3.0)), t0);
        for _ in 0..3 {
            assert_eq!(g.arrive(t0), Arrival::Admit);
        }
        assert!(matches!(g.arrive(t0), Arrival::Full { .. }));
    }

    #[test]
    fn retry_after_covers_the_queue_ahead_at_the_rate() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(1), 3, Some(1.0)), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        g.release();
        for i in 0..3 {
            assert_eq!(g.arrive(t0), Arrival::Queued(i));
        }
        // Three queued and this one need four tokens at one per second.
        assert_eq!(
            g.arrive(t0),
            Arrival::Full {
                retry_after: Duration::from_secs(4)
            }
        );
    }

    #[test]
    fn a_concurrency_wait_needs_no_timer() {
        let t0 = Instant::now();
        let mut g = Gate::new(&settings(Some(1), 2, Some(10.0)), t0);
        assert_eq!(g.arrive(t0), Arrival::Admit);
        assert_eq!(g.arrive(t0), Arrival::Queued(0));
        assert_eq!(g.token_wait(0, t0), None, "the release wakes it");
        assert!(!g.starved_of_tokens(t0));
    }
}
