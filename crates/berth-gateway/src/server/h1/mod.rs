//! A purpose-built HTTP/1.1 server connection for the client side, as `upstream/h1/` is the
//! client for the worker side.
//!
//! hyper's server connection parsed every head into a fresh header map, moved the service
//! future into its dispatcher, fed the request body through a channel, and re-reserved its
//! read buffer per head. Here one task per connection does it all: the connection keeps one
//! read and one write buffer for its whole life; a request head is parsed (httparse) into its
//! method, target and version and its header fields, target and fields kept as the head's
//! bytes (`crate::fields::{Target, Fields}`: no `Uri`, no header map); the request body
//! ([`ConnBody`]) decodes straight out of the read buffer in the connection's task; the service
//! future is polled where it lies (no per-request task, no move); the response head is
//! written from the response's parts (and a worker's header fields) and the body relayed with its framing (content-length when
//! known, else chunked; none for `HEAD`, 204, 304), head and first data in one write.
//!
//! The connection's rules: keep-alive per HTTP/1.1 (HTTP/1.0 only with `Connection:
//! keep-alive`; `Connection: close` either way ends it after the response); pipelined requests
//! are read one after the other and answered in order; `Expect: 100-continue` gets its `100`
//! when the body is first read; a body left unread when the response ends is drained if the
//! rest of it has arrived (at most [`DRAIN_LIMIT`]), else the connection closes; a head that
//! takes longer than `--header-read-timeout-secs` (counted from when the connection starts
//! waiting for it) closes the connection; a malformed head gets a 400, an over-long one (more
//! than 64 KiB or 100 headers) a 431, both with the JSON error shape, then the connection
//! closes; a client that leaves while its request is served (its read side ends) cancels the
//! request; on shutdown an idle connection closes at once and a busy one after its response.
//!
//! - `head.rs`: the request head parsed, the response head written (pure).
//! - `read.rs`: the read side: heads, the request body ([`crate::request_body::Wire`]), the
//!   reads that notice a client that left.
//! - `write.rs`: the write side and the response body's framing.

mod head;
mod read;
mod write;

