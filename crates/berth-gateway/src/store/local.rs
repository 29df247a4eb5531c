//! One connection to the store per IO thread.
//!
//! The `redis` crate's connection runs a driver task on the runtime that made it. The shared
//! connection is made on the main runtime, so a new key's place-or-get from an IO thread (one
//! single-threaded runtime per core) would hop to another thread and back, twice per call (on
//! a loaded machine each hop waits for a core: docs/benchmarks.md). So each IO thread makes
//! its own connection the first time it calls the store, on its own runtime, and uses it from
//! then on; the shared connection serves meanwhile, and serves the background tasks on the
//! main runtime. A thread's connection is made again after the link reconnected (a new
//! generation), and dropped once its link is gone.

use std::cell::RefCell;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tokio::runtime::{Handle, RuntimeFlavor};

use super::link::Link;

/// After a failed attempt, a thread uses the shared connection this long before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

thread_local! {
    static CONNS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// This thread's connection of one link.
struct Entry {
    link: Weak<Link>,
    state: State,
}

enum State {
    /// Not tried yet.
    New,
    Connecting,
    Ready {
        generation: u64,
        conn: ConnectionManager,
    },
    Failed {
        generation: u64,
        retry_at: Instant,
    },
}

/// This thread's own connection of `link` for its current `generation`, when the caller runs
/// on a single-threaded runtime (an IO loop). `None` on other runtimes, and while the
/// connection is being made (started here on first use) or after a failed attempt: the caller
/// then uses the shared connection.
pub(super) fn thread_conn(link: &Arc<Link>, generation: u64) -> Option<ConnectionManager> {
    let runtime = Handle::try_current().ok()?;
    if runtime.runtime_flavor() != RuntimeFlavor::CurrentThread {
        return None;
    }
    CONNS.with(|conns| {
        let mut conns = conns.borrow_mut();
        // links of stopped gateways (tests run many on one thread)
        conns.retain(|e| e.link.strong_count() > 0);
        let i = match position(&conns, link) {
            Some(i) => i,
            None => {
                conns.push(Entry {
                    link: Arc::downgrade(link),
                    state: State::New,
                });
                conns.len() - 1
            }
        };
        match &conns[i].state {
            State::Ready {
                generation: g,
                conn,
            } if *g == generation => return Some(conn.clone()),
            State::Connecting => return None,
            State::Failed {
                generation: g,
                retry_at,
            } if *g == generation && Instant::now() < *retry_at => return None,
            _ => {}
        }
        conns[i].state = State::Connecting;
        runtime.spawn(connect(link.clone(), generation));
        None
    })
}

fn position(conns: &[Entry], link: &Arc<Link>) -> Option<usize> {
    conns
        .iter()
        .position(|e| std::ptr::eq(e.link.as_ptr(), Arc::as_ptr(link)))
}

/// Makes this thread's connection (on this thread's runtime, so its driver task runs here).
async fn connect(link: Arc<Link>, generation: u64) {
    let state = match link.connect().await {
        Ok(conn) => State::Ready { generation, conn },
        Err(e) => {
            tracing::debug!(error = %e, "IO thread's sticky-store connection failed; using the shared one");
            State::Failed {
                generation,
                retry_at: Instant::now() + RETRY_AFTER,
            }
        }
    };
    CONNS.with(|conns| {
        let mut conns = conns.borrow_mut();
        if let Some(i) = position(&conns, &link) {
            conns[i].state = state;
        }
    });
}
