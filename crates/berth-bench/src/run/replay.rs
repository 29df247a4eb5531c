//! Replaying a trace: sessions from the file, each resending its history with the answers it got.
//!
//! One dispatcher reads the file's kept rows in order ([`TraceReader`]) and hands each to its
//! session's task over a channel; a row of a session not seen yet queues the session to start.
//! Without `--fixed-schedule`, queued sessions start when a `--concurrency` slot is free (and,
//! under `--request-rate`, at their arrival times); with it, each session starts at once and
//! the dispatcher waits for each timestamped row's time before handing it over, so it never
//! reads far ahead. The dispatcher reads on only while a slot is free to start the next session
//! or a live session waits for a row not read yet, so a file whose sessions interleave cannot
//! deadlock the slots and rows are buffered only as far as that interleaving needs.
//!
//! A session's task keeps its history as segments (the block ids of each turn, the answers),
//! builds each prompt from the shared [`BlockCache`] when the turn is sent, and ends after its
//! last turn (known from the first pass), when a turn fails, or when the run stops. So memory
//! grows with distinct blocks and live sessions, not with the trace's requests.
//!
//! Sending goes through [`TurnSink`], so the scheduling is tested on a paused clock without a
//! network.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::error::BenchError;
use crate::run::arrivals::Arrivals;
use crate::run::context::RunContext;
use crate::trace::blocks::BlockCache;
use crate::trace::ideal::IdealCache;
use crate::trace::source::KeptRow;
use crate::trace::{TraceConfig, TraceIndex, TraceReader, TraceRow};
use crate::workload::Message;

/// One turn to send.
#[derive(Debug)]
pub struct TurnRequest<'a> {
    /// The session's routing key.
    pub session_id: &'a str,
    /// Zero-based turn index.
    pub turn_index: u32,
    /// Whether it is the session's last turn.
    pub is_last: bool,
    /// The whole conversation to send (history, then the new user message).
    pub history: &'a [Message],
    /// `max_tokens`.
    pub max_tokens: u64,
}

/// Where turns go: the HTTP client in a run, a recorder in tests.
pub trait TurnSink: Send + Sync + 'static {
    /// Sends one turn; resolves to the answer, or `None` when it failed.
    fn send<'a>(
        &'a self,
        ctx: &'a RunContext,
        turn: TurnRequest<'a>,
    ) -> impl Future<Output = Option<String>> + Send + 'a;
}

/// What a replay observed about its own data structures.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ReplayStats {
    /// Sessions started.
    pub sessions_started: u64,
    /// Most sessions the dispatcher tracked at once (live, or waiting to start, with rows
    /// still to hand over).
    pub peak_open_sessions: u64,
    /// Most rows buffered at once for sessions waiting to start.
    pub peak_buffered_rows: u64,
    /// Block texts cached at the end.
    pub block_cache_entries: u64,
    /// Most block texts the cache may hold.
    pub block_cache_capacity: u64,
    /// Distinct blocks in the ideal cache at the end.
    pub ideal_blocks: u64,
}

struct Shared<S> {
    ctx: Arc<RunContext>,
    trace: TraceConfig,
    first_ms: Option<f64>,
    sink: S,
    blocks: Mutex<BlockCache>,
    notify: Notify,
    starved: AtomicUsize,
    start: Instant,
    sessions_started: AtomicU64,
}

enum Route {
    /// A started session: its channel, and whether it waits for a row not read yet.
    Live(mpsc::UnboundedSender<TraceRow>, Arc<AtomicBool>),
    Waiting(Vec<TraceRow>),
}

/// A session in the dispatcher's map: rows without `session_id` apart from named sessions.
type OpenKey = (bool, String);

struct Open {
    remaining: u32,
    route: Route,
}

/// Replays the trace described by `trace` with `index` (its first pass) through `sink`;
/// `ideal` is the run's ideal cache (its size goes into the stats).
pub async fn replay<S: TurnSink>(
    ctx: Arc<RunContext>,
    trace: TraceConfig,
    index: TraceIndex,
    sink: S,
    ideal: Option<Arc<Mutex<IdealCache>>>,
) -> Result<ReplayStats, BenchError> {
    let reader = TraceReader::open(&trace.source)?;
    let shared = Arc::new(Shared {
        first_ms: index.first_timestamp_ms,
        blocks: Mutex::new(BlockCache::new(trace.block_size)),
        trace,
        ctx,
        sink,
        notify: Notify::new(),
        starved: AtomicUsize::new(0),
        start: Instant::now(),
        sessions_started: AtomicU64::new(0),
    });
    let mut stats = dispatch(Arc::clone(&shared), reader, &index).await?;
    stats.sessions_started = shared.sessions_started.load(Ordering::Relaxed);
    if let Ok(b) = shared.blocks.lock() {
        stats.block_cache_entries = b.len() as u64;
        stats.block_cache_capacity = b.capacity() as u64;
    }
    stats.ideal_blocks = ideal
        .and_then(|i| i.lock().ok().map(|c| c.len() as u64))
        .unwrap_or(0);
    Ok(stats)
}

