//! One worker connection's HTTP/1 machinery, driven by the task that uses it.
//!
//! hyper's connection-level client splits a connection in two: a [`SendRequest`] handle and
//! the connection future that reads and writes the socket. Spawned as a task of its own (the
//! usual way), every request crosses between the client connection's task and that task four
//! times (the send, the response head, each body frame, the end), each a wake-up and a trip
//! through the scheduler. A [`Link`] keeps both halves together instead, and whoever waits on
//! the connection polls it: the attempt while it sends and waits for the head
//! ([`Link::drive`]), the response body while it streams ([`Link::poll_drive`], through the
//! body's completion guard), the PD prefill leg while it reads its answer. A request then runs
//! in one task, from the client's socket to the worker's and back.
//!
//! An idle link in the pool is polled by no one: a connection the worker closed meanwhile is
//! found out when the next request drives it before sending (hyper reads the end of stream and
//! the connection ends), or, at the latest, by the stale-connection re-send of the attempt.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;

use super::body::UpBody;
use crate::tls::MaybeTls;

/// The half of a connection that reads and writes its socket.
type Driver = Connection<TokioIo<MaybeTls>, UpBody>;

/// A worker connection: the request handle and the connection, polled inline.
pub(super) struct Link {
    pub(super) sender: SendRequest<UpBody>,
    /// `None` once the connection ended (closed, broken); dropping it closes the socket.
    driver: Option<Pin<Box<Driver>>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Link {
    pub(super) fn new(sender: SendRequest<UpBody>, driver: Driver) -> Self {
        Self {
            sender,
            driver: Some(Box::pin(driver)),
        }
    }

    /// Whether the connection can no longer carry a request (as far as it was last polled).
    pub(super) fn is_closed(&self) -> bool {
        self.driver.is_none() || self.sender.is_closed()
    }

    /// Lets the connection read and write what it can; registers `cx` for its socket. `true`:
    /// the connection is still running, and what waits on it (its response body) needs no
    /// waker of its own (see [`driving`]); `false`: it ended, and everything waiting on it has
    /// been told.
    pub(super) fn poll_drive(&mut self, cx: &mut Context<'_>) -> bool {
        poll_driver(&mut self.driver, cx);
        self.driver.is_some()
    }

    /// Hands the connection to a task of its own, which runs it to its end (a request body
    /// still being sent after its answer was read).
    pub(super) fn detach(self) {
        if let Some(driver) = self.driver {
            tokio::spawn(async move {
                let _ = driver.await;
            });
        }
    }

    /// Waits until the connection can take a request.
    ///
    /// An idle connection is ready at once, and is then polled without a waker: registered
    /// with hyper's request channel, the task would wake itself when [`Link::send`] puts the
    /// request there (and poll the whole client connection once more for nothing); `send`
    /// polls the connection with the task's waker right after.
    pub(super) async fn ready(&mut self) -> hyper::Result<()> {
        if let Some(ready) = self.ready_now() {
            return ready;
        }
        driving(&mut self.driver, self.sender.ready()).await
    }

    /// [`Link::ready`] without a waker: `None` when the connection is not ready yet.
    fn ready_now(&mut self) -> Option<hyper::Result<()>> {
        let mut idle = Context::from_waker(Waker::noop());
        poll_driver(&mut self.driver, &mut idle);
        match pin!(self.sender.ready()).poll(&mut idle) {
            Poll::Ready(ready) => Some(ready),
            Poll::Pending => None,
        }
    }

    /// Sends `req`; the response head, or the request back when nothing was written.
    pub(super) async fn send(
        &mut self,
        req: http::Request<UpBody>,
    ) -> Result<
        http::Response<hyper::body::Incoming>,
        hyper::client::conn::TrySendError<http::Request<UpBody>>,
    > {
        driving(&mut self.driver, self.sender.try_send_request(req)).await
    }

    /// Runs `fut` (which waits on this connection, e.g. reads its response body) while driving
    /// the connection.
    pub(super) async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        driving(&mut self.driver, fut).await
    }
}

/// Polls the connection; once it has ended it is dropped (which fails whatever still waits on
/// it, instead of leaving it pending).
fn poll_driver(driver: &mut Option<Pin<Box<Driver>>>, cx: &mut Context<'_>) {
    if let Some(d) = driver.as_mut()
        && d.as_mut().poll(cx).is_ready()
    {
        *driver = None;
    }
}

/// `fut`, with the connection polled before it each time (so what it waits for is read first).
///
/// `fut` waits only on what the connection does (hyper's channels between the request handle,
/// the body and the connection), and the connection is polled right before it each time, so
/// `fut` is polled without a waker: the connection's socket (registered with the task's waker)
/// is what wakes the task. Registering the task with hyper's channels as well would make the
/// task wake itself whenever the connection it is driving hands something over, and each such
/// wake is one more poll of the whole client connection.
async fn driving<F: Future>(driver: &mut Option<Pin<Box<Driver>>>, fut: F) -> F::Output {
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        if driver.is_none() {
            return fut.as_mut().poll(cx);
        }
        poll_driver(driver, cx);
        fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    })
    .await
}
