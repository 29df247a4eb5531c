//! The accept loop and the IO loops: one accept loop deals connections round robin to the IO
//! loops; each IO loop serves its connections (`conn.rs`), prunes its worker connections and
//! ticks its header-timeout and request-timeout wheels (`coarse_timer.rs`).

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::conn::serve_connection;
use crate::coarse_timer::{CoarseTimer, Wheel};
use crate::error::GatewayError;
use crate::state::{AppState, IoCtx};
use crate::upstream::Pool;

/// After a failed `accept` (e.g. out of file descriptors, which keeps failing until a
/// connection closes), waits a little instead of spinning a core on the error.
pub(super) async fn accept_backoff(e: &std::io::Error) {
    tracing::warn!(error = %e, "accept failed; retrying in 50 ms");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// Accepts connections and deals them round robin to the IO loops.
pub(super) async fn accept_loop(
    listener: TcpListener,
    io: Vec<IoLoop>,
    mut stop: watch::Receiver<bool>,
) {
    let mut next = 0usize;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _peer)) => stream,
                    Err(e) => {
                        accept_backoff(&e).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Ok(stream) = stream.into_std() else { continue };
                if io.is_empty() || io[next % io.len()].conns.send(stream).is_err() {
                    continue;
                }
                next = next.wrapping_add(1);
            }
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    for l in io {
        drop(l.conns);
        let _ = l.done.await;
    }
}

/// How often an IO loop drops idle connections to removed workers.
const POOL_PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// One IO loop: where its connections are served, and how to learn it has drained.
pub(super) struct IoLoop {
    conns: mpsc::UnboundedSender<std::net::TcpStream>,
    done: oneshot::Receiver<()>,
}

/// Starts the IO loops: `threads` OS threads with a single-threaded runtime each (a connection
/// and its upstream connections then stay on one thread: no cross-thread wake-ups), or, with
/// 0, one loop on the caller's runtime.
pub(super) fn spawn_io(
    state: &Arc<AppState>,
    threads: usize,
    stop: &watch::Receiver<bool>,
) -> Result<Vec<IoLoop>, GatewayError> {
    let mut loops = Vec::new();
    for i in 0..threads.max(1) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        let (state, stop) = (state.clone(), stop.clone());
        if threads == 0 {
            tokio::spawn(async move {
                io_loop(rx, state, stop).await;
                let _ = done_tx.send(());
            });
        } else {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            std::thread::Builder::new()
                .name(format!("berth-io-{i}"))
                .spawn(move || {
                    rt.block_on(io_loop(rx, state, stop));
                    let _ = done_tx.send(());
                })?;
        }
        loops.push(IoLoop {
            conns: tx,
            done: done_rx,
        });
    }
    Ok(loops)
}

async fn io_loop(
    mut incoming: mpsc::UnboundedReceiver<std::net::TcpStream>,
    state: Arc<AppState>,
    mut stop: watch::Receiver<bool>,
) {
    // `--request-timeout-secs`: a coarse wheel of its own per IO loop, ticked here
    let requests = Wheel::new(state.config.request_timeout);
    let io = Arc::new(IoCtx {
        pool: Arc::new(Pool::new(state.client.clone()).with_request_timer(requests.clone())),
        state,
    });
    let mut request_tick = every(requests.tick());
    // `--header-read-timeout-secs`: one coarse wheel per IO loop, ticked here
    let wheel = io.state.config.header_read_timeout.map(Wheel::new);
    let timer = wheel.clone().map(CoarseTimer);
    let mut header_tick = every(wheel.as_ref().map_or(POOL_PRUNE_EVERY, |w| w.tick()));
    let mut conns = JoinSet::new();
    let mut prune = every(POOL_PRUNE_EVERY);
    loop {
        tokio::select! {
            _ = prune.tick() => {
                let view = io.state.registry.view();
                let prefill = io.state.pd.as_ref().map(|pd| pd.registry.view());
                io.pool.prune(|id| {
                    view.worker(id).is_some() || prefill.as_ref().is_some_and(|p| p.worker(id).is_some())
                });
            }
            now = header_tick.tick(), if wheel.is_some() => {
                wheel.as_ref().map(|w| w.fire(now.into_std()));
            }
            now = request_tick.tick() => {
                requests.fire(now.into_std());
            }
            stream = incoming.recv() => {
                let Some(stream) = stream else { break };
                let Ok(stream) = tokio::net::TcpStream::from_std(stream) else { continue };
                conns.spawn(serve_connection(stream, io.clone(), timer.clone(), stop.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    let grace = io.state.config.shutdown_grace;
    let drain = async {
        loop {
            tokio::select! {
                joined = conns.join_next() => if joined.is_none() { break },
                now = header_tick.tick(), if wheel.is_some() => {
                    wheel.as_ref().map(|w| w.fire(now.into_std()));
                }
                now = request_tick.tick() => {
                    requests.fire(now.into_std());
                }
            }
        }
    };
    if tokio::time::timeout(grace, drain).await.is_err() {
        tracing::warn!(
            remaining = conns.len(),
            "grace period over; dropping unfinished requests"
        );
    }
    conns.shutdown().await;
}

/// An interval that skips the ticks it missed.
fn every(period: std::time::Duration) -> tokio::time::Interval {
    let mut i = tokio::time::interval(period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}
