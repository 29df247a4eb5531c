//! Engine tests under a paused tokio clock: delays are virtual, so orderings are exact and the
//! tests never wait on wall-clock time.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::tokenize::{generate_output, tokenize};

fn engine(max_running: usize) -> Arc<Engine> {
    Arc::new(Engine::new(LatencyModel::default(), 100_000, max_running))
}

/// Runs a request to completion and returns (time to first token, cached tokens).
async fn run(engine: &Arc<Engine>, prompt: &str, out: u32) -> (Duration, u64, String) {
    let start = Instant::now();
    let tokens = tokenize(prompt);
    let mut job = engine.admit("m", tokens).await.unwrap();
    job.prefill(1.0).await;
    job.decode_step(1.0).await;
    let ttft = start.elapsed();
    for _ in 1..out {
        job.decode_step(1.0).await;
    }
    let cached = job.cached_tokens();
    let (text, output) = generate_output(job.prompt(), out);
    job.finish(&output);
    (ttft, cached, text)
}

fn long_prompt(salt: &str) -> String {
    format!(
        "<|im_start|>user\n{salt} {}<|im_end|>\n<|im_start|>assistant\n",
        "word ".repeat(2000)
    )
}

#[tokio::test(start_paused = true)]
async fn a_cached_prefix_starts_sooner() {
    let engine = engine(8);
    let prompt = long_prompt("a");
    let (cold, cached_cold, answer) = run(&engine, &prompt, 8).await;
    assert_eq!(cached_cold, 0);
    let turn2 = format!("{prompt}{answer}<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n");
    let (warm, cached_warm, _) = run(&engine, &turn2, 8).await;
    assert!(cached_warm > 0);
    assert!(warm < cold, "warm {warm:?} should beat cold {cold:?}");
}

#[tokio::test(start_paused = true)]
async fn a_full_worker_queues_and_gets_slower() {
    let engine = engine(1);
    let start = Instant::now();
    let first = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move { run(&engine, &long_prompt("x"), 4).await.0 }
    });
    tokio::task::yield_now().await;
    let second = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move { run(&engine, &long_prompt("y"), 4).await.0 }
    });
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert!(
        second > first,
        "queued request's TTFT {second:?} exceeds {first:?}"
    );
    assert!(start.elapsed() >= first * 2);
    assert_eq!(engine.running(), 0);
    assert_eq!(engine.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn prefill_is_serialized() {
    let engine = engine(8);
    let a = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move { run(&engine, &long_prompt("p"), 1).await.0 }
    });
    let b = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move { run(&engine, &long_prompt("q"), 1).await.0 }
    });
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let (fast, slow) = if a < b { (a, b) } else { (b, a) };
    assert!(
        slow >= fast * 2 - Duration::from_millis(20),
        "{slow:?} vs {fast:?}"
    );
}

#[tokio::test]
async fn time_scale_zero_is_instant_and_dropped_jobs_release() {
    let engine = Arc::new(Engine::new(
        LatencyModel {
            time_scale: 0.0,
            ..LatencyModel::default()
        },
        1_000,
        2,
    ));
    let job = engine
        .admit("m", tokenize(&"abcd ".repeat(100)))
        .await
        .unwrap();
    assert_eq!(engine.running(), 1);
    drop(job);
    assert_eq!(engine.running(), 0);
    assert_eq!(engine.queued_tokens(), 0);
}

#[tokio::test(start_paused = true)]
async fn kv_in_use_counts_running_requests_only_as_sglang_does() {
    let engine = engine(8);
    let prompt = long_prompt("u");
    run(&engine, &prompt, 4).await;
    let (cached, _) = engine.kv_tokens();
    assert!(cached > 0, "the finished prompt stays cached");
    assert_eq!(
        engine.kv_in_use_tokens(),
        0,
        "cache nobody uses is evictable"
    );

    let tokens = tokenize(&format!("{prompt} and a new question"));
    let n = tokens.len() as u64;
    let job = engine.admit("m", tokens).await.unwrap();
    assert!(job.cached_tokens() > 0);
    assert_eq!(
        engine.kv_in_use_tokens(),
        n,
        "a running request uses its cached prefix (pinned) and its new tokens"
    );
    drop(job);
    assert_eq!(engine.kv_in_use_tokens(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_job_queued_behind_the_same_prefix_reuses_it_as_engines_do() {
    // Two prompts sharing a long prefix arrive together: the second waits for the prefill lane,
    // then matches what the first one's prefill just cached (SGLang and vLLM match when they
    // schedule the prefill, and cache a prompt when its prefill completes).
    let engine = engine(8);
    let shared = "word ".repeat(2000);
    let a = tokio::spawn({
        let engine = Arc::clone(&engine);
        let prompt = format!("{shared} first question");
        async move { run(&engine, &prompt, 64).await.1 }
    });
    tokio::task::yield_now().await;
    let b = tokio::spawn({
        let engine = Arc::clone(&engine);
        let prompt = format!("{shared} second question");
        async move { run(&engine, &prompt, 4).await.1 }
    });
    let (cached_a, cached_b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(cached_a, 0, "the first one found nothing");
    assert!(
        cached_b >= 1900,
        "the second reuses the first's prefix although the first is still decoding: {cached_b}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_prefilled_prompt_is_pinned_and_counted_once_while_it_decodes() {
    let engine = engine(8);
    let tokens = tokenize(&long_prompt("pin"));
    let n = tokens.len() as u64;
    let mut job = engine.admit("m", tokens).await.unwrap();
    assert_eq!(
        engine.kv_in_use_tokens(),
        n,
        "before its prefill: its new tokens"
    );
    job.prefill(1.0).await;
    let (cached, _) = engine.kv_tokens();
    assert!(
        cached > 0,
        "the prompt is cached once its prefill completes"
    );
    assert_eq!(
        engine.kv_in_use_tokens(),
        n,
        "after its prefill: its pinned blocks plus the partial last block, counted once"
    );
    assert_eq!(job.cached_tokens(), 0, "what it found cached is unchanged");
    drop(job);
    assert_eq!(engine.kv_in_use_tokens(), 0);
    assert_eq!(
        engine.kv_tokens().0,
        cached,
        "its blocks stay cached, unpinned"
    );
}
