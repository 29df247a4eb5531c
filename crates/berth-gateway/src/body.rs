//! Response bodies: either bytes the gateway made, or a worker's body streamed through with a
//! completion guard.
//!
//! The body knows nothing of leases, permits, pools or metrics: whoever builds a proxied body
//! (the proxy) attaches a [`Completion`] guard and decides what an ending means. The body calls
//! it on each data frame, once when the worker's body ends ([`Completion::finish`]) and once when
//! it breaks off ([`Completion::broken`], which may give a last frame so the client gets a
//! readable end instead of a broken transfer). A guard that was never told either (the client
//! went away mid-body) is simply dropped: its `Drop` releases what it holds.
//! Frames are passed on as they arrive: no added buffering.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// What a proxied body tells its owner as it goes.
pub trait Completion: Send + 'static {
    /// A data frame is on its way to the client.
    fn on_data(&mut self, data: &Bytes);
    /// The worker's body was read to its end (the guard is dropped right after, where it lies:
    /// taken by reference, a guard of a few hundred bytes is not copied out of the body twice
    /// to be finished).
    fn finish(&mut self);
    /// The worker's body broke off with `error`. `Some(frame)`: send it and end the body
    /// cleanly; `None`: pass the error on (the client sees a broken transfer).
    fn broken(self, error: &dyn std::error::Error) -> Option<Bytes>;
    /// Whether the frame just given to [`Completion::on_data`] may go out now; `Pending`
    /// holds it (and everything after it) until the guard is ready (the proxy's guard waits
    /// for a store write this way). Ready by default.
    fn poll_release(&mut self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}

/// The body of every response the gateway sends; `G` is the proxy's completion guard, `B` the
/// worker's body as the upstream layer reads it.
#[derive(Debug)]
pub enum ResBody<G: Completion, B: Body> {
    /// A complete body made by the gateway (errors, admin, `/v1/models`). Boxed: a worker's
    /// response (the request path's) is moved about a dozen times on its way to the
    /// connection, and this keeps the whole response within 128 bytes (a `Bytes` inline made
    /// it 144, each move a longer copy).
    Full(Option<Box<Bytes>>),
    /// A worker's body, streamed through with its guard.
    Proxied(Box<ProxiedBody<G, B>>),
}

impl<G: Completion, B: Body> ResBody<G, B> {
    /// A complete body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        Self::Full(Some(Box::new(bytes.into())))
    }

    /// An empty body.
    pub fn empty() -> Self {
        Self::Full(None)
    }

    /// A worker's body with `guard` attached.
    pub fn proxied(inner: B, guard: G) -> Self {
        Self::Proxied(Box::new(ProxiedBody {
            inner,
            guard: Some(guard),
            ended: false,
            held: None,
        }))
    }

    /// Whether this is a worker's body (not one the gateway made).
    pub fn is_proxied(&self) -> bool {
        matches!(self, Self::Proxied(_))
    }

    /// The worker's body of a proxied one.
    pub fn inner(&self) -> Option<&B> {
        match self {
            Self::Full(_) => None,
            Self::Proxied(p) => Some(&p.inner),
        }
    }

    /// The worker's body of a proxied one, to change.
    pub fn inner_mut(&mut self) -> Option<&mut B> {
        match self {
            Self::Full(_) => None,
            Self::Proxied(p) => Some(&mut p.inner),
        }
    }

    /// The guard of a proxied body that has not ended yet, to read.
    pub fn guard(&self) -> Option<&G> {
        match self {
            Self::Full(_) => None,
            Self::Proxied(p) => p.guard.as_ref(),
        }
    }

    /// The guard of a proxied body that has not ended yet.
    pub fn guard_mut(&mut self) -> Option<&mut G> {
        match self {
            Self::Full(_) => None,
            Self::Proxied(p) => p.guard.as_mut(),
        }
    }
}

/// A worker's response body with its guard attached.
#[derive(Debug)]
pub struct ProxiedBody<G: Completion, B: Body> {
    inner: B,
    guard: Option<G>,
    /// A last frame replaced a break: the body is over.
    ended: bool,
    /// A frame the guard is not ready to release yet ([`Completion::poll_release`]).
    held: Option<Frame<Bytes>>,
}

impl<G: Completion, B: Body> Drop for ProxiedBody<G, B> {
    fn drop(&mut self) {
        // An empty or already-ended body may never be polled to its end by the server.
        if self.inner.is_end_stream()
            && let Some(g) = self.guard.as_mut()
        {
            g.finish();
            // (dropped here, before the worker's body, as when it was taken out)
            self.guard = None;
        }
    }
}

impl<G, B> Body for ResBody<G, B>
where
    G: Completion,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(*b)))),
            Self::Proxied(p) => {
                if let Some(frame) = p.held.take() {
                    return release(p, frame, cx);
                }
                if p.ended {
                    return Poll::Ready(None);
                }
                let polled = Pin::new(&mut p.inner).poll_frame(cx);
                match polled {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let (Some(data), Some(g)) = (frame.data_ref(), p.guard.as_mut()) {
                            g.on_data(data);
                        }
                        release(p, frame, cx)
                    }
                    // End of stream: release now, not when hyper drops us.
                    Poll::Ready(None) => {
                        if let Some(g) = p.guard.as_mut() {
                            g.finish();
                            p.guard = None;
                        }
                        Poll::Ready(None)
                    }
                    Poll::Ready(Some(Err(e))) => {
                        if let Some(last) = p.guard.take().and_then(|g| g.broken(&e)) {
                            p.ended = true;
                            return Poll::Ready(Some(Ok(Frame::data(last))));
                        }
                        Poll::Ready(Some(Err(e)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(b) => b.is_none(),
            Self::Proxied(p) => p.held.is_none() && (p.ended || p.inner.is_end_stream()),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Proxied(p) => p.inner.size_hint(),
        }
    }
}

/// Sends `frame` once the guard releases it, holding it meanwhile.
fn release<G: Completion, B: Body>(
    p: &mut ProxiedBody<G, B>,
    frame: Frame<Bytes>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
    if let Some(g) = p.guard.as_mut()
        && g.poll_release(cx).is_pending()
    {
        p.held = Some(frame);
        return Poll::Pending;
    }
    Poll::Ready(Some(Ok(frame)))
}
