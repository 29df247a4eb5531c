//! Issue #11 part 3: the log says which start-up workers the gateway still waits for, and when
//! one comes up. (Alone in its test binary: the log capture is per thread.)
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::GatewayConfig;
use berth_sim::SimWorker;
use common::*;
use tokio::net::TcpListener;

// A current-thread runtime and `io_threads = 0`: every gateway task runs on this thread, under
// the thread-local subscriber.
#[tokio::test(flavor = "current_thread")]
async fn the_workers_still_awaited_are_logged_and_so_is_their_arrival() {
    let (logs, _guard) = logs::capture_debug_logs();
    // Accepts into its backlog, answers nothing until a sim is started on it.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut c = GatewayConfig::new(vec![url.clone()]);
    c.health.interval = Duration::from_secs(600);
    c.health.timeout = Duration::from_millis(300);
    c.shutdown_grace = Duration::from_secs(5);
    let g = start(c).await;
    let text = logs.text();
    assert!(
        text.contains("waiting for workers") && text.contains(&url),
        "{text}"
    );
    let sim = SimWorker::builder().time_scale(0.0).spawn(listener);
    let client = &g.client;
    eventually("ready once the worker answers", || async {
        client.get("/readiness", &[]).await.status == 200
    })
    .await;
    let text = logs.text();
    assert!(text.contains("in routing") && text.contains(&url), "{text}");
    g.gw.shutdown().await;
    sim.shutdown().await;
}
