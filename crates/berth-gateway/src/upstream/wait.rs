//! Waiting for a worker's response head within `--request-timeout-secs`, without charging the
//! worker for the client's upload.
//!
//! A streamed body goes to the worker while the client sends it, and a worker answers only after
//! reading it, so a slow client would make every worker look slow. The request timeout therefore
//! starts when the client's body has ended. Before that, the attempt only fails as the worker's
//! fault when the worker's connection stopped taking body bytes that were there for a whole
//! timeout; a client that is slow or stalls is bounded by the body's own deadline (`deadline.rs`)
//! and answered 408 by the caller.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use super::replay::Replayable;
use crate::coarse_timer::Wheel;

/// `fut` (the send of one attempt) within `timeout` counted from the end of the upload;
/// `None` when the worker ran out of time. With `wheel` (the IO loop's request-timeout
/// wheel) the timeout is a slot in its table and ends up to one of its ticks late (a tenth
/// of the timeout, at most a second), never early; without, a tokio timer.
///
/// `fut` comes pinned by the caller: taken by value, the send's future would be stored twice
/// in this one's state (as the argument and as the pinned local), and every future above it
/// on the request path, each moved at least once per request, would carry the copy.
pub(crate) async fn response_within<F: Future>(
    mut fut: Pin<&mut F>,
    timeout: Duration,
    upload: Option<&Replayable>,
    wheel: Option<&Arc<Wheel>>,
) -> Option<F::Output> {
    if let Some(body) = upload {
        let mut done = body.upload_done();
        let mut check_at = tokio::time::Instant::now() + timeout;
        loop {
            tokio::select! {
                out = &mut fut => return Some(out),
                _ = done.wait_for(|d| *d) => break,
                () = tokio::time::sleep_until(check_at) => {
                    check_at = body.worker_stalled_until(timeout)?;
                }
            }
        }
    }
    let Some(wheel) = wheel else {
        return tokio::time::timeout(timeout, fut).await.ok();
    };
    // (a deadline past what `Instant` holds is no deadline)
    let Some(deadline) = tokio::time::Instant::now().into_std().checked_add(timeout) else {
        return Some(fut.await);
    };
    let mut sleep = pin!(wheel.sleep_until(deadline));
    poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Waker};

    use super::*;

    #[test]
    fn on_a_wheel_the_timeout_ends_when_the_wheel_fires_past_it() {
        let wheel = Wheel::new(Duration::from_secs(10));
        let mut cx = Context::from_waker(Waker::noop());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let start = std::time::Instant::now();
        // a worker that never answers
        let mut never = pin!(std::future::pending::<u8>());
        let mut wait = pin!(response_within(
            never.as_mut(),
            Duration::from_secs(10),
            None,
            Some(&wheel)
        ));
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        assert_eq!(wheel.fire(start), 0, "not before its deadline");
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        assert_eq!(wheel.fire(start + Duration::from_secs(11)), 1);
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(None));
        // an answer in time is the answer, and leaves nothing in the table
        let mut ready = pin!(std::future::ready(7u8));
        let mut wait = pin!(response_within(
            ready.as_mut(),
            Duration::from_secs(10),
            None,
            Some(&wheel)
        ));
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
        assert_eq!(wheel.fire(start + Duration::from_secs(60)), 0);
    }
}
