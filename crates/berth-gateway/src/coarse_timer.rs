//! A coarse timer for the header read timeout (`--header-read-timeout-secs`) and the request
//! timeout (`--request-timeout-secs`, one wheel of its own per IO loop).
//!
//! hyper arms its header timer for every request head (its deadline is `now + timeout` when it
//! starts reading a head, and the timer is dropped when the head is complete). With tokio's
//! timer that is a boxed `tokio::time::Sleep` per request: a handle clone, a wheel insert and
//! removal under the driver's lock, and driver wake-ups, 8-16% of a sticky hit's CPU
//! (docs/benchmarks.md). Here a sleep is a slot in one table per IO loop: the first poll puts
//! its deadline and waker in the table (one uncontended lock), the drop takes them out, and
//! the IO loop calls [`Wheel::fire`] every [`Wheel::tick`] to wake the sleeps that are due. A
//! timeout therefore ends up to one tick late (a tenth of the timeout, at most one second),
//! never early.
//!
//! Nothing of the crate: hyper's `Timer` trait, std and tokio's clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// Shortest tick (a tiny timeout in tests must not spin the IO loop).
const MIN_TICK: Duration = Duration::from_millis(10);
/// Longest tick.
const MAX_TICK: Duration = Duration::from_secs(1);

/// The sleeps of one IO loop that wait for their deadline.
#[derive(Debug)]
pub(crate) struct Wheel {
    slots: Mutex<Slots>,
    tick: Duration,
}

#[derive(Debug, Default)]
struct Slots {
    entries: Vec<Slot>,
    free: Vec<usize>,
}

#[derive(Debug)]
struct Slot {
    deadline: Instant,
    /// `None`: free, or fired (the waker was taken to wake it).
    waker: Option<Waker>,
    fired: bool,
}

impl Wheel {
    /// A wheel for sleeps of about `timeout` (the tick is a tenth of it, 10 ms to 1 s).
    pub(crate) fn new(timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::default(),
            tick: (timeout / 10).clamp(MIN_TICK, MAX_TICK),
        })
    }

    /// How often [`Wheel::fire`] should run.
    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }

    /// Wakes every sleep whose deadline is at or before `now`; returns how many.
    pub(crate) fn fire(&self, now: Instant) -> usize {
        let mut due = Vec::new();
        {
            let mut s = self.lock();
            for slot in &mut s.entries {
                if !slot.fired && slot.deadline <= now && slot.waker.is_some() {
                    slot.fired = true;
                    due.extend(slot.waker.take());
                }
            }
        }
        let n = due.len();
        due.into_iter().for_each(Waker::wake);
        n
    }

    /// A sleep until `deadline` on this wheel, unboxed (a future holds it in place): the
    /// request timeout's (`upstream/wait.rs`).
    pub(crate) fn sleep_until(self: &Arc<Self>, deadline: Instant) -> CoarseSleep {
        CoarseSleep {
            wheel: self.clone(),
            deadline,
            slot: None,
        }
    }

    /// Sleeps waiting in the table (tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        let s = self.lock();
        s.entries.len() - s.free.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// hyper's [`Timer`] over a [`Wheel`].
#[derive(Clone, Debug)]
pub(crate) struct CoarseTimer(pub(crate) Arc<Wheel>);

