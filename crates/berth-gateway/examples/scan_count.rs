//! A/B of the streamed-body model scan against its pre-#19 version by user CPU time (steadier
//! than criterion's wall time on a shared machine): scans one chat body (`model` after the
//! messages) 2,000,000 times.
//!
//! `cargo build --release -p berth-gateway --example scan_count`, then
//! `/usr/bin/time -f %U target/release/examples/scan_count old|new WORDS`, alternating old and
//! new (docs/benchmarks.md).
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../benches/baseline/model_scan_ba0eef1.rs"]
#[allow(dead_code, unreachable_pub)]
mod before;

use berth_gateway::model_scan::{Found, ModelScan};

fn main() {
    let which = std::env::args().nth(1).unwrap();
    let words: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let text = "lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(words / 8 + 1);
    let messages = serde_json::json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": text},
    ]);
    let b = format!(
        r#"{{"messages":{messages},"model":"meta-llama/Llama-3.1-8B-Instruct","max_tokens":64,"stream":true}}"#
    )
    .into_bytes();
    let mut found = 0usize;
    for _ in 0..2_000_000 {
        if which == "new" {
            let mut s = ModelScan::new();
            for c in b.chunks(16 * 1024) {
                if s.feed(std::hint::black_box(c)) {
                    break;
                }
            }
            found += usize::from(matches!(s.finish(), Found::Model(_)));
        } else {
            let mut s = before::ModelScan::new();
            for c in b.chunks(16 * 1024) {
                if s.feed(std::hint::black_box(c)).is_some() {
                    break;
                }
            }
            found += usize::from(matches!(s.finish(), before::Found::Model(_)));
        }
    }
    println!("{found} scans of {} bytes found the model", b.len());
}
