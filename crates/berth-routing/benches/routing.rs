//! Routing-core benchmarks (criterion): the hot paths of a decision, plus two figures that
//! are not timings (bytes per pin, longest stall during an idle sweep), printed at the end.
//!
//! Run: `cargo bench -p berth-routing` (add `-- --quick` for a shorter run). The baseline,
//! measured in the same run, is what SMG's map does per decision: format a scoped string key
//! and look it up in a `Mutex<HashMap<String, String>>`.

#![allow(missing_docs, clippy::unwrap_used)]
// A benchmark measures wall time; the core itself never reads a clock.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_routing::{
    AssignmentMode, HeaderList, Leg, PolicyKind, Rng, RouteRequest, Router, RouterOptions,
    WorkerEntry, WorkerId, WorkerSnapshot,
};
use criterion::{BenchmarkId, Criterion};

fn fleet(n: usize) -> WorkerSnapshot {
    WorkerSnapshot::new(
        (0..n)
            .map(|i| WorkerEntry {
                id: WorkerId(i as u32),
                url: format!("http://10.0.{}.{}:30000", i / 250, i % 250).into(),
                models: vec![Arc::from("llama")],
                available: true,
                stats: Arc::default(),
            })
            .collect(),
    )
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("conv-{i:08x}-5b1c")).collect()
}

/// Writes key `i` (the same text as `keys()[i]`) into a stack buffer. A gateway reads the key
/// from the request it just received, which is in cache; fetching it from a 1M-entry `Vec<String>`
/// would add two cache misses of the harness's own to every iteration.
fn key_into(buf: &mut [u8; 18], i: usize) -> &str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf[..5].copy_from_slice(b"conv-");
    for d in 0..8 {
        buf[5 + d] = HEX[(i >> (28 - 4 * d)) & 0xf];
    }
    buf[13..].copy_from_slice(b"-5b1c");
    std::str::from_utf8(buf).unwrap()
}

fn route(
    r: &Router,
    s: &WorkerSnapshot,
    key: &str,
    text: Option<&str>,
    now: Duration,
    rng: &mut Rng,
) -> WorkerId {
    let pairs = [("x-smg-routing-key", key.as_bytes())];
    let h = HeaderList(&pairs);
    let req = RouteRequest {
        rid: None,
        headers: &h,
        body: None,
        model: Some("llama"),
        leg: Leg::Regular,
        text,
        tokens: None,
        prefix: None,
        exclude: &[],
        stream: None,
        loads: None,
        feedback_read: false,
    };
    r.route(&req, s, now, rng).unwrap().worker
}

fn warm(r: &Router, s: &WorkerSnapshot, keys: &[String], rng: &mut Rng) {
    for k in keys {
        route(r, s, k, None, Duration::ZERO, rng);
    }
}

fn sticky_router(policy: PolicyKind, mode: Option<AssignmentMode>, max: usize) -> Router {
    Router::new(&RouterOptions {
        policy,
        routing_key_override: policy != PolicyKind::Manual,
        assignment_mode: mode,
        max_sticky_keys: max,
        ..RouterOptions::default()
    })
    .unwrap()
}

fn bench_sticky_hit(c: &mut Criterion) {
    let ks = keys(1_000_000);
    let mut g = c.benchmark_group("sticky_hit_1M_pins");
    for n in [4usize, 16, 64, 256] {
        let s = fleet(n);
        let r = sticky_router(PolicyKind::Manual, None, 0);
        let mut rng = Rng::seeded(1);
        warm(&r, &s, &ks, &mut rng);
        assert_eq!(key_into(&mut [0; 18], 77), ks[77]);
        let mut i = 0usize;
        let mut buf = [0u8; 18];
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                i = (i + 7919) % ks.len();
                let key = key_into(&mut buf, i);
                black_box(route(&r, &s, key, None, Duration::ZERO, &mut rng))
            })
        });
    }
    // The same decision on one key that stays in cache: the decision's own cost, without the
    // memory latency of a random key among 1M.
    let s = fleet(16);
    let r = sticky_router(PolicyKind::Manual, None, 0);
    let mut rng = Rng::seeded(1);
    warm(&r, &s, &ks, &mut rng);
    g.bench_function("hot_key_16", |b| {
        b.iter(|| black_box(route(&r, &s, &ks[42], None, Duration::ZERO, &mut rng)))
    });
    // Baseline: a string-keyed map under one lock, as SMG's manual policy keeps it.
    let map: Mutex<HashMap<String, String>> = Mutex::new(
        ks.iter()
            .map(|k| {
                (
                    format!("llama:regular:{k}"),
                    "http://10.0.0.1:30000".to_owned(),
                )
            })
            .collect(),
    );
    let mut i = 0usize;
    let mut buf = [0u8; 18];
    g.bench_function("baseline_string_map", |b| {
        b.iter(|| {
            i = (i + 7919) % ks.len();
            let scoped = format!("llama:regular:{}", key_into(&mut buf, i));
            let m = map.lock().unwrap();
            black_box(m.get(&scoped).cloned())
        })
    });
    g.finish();
}

