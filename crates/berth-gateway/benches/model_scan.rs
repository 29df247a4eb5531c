//! Cost of scanning a streamed body for its top-level `model` (issue #11 part 4), per request,
//! against the baseline of merely touching every byte (a sum) in the same run.
#![allow(missing_docs, clippy::unwrap_used)]

use berth_gateway::model_scan::ModelScan;
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

criterion_group!(benches, bench);
criterion_main!(benches);