async fn dispatch<S: TurnSink>(
    shared: Arc<Shared<S>>,
    mut reader: TraceReader,
    index: &TraceIndex,
) -> Result<ReplayStats, BenchError> {
    let ctx = Arc::clone(&shared.ctx);
    let cfg = &ctx.config;
    let fixed = shared.trace.fixed_schedule;
    let slots = (!fixed).then(|| {
        let n = usize::try_from(cfg.concurrency)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Arc::new(Semaphore::new(n))
    });
    let mut arrivals = match (fixed, cfg.request_rate) {
        (false, Some(rate)) => Some(Arrivals::new(cfg.arrival_pattern, rate, &ctx.seed)),
        _ => None,
    };
    let mut open: HashMap<OpenKey, Open> = HashMap::new();
    let mut queue: VecDeque<OpenKey> = VecDeque::new();
    let mut tasks = JoinSet::new();
    let mut stats = ReplayStats::default();
    let mut buffered = 0u64;
    let mut eof = false;
    let mut result = Ok(());
    'run: loop {
        if ctx.stopped() {
            break;
        }
        // Start queued sessions while slots allow.
        while let Some(key) = queue.front() {
            let permit = match &slots {
                Some(s) => match Arc::clone(s).try_acquire_owned() {
                    Ok(p) => Some(p),
                    Err(_) => break,
                },
                None => None,
            };
            if let Some(a) = &mut arrivals {
                let at = shared.start + a.next_offset();
                if !ctx
                    .sleep(at.saturating_duration_since(Instant::now()))
                    .await
                {
                    break 'run;
                }
            }
            let key = key.clone();
            queue.pop_front();
            let Some(entry) = open.get_mut(&key) else {
                continue;
            };
            let (tx, rx) = mpsc::unbounded_channel();
            let starving = Arc::new(AtomicBool::new(false));
            let live = Route::Live(tx, Arc::clone(&starving));
            if let Route::Waiting(rows) = std::mem::replace(&mut entry.route, live) {
                buffered -= rows.len() as u64;
                let turns = entry.remaining + rows.len() as u32;
                if let Route::Live(tx, _) = &entry.route {
                    for row in rows {
                        let _ = tx.send(row);
                    }
                }
                if entry.remaining == 0 {
                    open.remove(&key);
                }
                shared.sessions_started.fetch_add(1, Ordering::Relaxed);
                tasks.spawn(run_session(
                    Arc::clone(&shared),
                    key.1,
                    turns,
                    rx,
                    starving,
                    permit,
                ));
            }
            while tasks.try_join_next().is_some() {}
        }
        let free = slots.as_ref().is_none_or(|s| s.available_permits() > 0);
        let starved = shared.starved.load(Ordering::Acquire) > 0;
        if !eof && (fixed || starved || (queue.is_empty() && free)) {
            match reader.next_row(index) {
                Err(e) => {
                    result = Err(e);
                    ctx.stop();
                    break;
                }
                Ok(None) => eof = true,
                Ok(Some(kept)) => {
                    if fixed
                        && let (Some(ts), Some(first)) = (kept.row.timestamp_ms, shared.first_ms)
                    {
                        let at = shared.start
                            + std::time::Duration::from_secs_f64(
                                ((ts - first) / shared.trace.speedup).max(0.0) / 1000.0,
                            );
                        if !ctx
                            .sleep(at.saturating_duration_since(Instant::now()))
                            .await
                        {
                            break;
                        }
                    }
                    route(&shared.starved, &mut open, &mut queue, &mut buffered, kept);
                    stats.peak_open_sessions = stats.peak_open_sessions.max(open.len() as u64);
                    stats.peak_buffered_rows = stats.peak_buffered_rows.max(buffered);
                }
            }
            continue;
        }
        if eof && queue.is_empty() {
            break;
        }
        tokio::select! {
            _ = shared.notify.notified() => {}
            _ = ctx.stopping() => break,
        }
    }
    // Closing the channels ends sessions waiting for rows that will never come.
    drop(open);
    while tasks.join_next().await.is_some() {}
    result.map(|()| stats)
}

fn route(
    starved: &AtomicUsize,
    open: &mut HashMap<OpenKey, Open>,
    queue: &mut VecDeque<OpenKey>,
    buffered: &mut u64,
    kept: KeptRow,
) {
    let KeptRow {
        key,
        single,
        session_turns,
        row,
    } = kept;
    let key = (single, key);
    match open.get_mut(&key) {
        Some(entry) => {
            entry.remaining = entry.remaining.saturating_sub(1);
            match &mut entry.route {
                Route::Live(tx, starving) => {
                    let _ = tx.send(row);
                    // The session is fed: it no longer asks the dispatcher to read on.
                    if starving.swap(false, Ordering::AcqRel) {
                        starved.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                Route::Waiting(rows) => {
                    rows.push(row);
                    *buffered += 1;
                }
            }
            if entry.remaining == 0 && matches!(entry.route, Route::Live(..)) {
                open.remove(&key);
            }
        }
        None => {
            *buffered += 1;
            queue.push_back(key.clone());
            open.insert(
                key,
                Open {
                    remaining: session_turns.saturating_sub(1),
                    route: Route::Waiting(vec![row]),
                },
            );
        }
    }
}

mod session;

pub use session::routing_key;
use session::run_session;

#[cfg(test)]
mod tests;