fn bench_vacant_and_respill(c: &mut Criterion) {
    let s = fleet(16);
    let mut g = c.benchmark_group("pinned_paths");
    // vacant: a new key each time, in a table bounded at 1M (so it stays warm-sized)
    let r = sticky_router(PolicyKind::Manual, Some(AssignmentMode::MinLoad), 1_000_000);
    let mut rng = Rng::seeded(2);
    let mut n = 0u64;
    g.bench_function("vacant_min_load", |b| {
        b.iter(|| {
            n += 1;
            let k = format!("new-{n}");
            black_box(route(&r, &s, &k, None, Duration::ZERO, &mut rng))
        })
    });
    // cap respill: one key with 2 requests held in flight; each decision re-places it
    let r = sticky_router(PolicyKind::RoundRobin, Some(AssignmentMode::MinLoad), 0);
    let pairs = [("x-smg-routing-key", &b"hot"[..])];
    let h = HeaderList(&pairs);
    let req = RouteRequest {
        rid: None,
        headers: &h,
        body: None,
        model: Some("llama"),
        leg: Leg::Regular,
        text: None,
        tokens: None,
        prefix: None,
        exclude: &[],
        loads: None,
        feedback_read: false,
        stream: None,
    };
    let _held: Vec<_> = (0..2)
        .map(|_| r.route(&req, &s, Duration::ZERO, &mut rng).unwrap())
        .collect();
    g.bench_function("cap_respill", |b| {
        b.iter(|| black_box(r.route(&req, &s, Duration::ZERO, &mut rng).unwrap().worker))
    });
    g.finish();
}

fn bench_policies(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy_pick");
    let ks = keys(100_000);
    for n in [16usize, 256] {
        let s = fleet(n);
        let r = Router::new(&RouterOptions {
            policy: PolicyKind::ConsistentHashing,
            ..RouterOptions::default()
        })
        .unwrap();
        let mut rng = Rng::seeded(3);
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("consistent_hashing", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % ks.len();
                black_box(route(&r, &s, &ks[i], None, Duration::ZERO, &mut rng))
            })
        });
    }
    // cache_aware over 10k cached prefixes of 2k characters, 16 workers
    let s = fleet(16);
    let r = Router::new(&RouterOptions {
        policy: PolicyKind::CacheAware,
        max_tree_size: 1 << 26,
        ..RouterOptions::default()
    })
    .unwrap();
    let mut rng = Rng::seeded(4);
    let texts: Vec<String> = (0..10_000)
        .map(|i| {
            let head = format!("system prompt {:04} | ", i % 50);
            let body = format!("conversation {i} says hello and continues. ");
            let mut t = head.repeat(20);
            while t.len() < 2000 {
                t.push_str(&body);
            }
            t.truncate(2000);
            t
        })
        .collect();
    for t in &texts {
        route_keyless(&r, &s, t, &mut rng);
    }
    let mut i = 0;
    g.bench_function("cache_aware_10k_prefixes_2k_chars", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            black_box(route_keyless(&r, &s, &texts[i], &mut rng))
        })
    });
    g.finish();
}

fn route_keyless(r: &Router, s: &WorkerSnapshot, text: &str, rng: &mut Rng) -> WorkerId {
    let h = HeaderList(&[]);
    let req = RouteRequest {
        rid: None,
        headers: &h,
        body: None,
        model: Some("llama"),
        leg: Leg::Regular,
        text: Some(text),
        tokens: None,
        prefix: None,
        loads: None,
        feedback_read: false,
        exclude: &[],
        stream: None,
    };
    r.route(&req, s, Duration::ZERO, rng).unwrap().worker
}

/// Bytes per pin and the longest stall of a sweep step (the longest time one shard is locked,
/// so the longest any decision can wait for the sweep).
fn memory_and_sweep() {
    let s = fleet(16);
    for n in [1_000_000usize, 10_000_000] {
        let r = Router::new(&RouterOptions {
            policy: PolicyKind::Manual,
            max_idle_secs: 60,
            ..RouterOptions::default()
        })
        .unwrap();
        let mut rng = Rng::seeded(5);
        for i in 0..n {
            // half the pins are old (t=0), half recent (t=100)
            let now = Duration::from_secs(if i % 2 == 0 { 0 } else { 100 });
            route(&r, &s, &format!("k{i}"), None, now, &mut rng);
        }
        let bytes = r.pin_memory_bytes();
        println!(
            "pin_table pins={n} bytes={bytes} bytes_per_pin={:.1}",
            bytes as f64 / n as f64
        );
        let mut longest = Duration::ZERO;
        let mut removed = 0;
        let started = Instant::now();
        loop {
            let t = Instant::now();
            let step = r.sweep_step(Duration::from_secs(100), &s);
            longest = longest.max(t.elapsed());
            removed += step.removed_idle;
            if step.finished {
                break;
            }
        }
        println!(
            "idle_sweep pins={n} removed={removed} total={:?} longest_step_stall={:?}",
            started.elapsed(),
            longest
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_sticky_hit(&mut c);
    bench_vacant_and_respill(&mut c);
    bench_policies(&mut c);
    c.final_summary();
    if std::env::var_os("BERTH_BENCH_SKIP_MEMORY").is_none() {
        memory_and_sweep();
    }
}
