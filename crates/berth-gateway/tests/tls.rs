//! TLS: HTTPS towards clients (`--tls-cert-path`/`--tls-key-path`), `https://` workers verified
//! against `--ca-cert-paths`, and mTLS (`--client-cert-path`/`--client-key-path`), with a CA
//! and certificates made at test time and sim workers serving HTTPS.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::{GatewayConfig, TlsSettings};
use berth_sim::{SimHandle, SimWorker};
use common::tls::{Pki, https};
use common::*;
use http::Method;

async fn tls_sim(id: &str, pem: berth_sim::TlsPem) -> SimHandle {
    SimWorker::builder()
        .worker_id(id)
        .model("sim-model")
        .time_scale(0.0)
        .tls(pem)
        .spawn_on_loopback()
        .await
}

async fn chat_https(g: &Running, ca_pem: &str) -> Resp {
    https(
        g.gw.addr(),
        ca_pem,
        Method::POST,
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        chat_body(None).to_string(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn https_clients_reach_https_workers_verified_by_the_ca() {
    let pki = Pki::new("e2e");
    let w = tls_sim("w0", Pki::sim_tls(&pki.server(), None)).await;
    assert!(w.url().starts_with("https://127.0.0.1:"), "{}", w.url());
    let gw_id = pki.server();
    let mut c = config(std::slice::from_ref(&w));
    c.tls = TlsSettings {
        cert_path: Some(pki.write("gw.pem", &gw_id.cert_pem)),
        key_path: Some(pki.write("gw.key", &gw_id.key_pem)),
        ca_cert_paths: vec![pki.write("ca.pem", &pki.ca_pem)],
        ..TlsSettings::default()
    };
    let g = start(c).await;
    // The worker was probed over TLS and is in routing.
    let r = https(g.gw.addr(), &pki.ca_pem, Method::GET, "/workers", &[], "")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["workers"][0]["is_healthy"], true, "{:?}", r.body);
    for _ in 0..3 {
        let r = chat_https(&g, &pki.ca_pem).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.worker(), Some(w.url()));
    }
    let models = https(g.gw.addr(), &pki.ca_pem, Method::GET, "/v1/models", &[], "")
        .await
        .unwrap();
    assert_eq!(models.json()["data"][0]["id"], "sim-model");
    // Plain HTTP on the HTTPS port gets no HTTP answer.
    let plain = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Full<bytes::Bytes>>()
            .get(format!("http://{}/health", g.gw.addr()).parse().unwrap()),
    )
    .await
    .unwrap();
    assert!(plain.is_err(), "plain HTTP must not be served: {plain:?}");
    // A client that does not trust the gateway's CA fails the handshake.
    let other = Pki::new("e2e-other");
    let refused = https(g.gw.addr(), &other.ca_pem, Method::GET, "/health", &[], "").await;
    assert!(refused.is_err(), "{:?}", refused.map(|r| r.status));
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_worker_whose_certificate_the_ca_does_not_sign_stays_out_of_routing() {
    let trusted = Pki::new("trusted");
    let rogue = Pki::new("rogue");
    let good = tls_sim("good", Pki::sim_tls(&trusted.server(), None)).await;
    let bad = tls_sim("bad", Pki::sim_tls(&rogue.server(), None)).await;
    let mut c = config(&[]);
    c.worker_urls = vec![good.url(), bad.url()];
    c.tls.ca_cert_paths = vec![trusted.write("ca.pem", &trusted.ca_pem)];
    let g = start(c).await;
    assert!(healthy(&g.client, &good.url()).await);
    assert!(!healthy(&g.client, &bad.url()).await);
    for _ in 0..6 {
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.worker(), Some(good.url()), "never the unverified worker");
    }
    assert_eq!(bad.requests(), 0);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn mtls_workers_accept_the_gateway_only_with_its_client_certificate() {
    let pki = Pki::new("mtls");
    let w = tls_sim("w0", Pki::sim_tls(&pki.server(), Some(&pki.ca_pem))).await;
    let ca = pki.write("ca.pem", &pki.ca_pem);

    // Without a client certificate the worker refuses the handshake: never healthy.
    let mut c = config(std::slice::from_ref(&w));
    c.tls.ca_cert_paths = vec![ca.clone()];
    let g = start(c).await;
    assert!(!healthy(&g.client, &w.url()).await);
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code().as_deref(), Some("no_available_workers"));
    g.gw.shutdown().await;

    // With one signed by the worker's client CA it is in routing.
    let id = pki.client();
    let mut c = config(std::slice::from_ref(&w));
    c.tls.ca_cert_paths = vec![ca];
    c.tls.client_cert_path = Some(pki.write("client.pem", &id.cert_pem));
    c.tls.client_key_path = Some(pki.write("client.key", &id.key_pem));
    let g = start(c).await;
    assert!(healthy(&g.client, &w.url()).await);
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.worker(), Some(w.url()));
    g.gw.shutdown().await;
}

#[tokio::test]
async fn tls_settings_that_cannot_work_refuse_to_start_naming_the_flag() {
    let pki = Pki::new("refusals");
    let w = sims(1).await;
    let id = pki.server();
    let cert = pki.write("gw.pem", &id.cert_pem);
    let key = pki.write("gw.key", &id.key_pem);
    let garbage = pki.write("garbage.pem", "not a certificate");
    let missing = pki.dir.join("missing.pem");
    let cases: Vec<(TlsSettings, &str)> = vec![
        (
            TlsSettings {
                cert_path: Some(cert.clone()),
                ..TlsSettings::default()
            },
            "--tls-cert-path: needs --tls-key-path",
        ),
        (
            TlsSettings {
                client_key_path: Some(key.clone()),
                ..TlsSettings::default()
            },
            "--client-key-path: needs --client-cert-path",
        ),
        (
            TlsSettings {
                cert_path: Some(missing.clone()),
                key_path: Some(key.clone()),
                ..TlsSettings::default()
            },
            "--tls-cert-path",
        ),
        (
            TlsSettings {
                cert_path: Some(cert.clone()),
                key_path: Some(garbage.clone()),
                ..TlsSettings::default()
            },
            "--tls-key-path",
        ),
        (
            TlsSettings {
                ca_cert_paths: vec![garbage],
                ..TlsSettings::default()
            },
            "--ca-cert-paths",
        ),
    ];
    for (tls, needle) in cases {
        let mut c: GatewayConfig = config(&w);
        c.tls = tls;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = berth_gateway::Gateway::builder(c)
            .listener(listener)
            .start()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
}