#[cfg(test)]
mod tests;

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use http::{Method, Response, StatusCode};
use http_body::Body as _;
use hyper::rt::{Sleep, Timer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use self::head::{CONTINUE, Exchange, HeadError, write_response_head};
use self::read::{Expect, NoHead, ReadSide};
use self::write::{Sending, Writer};
use crate::coarse_timer::CoarseTimer;
use crate::error::GatewayError;
use crate::proxy::Body;
use crate::request_body::{ConnBody, SharedWire};
use crate::state::IoCtx;
use crate::upstream::h1::BodyFraming;
use crate::{request_id, service};

/// The most of an unread request body drained to keep the connection.
pub(crate) const DRAIN_LIMIT: usize = 64 * 1024;

/// Serves HTTP/1.1 on a client connection's read and write sides until it closes, the client
/// leaves, or the gateway stops.
pub(crate) async fn serve<R, W>(
    r: R,
    w: W,
    io: Arc<IoCtx>,
    timer: Option<CoarseTimer>,
    mut stop: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let read = Arc::new(Mutex::new(ReadSide::new(r)));
    let wire: SharedWire = read.clone();
    let mut out = Writer::new(w);
    let header_timeout = io.state.config.header_read_timeout.zip(timer);
    // the stop flag read through a second receiver: `stop` itself is borrowed for the
    // connection's life by its one wait for the change (a wait made and dropped for every
    // head registered and unregistered itself with the watch's list each time)
    let flag = stop.clone();
    let mut stopping = *flag.borrow();
    let mut changed = pin!(stop.changed());
    // The waker the wait was last polled with: it stays registered with it (the task's own
    // waker, the same for every head), so it is polled again only for another waker; in
    // between, whether the stop came is read off the flag: a new value or a sender gone, as
    // the wait itself would end.
    let mut registered: Option<Waker> = None;
    // one header-timeout sleep for the connection's life, re-armed for each head
    let mut sleep: Option<Pin<Box<dyn Sleep>>> = None;
    loop {
        if stopping && lock(&read).idle() {
            break;
        }
        // the head, within the header timeout; an idle connection closes when the gateway stops
        let head = {
            let mut armed = false;
            poll_fn(|cx| {
                let mut r = lock(&read);
                if let Poll::Ready(h) = r.poll_head(cx) {
                    return Poll::Ready(h.map(Some));
                }
                if !stopping {
                    if flag.has_changed().unwrap_or(true) {
                        stopping = true;
                    } else if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        registered = Some(cx.waker().clone());
                        stopping = changed.as_mut().poll(cx).is_ready();
                    }
                }
                if stopping && r.idle() {
                    return Poll::Ready(Ok(None));
                }
                if let Some((timeout, timer)) = &header_timeout {
                    let s = match (&mut sleep, armed) {
                        (Some(s), true) => s,
                        (Some(s), false) => {
                            timer.reset(s, timer.now() + *timeout);
                            s
                        }
                        (None, _) => sleep.insert(timer.sleep(*timeout)),
                    };
                    armed = true;
                    if s.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Err(NoHead::Closed));
                    }
                }
                Poll::Pending
            })
            .await
        };
        let head = match head {
            Ok(Some(head)) => head,
            Ok(None) | Err(NoHead::Closed) => break,
            Err(NoHead::Refused(e)) => {
                refuse(&io, &mut out, e).await;
                break;
            }
        };
        let ex = Exchange {
            head_request: head.method == Method::HEAD,
            version: head.version,
            keep_alive: head.keep_alive,
        };
        let body = if head.body == BodyFraming::Length(0) {
            ConnBody::empty()
        } else {
            ConnBody::new(wire.clone(), lock(&read).request)
        };
        let req = service::Req {
            method: head.method,
            target: head.target,
            version: head.version,
            fields: head.fields,
            body,
        };

        // the service, in this task; a 100 Continue when its body is first read
        let resp = {
            let mut served = pin!(service::handle(io.clone(), req));
            poll_fn(|cx| {
                if let Poll::Ready(Ok(resp)) = served.as_mut().poll(cx) {
                    return Poll::Ready(Some(resp));
                }
                let mut r = lock(&read);
                if r.expect == Expect::Due {
                    r.expect = Expect::No;
                    out.buf.extend_from_slice(CONTINUE);
                }
                if !out.buf.is_empty() && matches!(out.poll_flush(cx), Poll::Ready(Err(_))) {
                    return Poll::Ready(None);
                }
                // the client left: the request is cancelled (dropped)
                r.poll_gone(cx).map(|()| None)
            })
            .await
        };
        let Some(resp) = resp else { break };
        stopping |= *flag.borrow();

        // the response
        let (parts, mut body) = resp.into_parts();
        let exact = body.size_hint().exact();
        // a worker's header fields travel with its body; written, they are done with
        let worker = body.inner_mut().and_then(|b| b.take_fields());
        let mut own: [(&str, &[u8]); 2] = [("", b""); 2];
        let mut owned = 0;
        for (slot, header) in own
            .iter_mut()
            .zip(body.guard().into_iter().flat_map(|g| g.own_headers()))
        {
            *slot = header;
            owned += 1;
        }
        let (framing, keep_alive) = write_response_head(
            &mut out.buf,
            parts.status,
            &parts.headers,
            worker.as_ref(),
            &own[..owned],
            exact,
            Exchange {
                keep_alive: ex.keep_alive && !stopping,
                ..ex
            },
        );
        drop((worker, parts));
        let mut sending = Sending::new(framing);
        let sent = poll_fn(|cx| {
            if let Poll::Ready(r) = sending.poll_send(&mut out, &mut body, cx) {
                return Poll::Ready(r.is_ok());
            }
            lock(&read).poll_gone(cx).map(|()| false)
        })
        .await;
        drop(body);
        if !sent || !keep_alive || !lock(&read).settle(DRAIN_LIMIT) {
            break;
        }
    }
    out.shutdown().await;
}

fn lock<R>(read: &Mutex<ReadSide<R>>) -> MutexGuard<'_, ReadSide<R>> {
    read.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answers a refused head (400 or 431 with the JSON error shape, `Connection: close`).
async fn refuse<W: AsyncWrite + Unpin>(io: &IoCtx, out: &mut Writer<W>, e: HeadError) {
    let (status, msg) = match e {
        HeadError::Bad(m) => (
            StatusCode::BAD_REQUEST,
            format!("invalid request head: {m}"),
        ),
        HeadError::TooLarge(m) => (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, m.to_owned()),
    };
    let mut resp: Response<Body> = GatewayError::BadRequest(msg).to_response();
    *resp.status_mut() = status;
    request_id::stamp(
        &mut resp,
        &request_id::for_request(&crate::fields::Fields::default(), b"/"),
    );
    io.state
        .metrics
        .response(resp.status(), resp.headers(), false);
    let (parts, mut body) = resp.into_parts();
    let exact = body.size_hint().exact();
    let ex = Exchange {
        head_request: false,
        version: http::Version::HTTP_11,
        keep_alive: false,
    };
    let (framing, _) = write_response_head(
        &mut out.buf,
        parts.status,
        &parts.headers,
        None,
        &[],
        exact,
        ex,
    );
    let mut sending = Sending::new(framing);
    let _ = poll_fn(|cx| sending.poll_send(out, &mut body, cx)).await;
}