impl Timer for CoarseTimer {
    /// tokio's clock (the IO loop's tick is a tokio interval: under a paused test clock both
    /// sides see the same time).
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(CoarseSleep {
            wheel: self.0.clone(),
            deadline,
            slot: None,
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<CoarseSleep>() {
            Some(s) => s.get_mut().reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// One sleep: not in the table until first polled.
#[derive(Debug)]
pub(crate) struct CoarseSleep {
    wheel: Arc<Wheel>,
    deadline: Instant,
    slot: Option<usize>,
}

impl CoarseSleep {
    fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if let Some(i) = self.slot {
            let mut s = self.wheel.lock();
            let slot = &mut s.entries[i];
            slot.deadline = deadline;
            slot.fired = false;
        }
    }
}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut s = this.wheel.lock();
        match this.slot {
            Some(i) => {
                let slot = &mut s.entries[i];
                if slot.fired {
                    return Poll::Ready(());
                }
                match &mut slot.waker {
                    Some(w) => w.clone_from(cx.waker()),
                    None => slot.waker = Some(cx.waker().clone()),
                }
            }
            None => {
                let slot = Slot {
                    deadline: this.deadline,
                    waker: Some(cx.waker().clone()),
                    fired: false,
                };
                let i = match s.free.pop() {
                    Some(i) => {
                        s.entries[i] = slot;
                        i
                    }
                    None => {
                        s.entries.push(slot);
                        s.entries.len() - 1
                    }
                };
                this.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl Sleep for CoarseSleep {}

impl Drop for CoarseSleep {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let mut s = self.wheel.lock();
            s.entries[i].waker = None;
            s.entries[i].fired = true;
            s.free.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    #[derive(Default)]
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll(s: &mut Pin<Box<dyn Sleep>>, waker: &Waker) -> Poll<()> {
        s.as_mut().poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_sleep_fires_at_its_deadline_and_not_before() {
        let wheel = Wheel::new(Duration::from_secs(30));
        assert_eq!(wheel.tick(), Duration::from_secs(1));
        let timer = CoarseTimer(wheel.clone());
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let t0 = Instant::now();
        let mut s = timer.sleep_until(t0 + Duration::from_secs(30));
        assert_eq!(wheel.waiting(), 0, "not in the table before its first poll");
        assert!(poll(&mut s, &waker).is_pending());
        assert_eq!(wheel.waiting(), 1);
        assert_eq!(wheel.fire(t0 + Duration::from_secs(29)), 0);
        assert!(poll(&mut s, &waker).is_pending());
        assert_eq!(count.0.load(Ordering::Relaxed), 0);
        assert_eq!(wheel.fire(t0 + Duration::from_secs(30)), 1);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert!(poll(&mut s, &waker).is_ready());
        assert_eq!(wheel.fire(t0 + Duration::from_secs(60)), 0, "fires once");
        drop(s);
        assert_eq!(wheel.waiting(), 0);
    }

    #[test]
    fn a_dropped_sleep_leaves_the_table_and_its_slot_is_reused() {
        let wheel = Wheel::new(Duration::from_millis(200));
        assert_eq!(wheel.tick(), Duration::from_millis(20));
        let timer = CoarseTimer(wheel.clone());
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let t0 = Instant::now();
        for _ in 0..100 {
            let mut s = timer.sleep_until(t0 + Duration::from_secs(1));
            assert!(poll(&mut s, &waker).is_pending());
        }
        assert_eq!(wheel.waiting(), 0);
        assert_eq!(wheel.lock().entries.len(), 1, "one slot, reused");
        assert_eq!(
            wheel.fire(t0 + Duration::from_secs(2)),
            0,
            "nothing left to wake"
        );
        assert_eq!(count.0.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn reset_moves_the_deadline_and_rearms_a_fired_sleep() {
        let wheel = Wheel::new(Duration::from_secs(5));
        let timer = CoarseTimer(wheel.clone());
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let t0 = Instant::now();
        let mut s = timer.sleep_until(t0 + Duration::from_secs(1));
        assert!(poll(&mut s, &waker).is_pending());
        assert_eq!(wheel.fire(t0 + Duration::from_secs(1)), 1);
        assert!(poll(&mut s, &waker).is_ready());
        timer.reset(&mut s, t0 + Duration::from_secs(10));
        assert!(poll(&mut s, &waker).is_pending());
        assert_eq!(wheel.fire(t0 + Duration::from_secs(9)), 0);
        assert_eq!(wheel.fire(t0 + Duration::from_secs(10)), 1);
        assert!(poll(&mut s, &waker).is_ready());
        // a sleep of another timer is replaced by one of this wheel
        let mut other: Pin<Box<dyn Sleep>> = Box::pin(Other);
        timer.reset(&mut other, t0 + Duration::from_secs(3));
        assert!(poll(&mut other, &waker).is_pending());
        assert_eq!(wheel.fire(t0 + Duration::from_secs(3)), 1);
    }

    struct Other;
    impl Future for Other {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            Poll::Ready(())
        }
    }
    impl Sleep for Other {}
}
