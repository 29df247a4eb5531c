//! Prefix matching at long contexts (issue #18): one decision on turn 4 of a conversation of
//! 17.5k-token turns (a 70k-token prompt, 52.5k of it cached on the worker), for the prefix
//! index before #18 (`old_index.rs`, kept here only as the baseline) and the router's
//! `cache_aware` and `ttft_aware` now, all measured in the same run; then the bytes each index
//! holds per cached chunk, printed at the end (the old index's from its tables' capacities:
//! hash map buckets, tenant vectors and recency queues; the new one's as it reports them).
//!
//! Run: `cargo bench -p berth-routing --bench long_context` (add `-- --quick` for a shorter
//! run; `BERTH_BENCH_SKIP_MEMORY=1` skips the memory figures).

#![allow(missing_docs, clippy::unwrap_used)]
// A benchmark measures wall time; the core itself never reads a clock.
#![allow(clippy::disallowed_methods)]

mod old_index;

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_routing::{
    HeaderList, Leg, PolicyKind, Rng, RouteRequest, Router, RouterOptions, WorkerEntry, WorkerId,
    WorkerSnapshot,
};
use criterion::Criterion;

/// Bytes per 17.5k-token turn at 4 characters per token (4 turns: 70k tokens).
const TURN: usize = 70_000;
const TURNS: usize = 4;
const SESSIONS: usize = 32;

fn sessions() -> Vec<String> {
    let mut rng = Rng::seeded(18);
    (0..SESSIONS)
        .map(|_| {
            (0..TURN * TURNS)
                .map(|_| char::from(b' ' + (rng.next_u64() % 94) as u8))
                .collect()
        })
        .collect()
}

fn fleet() -> WorkerSnapshot {
    WorkerSnapshot::new(
        (0..4)
            .map(|i| WorkerEntry {
                id: WorkerId(i),
                url: format!("http://127.0.0.1:{}", 30000 + i).into(),
                models: vec![Arc::from("llama")],
                available: true,
                stats: Arc::default(),
            })
            .collect(),
    )
}

/// Makes a fresh index.
type Make<'a> = &'a dyn Fn() -> Box<dyn Index>;

trait Index {
    fn route(&mut self, text: &str) -> WorkerId;
    /// Heap bytes of the index and the chunks it holds.
    fn bytes(&self) -> (usize, usize);
}

/// The old index as `cache_aware` used it: one mutex, match, then insert (both hash the text).
struct Old {
    index: Mutex<old_index::PrefixIndex>,
    cands: Vec<WorkerId>,
}

impl Index for Old {
    fn route(&mut self, text: &str) -> WorkerId {
        let mut idx = self.index.lock().unwrap();
        let (matched, holders) = idx.longest_match(text.as_bytes(), &self.cands);
        let w = if matched as f64 / text.len() as f64 > 0.3 && !holders.is_empty() {
            holders[0]
        } else {
            *self
                .cands
                .iter()
                .min_by_key(|w| idx.tenant_chars(**w))
                .unwrap()
        };
        idx.insert(text.as_bytes(), w);
        w
    }

    fn bytes(&self) -> (usize, usize) {
        let idx = self.index.lock().unwrap();
        let chunks = self
            .cands
            .iter()
            .map(|w| idx.tenant_chars(*w))
            .sum::<usize>();
        (idx.heap_bytes(), chunks / old_index::CHUNK)
    }
}

/// The router now, keyless, with `policy`.
struct New {
    router: Router,
    snap: WorkerSnapshot,
    rng: Rng,
}

impl Index for New {
    fn route(&mut self, text: &str) -> WorkerId {
        let h = HeaderList(&[]);
        let req = RouteRequest {
            rid: None,
            headers: &h,
            model: Some("llama"),
            leg: Leg::Regular,
            text: Some(text),
            tokens: None,
            prefix: None,
            body: None,
            exclude: &[],
            stream: Some(true),
            loads: None,
            feedback_read: false,
        };
        let d = self
            .router
            .route(&req, &self.snap, Duration::ZERO, &mut self.rng)
            .unwrap();
        d.worker
    }

    fn bytes(&self) -> (usize, usize) {
        self.router
            .stats()
            .prefix_index
            .map_or((0, 0), |s| (s.bytes, s.chunks))
    }
}

fn old() -> Old {
    Old {
        index: Mutex::new(old_index::PrefixIndex::new(1 << 26)),
        cands: (0..4).map(WorkerId).collect(),
    }
}

fn new(policy: PolicyKind) -> New {
    New {
        router: Router::new(&RouterOptions {
            policy,
            ..RouterOptions::default()
        })
        .unwrap(),
        snap: fleet(),
        rng: Rng::seeded(7),
    }
}

/// Times turn 4 of fresh sessions whose turns 1-3 were routed (untimed) just before.
fn fourth_turns(texts: &[String], make: Make<'_>, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = (iters - done).min(SESSIONS as u64) as usize;
        let mut idx = make();
        for t in &texts[..n] {
            for turn in 1..TURNS {
                idx.route(&t[..turn * TURN]);
            }
        }
        let start = Instant::now();
        for t in &texts[..n] {
            black_box(idx.route(&t[..TURNS * TURN]));
        }
        total += start.elapsed();
        done += n as u64;
    }
    total
}

fn bench(c: &mut Criterion, texts: &[String]) {
    let mut g = c.benchmark_group("long_context_turn4_70k_tokens");
    g.sample_size(10);
    let cases: [(&str, Make<'_>); 3] = [
        ("old_index_cache_aware", &|| Box::new(old())),
        ("cache_aware", &|| Box::new(new(PolicyKind::CacheAware))),
        ("ttft_aware", &|| Box::new(new(PolicyKind::TtftAware))),
    ];
    for (name, make) in cases {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| fourth_turns(texts, make, iters));
        });
    }
    g.finish();
}

/// Heap bytes per cached chunk (per worker holding it) after all sessions' turns were routed.
fn memory(texts: &[String]) {
    let cases: [(&str, Make<'_>); 2] = [
        ("old_index", &|| Box::new(old())),
        ("cache_aware", &|| Box::new(new(PolicyKind::CacheAware))),
    ];
    for (name, make) in cases {
        let mut idx = make();
        for t in texts {
            for turn in 1..=TURNS {
                idx.route(&t[..turn * TURN]);
            }
        }
        let (bytes, chunks) = idx.bytes();
        let kib = SESSIONS * TURNS * TURN / 1024;
        println!(
            "prefix_index={name} sessions={SESSIONS} prompt_kib_held={kib} chunks={chunks} \
             index_bytes={bytes} bytes_per_chunk={:.1} bytes_per_kib_of_prompt={:.1}",
            bytes as f64 / chunks as f64,
            bytes as f64 / kib as f64
        );
        drop(idx);
    }
}

fn main() {
    let texts = sessions();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &texts);
    c.final_summary();
    if std::env::var_os("BERTH_BENCH_SKIP_MEMORY").is_none() {
        memory(&texts);
    }
}
