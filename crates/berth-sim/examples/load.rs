//! A bounded load client for the throughput figure: `--connections` keep-alive HTTP/1.1
//! connections, each sending its share of `--requests` small non-streamed requests back to back.
//! Prints requests per second. Loopback only; not a test.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Load client flags.
#[derive(Parser, Debug)]
struct Cli {
    /// Worker address.
    #[arg(long, default_value = "127.0.0.1:30000")]
    addr: SocketAddr,
    /// Concurrent connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Total requests (bounded loop).
    #[arg(long, default_value_t = 200_000)]
    requests: usize,
    /// Request path.
    #[arg(long, default_value = "/v1/chat/completions")]
    path: String,
    /// Request body.
    #[arg(
        long,
        default_value = r#"{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":4}"#
    )]
    body: String,
}

async fn connection(
    cli: &Cli,
    n: usize,
) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    let stream = TcpStream::connect(cli.addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let body = Bytes::from(cli.body.clone());
    let mut errors = 0;
    for _ in 0..n {
        let req = http::Request::post(cli.path.as_str())
            .header("host", cli.addr.to_string())
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))?;
        sender.ready().await?;
        let resp = sender.send_request(req).await?;
        let ok = resp.status().is_success();
        resp.into_body().collect().await?;
        if !ok {
            errors += 1;
        }
    }
    Ok(errors)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let cli: &'static Cli = Box::leak(Box::new(Cli::parse()));
    let per = cli.requests / cli.connections;
    let start = Instant::now();
    let tasks: Vec<_> = (0..cli.connections)
        .map(|_| tokio::spawn(connection(cli, per)))
        .collect();
    let mut errors = 0;
    for t in tasks {
        errors += t.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    let total = per * cli.connections;
    println!(
        "requests={total} errors={errors} connections={} seconds={secs:.3} requests_per_sec={:.0}",
        cli.connections,
        total as f64 / secs
    );
    Ok(())
}
