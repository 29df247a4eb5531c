//! `--tls-cert-path`, `--tls-key-path`, `--tls-client-ca-path`: pairs are required together,
//! unreadable files and non-PEM content refuse to start naming the flag.
#![allow(clippy::unwrap_used, missing_docs)]

use berth_sim::SimWorker;
use berth_sim::cli::Args;
use clap::{Args as _, FromArgMatches as _};

fn parse(argv: &[&str]) -> Args {
    let m = Args::augment_args(clap::Command::new("sim-worker"))
        .try_get_matches_from(std::iter::once("sim-worker").chain(argv.iter().copied()))
        .unwrap();
    Args::from_arg_matches(&m).unwrap()
}

fn refusal(argv: &[&str]) -> String {
    parse(argv).to_config().unwrap_err().to_string()
}

#[test]
fn tls_flags_come_in_pairs_and_name_the_flag() {
    assert!(parse(&[]).to_config().unwrap().tls.is_none());
    assert!(refusal(&["--tls-cert-path", "c.pem"]).contains("--tls-cert-path"));
    assert!(refusal(&["--tls-key-path", "k.pem"]).contains("--tls-key-path"));
    assert!(refusal(&["--tls-client-ca-path", "ca.pem"]).contains("--tls-client-ca-path"));
    let missing = refusal(&[
        "--tls-cert-path",
        "/nonexistent/c.pem",
        "--tls-key-path",
        "/nonexistent/k.pem",
    ]);
    assert!(missing.contains("--tls-cert-path"), "{missing}");
}

#[tokio::test]
async fn non_pem_material_refuses_to_start() {
    let err = SimWorker::builder()
        .tls(berth_sim::TlsPem {
            cert_chain_pem: "not a certificate".into(),
            key_pem: "not a key".into(),
            client_ca_pem: None,
        })
        .try_spawn(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("--tls-cert-path"), "{err}");
}
