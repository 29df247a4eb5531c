//! Starting root sessions and running the whole benchmark.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::config::BenchConfig;
use crate::error::BenchError;
use crate::metrics::{RequestRecord, Summary};
use crate::rng::Rng;
use crate::routing::RequestIdentity;
use crate::run::arrivals::Arrivals;
use crate::run::context::RunContext;
use crate::run::progress::Progress;
use crate::run::replay::{ReplayStats, TurnRequest, TurnSink, replay};
use crate::run::session::{SessionNode, run_session, send_turn};
use crate::trace::ideal::IdealCache;
use crate::trace::source::scan;
use crate::transport::HttpClient;

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// The configuration it ran with.
    pub config: BenchConfig,
    /// Every attempt, in send order.
    pub records: Vec<RequestRecord>,
    /// The figures.
    pub summary: Summary,
    /// Wall-clock time of the whole run, seconds.
    pub wall_s: f64,
    /// Root sessions started.
    pub roots_started: u64,
    /// Most sessions (roots and children) running at once.
    pub peak_live_sessions: u64,
    /// Whether the run was stopped by the shutdown signal.
    pub interrupted: bool,
    /// Trace replay only: the replay's own data-structure sizes.
    pub replay: Option<ReplayStats>,
}

/// The sink of a real run: [`send_turn`] over the pooled client, feeding the ideal cache.
struct HttpSink {
    ideal: Arc<Mutex<IdealCache>>,
}

impl TurnSink for HttpSink {
    async fn send<'a>(&'a self, ctx: &'a RunContext, turn: TurnRequest<'a>) -> Option<String> {
        let node = SessionNode {
            id: turn.session_id.to_owned(),
            parent: None,
            root: turn.session_id.to_owned(),
            depth: 0,
            rng: Rng::new(0),
            prefix: Vec::new(),
        };
        let identity = RequestIdentity {
            session_id: turn.session_id,
            parent_id: None,
            root_id: turn.session_id,
            turn_index: turn.turn_index,
            retry: 0,
            is_session_final: turn.is_last,
            is_tree_final: turn.is_last,
            // Trace replay sends no chains (refused at start-up with `previous_response_id`).
            previous_response_id: None,
        };
        send_turn(
            ctx,
            &node,
            identity,
            turn.history,
            turn.max_tokens,
            Some(&*self.ideal),
        )
        .await
        .map(|(text, _)| text)
    }
}

/// Runs the benchmark described by `config` until its sessions finish, its duration ends, or
/// `shutdown` resolves (then no new turn starts and requests in flight finish).
pub async fn execute(
    config: BenchConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<RunOutput, BenchError> {
    let client = HttpClient::new(&config.url, config.request_timeout)?;
    // The trace's first pass checks every line before anything is sent.
    let trace = match &config.trace {
        Some(t) => Some((t.clone(), scan(&t.source)?)),
        None => None,
    };
    let ctx = Arc::new(RunContext::new(config.clone(), client));
    let progress = Progress::start(Arc::clone(&ctx));
    let started = Instant::now();

    let mut interrupted = false;
    let mut replay_stats = None;
    let roots_started = {
        let launch = async {
            match trace {
                Some((t, index)) => {
                    let ideal = Arc::new(Mutex::new(IdealCache::new()));
                    let sink = HttpSink {
                        ideal: Arc::clone(&ideal),
                    };
                    let stats = replay(Arc::clone(&ctx), t, index, sink, Some(ideal)).await?;
                    let n = stats.sessions_started;
                    replay_stats = Some(stats);
                    Ok::<u64, BenchError>(n)
                }
                None => Ok(launch_roots(Arc::clone(&ctx)).await),
            }
        };
        tokio::pin!(launch);
        let deadline = async {
            match ctx.config.duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(deadline);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                n = &mut launch => break n,
                _ = &mut deadline, if !ctx.stopped() => ctx.stop(),
                _ = &mut shutdown, if !interrupted => {
                    interrupted = true;
                    ctx.stop();
                }
            }
        }
    };
    ctx.stop();
    progress.finish().await;
    let roots_started = roots_started?;

    let peak_live_sessions = ctx
        .peak_live_sessions
        .load(std::sync::atomic::Ordering::Relaxed);
    let records = ctx.take_records();
    let summary = Summary::from_records(&records, ctx.config.expected_workers);
    Ok(RunOutput {
        config,
        records,
        summary,
        wall_s: started.elapsed().as_secs_f64(),
        roots_started,
        peak_live_sessions,
        interrupted,
        replay: replay_stats,
    })
}

/// Starts root sessions until `--num-sessions` have started or the run stops, then waits for
/// every started tree to finish. Returns how many roots started.
async fn launch_roots(ctx: Arc<RunContext>) -> u64 {
    let cfg = &ctx.config;
    let permits = usize::try_from(cfg.concurrency)
        .unwrap_or(usize::MAX)
        .min(Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(permits));
    let mut trees = JoinSet::new();
    let mut index = 0u64;
    let mut arrivals = cfg
        .request_rate
        .map(|rate| Arrivals::new(cfg.arrival_pattern, rate, &ctx.seed));
    while cfg.num_sessions.is_none_or(|n| index < n) && !ctx.stopped() {
        if let Some(arrivals) = &mut arrivals {
            let at = ctx.started + arrivals.next_offset();
            let wait = at.saturating_duration_since(Instant::now());
            if !ctx.sleep(wait).await {
                break;
            }
        }
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = ctx.stopping() => break,
        };
        let node = SessionNode::root(&ctx, index);
        let task_ctx = Arc::clone(&ctx);
        trees.spawn(async move {
            run_session(task_ctx, node).await;
            drop(permit);
        });
        index += 1;
        while trees.try_join_next().is_some() {}
    }
    while trees.join_next().await.is_some() {}
    index
}
