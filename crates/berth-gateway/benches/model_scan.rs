//! Cost of scanning a streamed body for its top-level `model` (issue #11 part 4), per request,
//! against the baseline of merely touching every byte (a sum) in the same run.
#![allow(missing_docs, clippy::unwrap_used)]

use berth_gateway::model_scan::{Field, ModelScan};

/// The scan as it was before issue #19 kept key members (commit ba0eef1, unchanged but for its
/// test module): the same-run baseline of `scan_before_keys`.
#[path = "baseline/model_scan_ba0eef1.rs"]
#[allow(dead_code, unreachable_pub)]
mod before;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// `quotes`: a quoted word in every sentence (pessimistic: each quote is escaped, and the scan
/// stops at every backslash and quote inside strings).
fn body(words: usize, model_first: bool, quotes: bool) -> Vec<u8> {
    let sentence = if quotes {
        "lorem \"ipsum\" dolor sit amet, "
    } else {
        "lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    };
    let text = sentence.repeat(words / 8 + 1);
    let messages = serde_json::json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": text},
    ]);
    let s = if model_first {
        format!(
            r#"{{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":{messages},"max_tokens":64,"stream":true}}"#
        )
    } else {
        // The OpenAI Python SDK's order: messages first, model after them.
        format!(
            r#"{{"messages":{messages},"model":"meta-llama/Llama-3.1-8B-Instruct","max_tokens":64,"stream":true}}"#
        )
    };
    s.into_bytes()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("model_scan");
    for words in [64usize, 1024, 16_384] {
        for (model_first, quotes) in [(true, false), (false, false), (false, true)] {
            let b = body(words, model_first, quotes);
            let order = if model_first {
                "model_first"
            } else {
                "model_last"
            };
            let q = if quotes { "_quotes" } else { "" };
            let label = format!("{}B/{order}{q}", b.len());
            g.throughput(Throughput::Bytes(b.len() as u64));
            g.bench_with_input(BenchmarkId::new("scan", &label), &b, |bench, b| {
                bench.iter(|| {
                    let mut s = ModelScan::new();
                    // 16 KiB frames, as a client's body arrives.
                    for chunk in b.chunks(16 * 1024) {
                        if s.feed(std::hint::black_box(chunk)) {
                            break;
                        }
                    }
                    s.finish().clone()
                });
            });
            g.bench_with_input(
                BenchmarkId::new("scan_before_keys", &label),
                &b,
                |bench, b| {
                    bench.iter(|| {
                        let mut s = before::ModelScan::new();
                        for chunk in b.chunks(16 * 1024) {
                            if s.feed(std::hint::black_box(chunk)).is_some() {
                                break;
                            }
                        }
                        s.finish().clone()
                    });
                },
            );
            g.bench_with_input(
                BenchmarkId::new("touch_every_byte", &label),
                &b,
                |bench, b| {
                    bench.iter(|| {
                        std::hint::black_box(b)
                            .iter()
                            .fold(0u8, |a, x| a.wrapping_add(*x))
                    });
                },
            );
        }
    }
    g.finish();
}

/// A chat body keyed by a body member: `prompt_cache_key` after the messages (the OpenAI Python
/// SDK's order: `messages` first), or `nvext` first (Dynamo's bench puts it first).
fn keyed_body(words: usize, key_first: bool) -> Vec<u8> {
    let text = "lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(words / 8 + 1);
    let messages = serde_json::json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": text},
    ]);
    let s = if key_first {
        format!(
            r#"{{"nvext":{{"session_control":{{"session_id":"agent-1","action":"bind","timeout":60}}}},"messages":{messages},"model":"m","max_tokens":64,"stream":true}}"#
        )
    } else {
        format!(
            r#"{{"messages":{messages},"model":"m","max_tokens":64,"prompt_cache_key":"conv-8f3a","stream":true}}"#
        )
    };
    s.into_bytes()
}

/// Scans `b` in 16 KiB frames with `s` until it is done or the body ends.
fn scan_with(mut s: ModelScan, b: &[u8]) -> ModelScan {
    for chunk in b.chunks(16 * 1024) {
        if s.feed(std::hint::black_box(chunk)) {
            break;
        }
    }
    s.finish();
    s
}

/// Body key sources (issue #19): the scan keeping every key member to the body's end (what a
/// body held for its key costs at most), the `nvext` watch on a streamed body, and the
/// buffered path's baseline, one serde pass over the whole body.
fn bench_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("key_scan");
    for words in [64usize, 1024, 16_384] {
        for key_first in [false, true] {
            let b = keyed_body(words, key_first);
            let order = if key_first { "nvext_first" } else { "key_last" };
            let label = format!("{}B/{order}", b.len());
            g.throughput(Throughput::Bytes(b.len() as u64));
            g.bench_with_input(BenchmarkId::new("scan_keys", &label), &b, |bench, b| {
                bench.iter(|| scan_with(ModelScan::with_fields(&Field::ALL), b));
            });
            g.bench_with_input(BenchmarkId::new("watch_nvext", &label), &b, |bench, b| {
                bench.iter(|| {
                    let mut s = ModelScan::new();
                    s.want_only(false, &[Field::Nvext]);
                    scan_with(s, b)
                });
            });
            g.bench_with_input(BenchmarkId::new("serde_pass", &label), &b, |bench, b| {
                bench.iter(|| {
                    serde_json::from_slice::<serde::de::IgnoredAny>(std::hint::black_box(b))
                        .unwrap()
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench, bench_keys);
criterion_main!(benches);
