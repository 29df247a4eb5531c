//! One exchange on a connection: the request written, the response head read, and the
//! response body relayed by whoever polls it.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};

use super::H1Error;
use super::conn::{H1Conn, Upload};
use super::decode::{Decoder, Step};
use super::head::{Parsed, ReqHead, ResponseHead, parse_response, write_request_head};
use crate::fields::Fields;

/// The longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// Where a connection goes once its response was read to its end and it stays open.
pub(crate) trait GiveBack<IO>: Send + Unpin + 'static {
    /// Takes the connection back (to an idle list).
    fn give_back(self, conn: H1Conn<IO>);
}

/// Dropping the connection: the test's and the one-off exchange's home.
impl<IO> GiveBack<IO> for () {
    fn give_back(self, _conn: H1Conn<IO>) {}
}

/// Why an exchange got no response head.
#[derive(Debug)]
pub(crate) struct SendFail {
    pub(crate) error: H1Error,
    /// The connection had served earlier requests and failed before any response byte: the
    /// worker most likely closed it after its previous reply.
    pub(crate) stale: bool,
}

/// Sends the request `head` with `body` on `conn` and waits for the response head (its status
/// and version; its header fields are the body's, [`RespBody::fields`]). The
/// response's body reads the rest (and finishes sending a request body the worker answered
/// before it ended); read to its end on a connection that stays open, the connection goes to
/// `home`.
///
/// The body is boxed where it is made: the response is returned through the attempt, its
/// timeout and the dispatcher, and each of those moves copied the whole body (its connection,
/// upload, decoder and fields) where it now copies a pointer.
pub(crate) async fn send<IO, B, R>(
    mut conn: H1Conn<IO>,
    head: &ReqHead<'_>,
    body: B,
    home: R,
) -> Result<Response<Box<RespBody<IO, B, R>>>, SendFail>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
    R: GiveBack<IO>,
{
    let reused = conn.reused;
    conn.read_any = false;
    conn.wbuf.clear();
    conn.wpos = 0;
    let fail = |error: H1Error, read_any: bool| SendFail {
        stale: reused && !read_any && matches!(error, H1Error::Io(_) | H1Error::Closed(_)),
        error,
    };
    let framing = write_request_head(&mut conn.wbuf, head, body.size_hint().exact())
        .map_err(|e| fail(e, false))?;
    let mut upload = Some(Upload::new(body, framing));
    let resp_head = poll_fn(|cx| {
        if let Some(up) = upload.as_mut() {
            match up.poll_send(&mut conn, cx) {
                Poll::Ready(Ok(())) => upload = None,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        poll_head(&mut conn, head.method, cx)
    })
    .await
    .map_err(|e| fail(e, conn.read_any))?;
    let decoder = Decoder::new(resp_head.framing);
    // the response's header map stays empty: the worker's fields travel with the body
    let mut resp = Response::new(Box::new(RespBody {
        conn: Some(conn),
        upload,
        decoder,
        keep_alive: resp_head.keep_alive,
        home: Some(home),
        fields: Some(resp_head.fields),
    }));
    *resp.status_mut() = resp_head.status;
    *resp.version_mut() = resp_head.version;
    Ok(resp)
}

/// Reads until the read buffer starts with a final response head (informational ones are
/// skipped), and takes it off the buffer.
fn poll_head<IO: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut H1Conn<IO>,
    method: &http::Method,
    cx: &mut Context<'_>,
) -> Poll<Result<ResponseHead, H1Error>> {
    loop {
        if !conn.rbuf.is_empty() {
            match parse_response(&mut conn.rbuf, method)? {
                Parsed::Head(head) => return Poll::Ready(Ok(head)),
                Parsed::Informational => continue,
                Parsed::Partial if conn.rbuf.len() > MAX_HEAD => {
                    return Poll::Ready(Err(H1Error::Head("larger than 64 KiB".to_owned())));
                }
                Parsed::Partial => {}
            }
        }
        if ready!(conn.poll_fill(cx))? == 0 {
            return Poll::Ready(Err(H1Error::Closed(
                "the worker closed the connection before answering",
            )));
        }
    }
}

/// A worker's response body, read from its connection by whoever polls it.
#[derive(Debug)]
pub(crate) struct RespBody<IO, B, R: GiveBack<IO>> {
    /// `None` once the body ended or broke.
    conn: Option<H1Conn<IO>>,
    /// A request body still being sent (the worker answered before it ended).
    upload: Option<Upload<B>>,
    decoder: Decoder,
    keep_alive: bool,
    home: Option<R>,
    /// The worker's header fields (the response's header map is empty): read by the proxy,
    /// filtered and written by the client side, which then takes them.
    fields: Option<Fields>,
}

impl<IO, B, R: GiveBack<IO>> RespBody<IO, B, R> {
    /// The worker's header fields, until taken.
    pub(crate) fn fields(&self) -> Option<&Fields> {
        self.fields.as_ref()
    }

    /// Takes the worker's header fields (once written).
    pub(crate) fn take_fields(&mut self) -> Option<Fields> {
        self.fields.take()
    }

    /// The body ended: the connection goes home when it can carry another request (the
    /// response was whole, the upload ended, nothing unasked arrived after it), else it closes.
    fn finish(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.keep_alive
            && self.upload.is_none()
            && conn.rbuf.is_empty()
            && let Some(home) = self.home.take()
        {
            conn.reused = true;
            home.give_back(conn);
        }
    }
}

impl<IO, B, R: GiveBack<IO>> Drop for RespBody<IO, B, R> {
    fn drop(&mut self) {
        // an empty or already-ended body may never be polled to its end
        if self.decoder.is_done() {
            self.finish();
        }
    }
}

impl<IO, B, R> Body for RespBody<IO, B, R>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
    R: GiveBack<IO>,
{
    type Data = Bytes;
    type Error = H1Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, H1Error>>> {
        let this = self.get_mut();
        let Some(conn) = this.conn.as_mut() else {
            return Poll::Ready(None);
        };
        if let Some(up) = this.upload.as_mut() {
            match up.poll_send(conn, cx) {
                Poll::Ready(Ok(())) => this.upload = None,
                Poll::Ready(Err(e)) => return this.broke(e),
                Poll::Pending => {}
            }
        }
        loop {
            let step = match this.decoder.decode(&mut conn.rbuf) {
                Ok(step) => step,
                Err(e) => return this.broke(e),
            };
            match step {
                Step::Data(data) => {
                    if this.decoder.is_done() {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Step::End => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Step::More => {}
            }
            match ready!(conn.poll_fill(cx)) {
                Ok(0) => match this.decoder.at_eof() {
                    Ok(_) => {
                        // close-delimited: the connection is over
                        this.conn = None;
                        return Poll::Ready(None);
                    }
                    Err(e) => return this.broke(e),
                },
                Ok(_) => {}
                Err(e) => return this.broke(e.into()),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.decoder.remaining() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

impl<IO, B, R: GiveBack<IO>> RespBody<IO, B, R> {
    /// The body broke off: the connection closes.
    fn broke(&mut self, e: H1Error) -> Poll<Option<Result<Frame<Bytes>, H1Error>>> {
        self.conn = None;
        self.upload = None;
        Poll::Ready(Some(Err(e)))
    }
}
