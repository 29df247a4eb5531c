//! Issue #11 part 2, the bench side: a server that closes its connection after every streamed
//! reply costs no request (the bench re-sends on a new connection), and a run with failed
//! requests exits non-zero unless `--allow-failed-requests` is given.
#![allow(clippy::unwrap_used)]

use berth_bench::cli::Args;
use berth_bench::{BenchConfig, BenchError, execute};
use berth_sim::SimWorker;

const SMALL: [&str; 5] = [
    "--quiet",
    "--synthetic-input-tokens-mean",
    "4",
    "--output-tokens-mean",
    "2",
];

fn args(url: &str, extra: &[&str]) -> Args {
    let mut flags = vec!["--url", url];
    flags.extend_from_slice(&SMALL);
    flags.extend_from_slice(extra);
    Args::from_flags(flags).unwrap()
}

#[tokio::test]
async fn streams_from_a_server_that_closes_after_each_one_all_succeed() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(0)
        .spawn_on_loopback()
        .await;
    sim.set_close_after_stream(true);
    let a = args(
        &sim.url(),
        &["--streaming", "--num-sessions", "10", "--concurrency", "2"],
    );
    let out = execute(
        BenchConfig::try_from_args(&a).unwrap(),
        std::future::pending(),
    )
    .await
    .unwrap();
    assert_eq!(out.summary.requests, 40);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    assert!(
        sim.stale_connections_cut() > 0,
        "the server never cut a reused connection: the test proves nothing"
    );
}

#[tokio::test]
async fn failed_requests_make_the_run_fail_unless_allowed() {
    let sim = SimWorker::builder()
        .time_scale(0.0)
        .record_capacity(0)
        .spawn_on_loopback()
        .await;
    sim.set_error_rate(0.5, 500);
    let run = |extra: &'static [&'static str]| {
        let mut flags = vec!["--num-sessions", "4", "--concurrency", "1"];
        flags.extend_from_slice(extra);
        berth_bench::cli::run(args(&sim.url(), &flags))
    };
    match run(&[]).await {
        Err(BenchError::RequestsFailed {
            failed, requests, ..
        }) => {
            assert!(failed > 0 && failed < requests, "{failed} of {requests}");
        }
        other => panic!("expected RequestsFailed, got {other:?}"),
    }
    run(&["--allow-failed-requests"]).await.unwrap();
}
