//! Waiting for a worker's response head within `--request-timeout-secs`, without charging the
//! worker for the client's upload.
//!
//! A streamed body goes to the worker while the client sends it, and a worker answers only after
//! reading it, so a slow client would make every worker look slow. The request timeout therefore
//! starts when the client's body has ended. Before that, the attempt only fails as the worker's
//! fault when the worker's connection stopped taking body bytes that were there for a whole
//! timeout; a client that is slow or stalls is bounded by the body's own deadline (`deadline.rs`)
//! and answered 408 by the caller.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::replay::Replayable;

/// `fut` (the send of one attempt) within `timeout` counted from the end of the upload;
/// `None` when the worker ran out of time.
///
/// `fut` comes pinned by the caller: taken by value, the send's future would be stored twice
/// in this one's state (as the argument and as the pinned local), and every future above it
/// on the request path, each moved at least once per request, would carry the copy.
pub(crate) async fn response_within<F: Future>(
    mut fut: Pin<&mut F>,
    timeout: Duration,
    upload: Option<&Replayable>,
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
    tokio::time::timeout(timeout, fut).await.ok()
}
