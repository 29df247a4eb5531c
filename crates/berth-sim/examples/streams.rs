//! Opens `--streams` concurrent streamed chat requests (one connection each), waits until every
//! one has received its first event, reports, then holds them open for `--hold-secs`. Used to
//! measure the worker's memory with many open streams. Loopback only; not a test.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Stream holder flags.
#[derive(Parser, Debug)]
struct Cli {
    /// Worker address.
    #[arg(long, default_value = "127.0.0.1:30000")]
    addr: SocketAddr,
    /// Streams to open.
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// Seconds to hold them once all are open.
    #[arg(long, default_value_t = 20)]
    hold_secs: u64,
}

const BODY: &str = r#"{"model":"sim-model","messages":[{"role":"user","content":"keep streaming please"}],"max_tokens":100000,"stream":true}"#;

async fn open(
    addr: SocketAddr,
    opened: Arc<AtomicUsize>,
    connecting: Arc<Semaphore>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let permit = connecting.acquire_owned().await?;
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = http::Request::post("/v1/chat/completions")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(BODY.as_bytes())))?;
    let resp = sender.send_request(req).await?;
    let mut body = resp.into_body();
    body.frame().await.ok_or("stream ended early")??;
    drop(permit);
    opened.fetch_add(1, Ordering::Relaxed);
    // Keep reading so the stream stays live.
    while let Some(frame) = body.frame().await {
        frame?;
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let opened = Arc::new(AtomicUsize::new(0));
    let connecting = Arc::new(Semaphore::new(256));
    let start = Instant::now();
    for _ in 0..cli.streams {
        let (opened, connecting) = (Arc::clone(&opened), Arc::clone(&connecting));
        tokio::spawn(async move {
            if let Err(err) = open(cli.addr, opened, connecting).await {
                eprintln!("stream failed: {err}");
            }
        });
    }
    // Bounded wait for every stream's first event.
    for _ in 0..6000 {
        if opened.load(Ordering::Relaxed) >= cli.streams {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "open_streams={} of {} after {:.1}s; holding {}s",
        opened.load(Ordering::Relaxed),
        cli.streams,
        start.elapsed().as_secs_f64(),
        cli.hold_secs
    );
    tokio::time::sleep(Duration::from_secs(cli.hold_secs)).await;
    println!("done, open_streams={}", opened.load(Ordering::Relaxed));
}
