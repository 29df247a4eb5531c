//! File service discovery (`--discovery-provider file`): real sim workers on loopback, a
//! manifest on disk, and the gateway reconciling its registry to it.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_gateway::{DiscoverySettings, GatewayConfig};
use berth_sim::SimHandle;
use common::*;
use http::Method;

/// A fresh directory for this test's manifest (removed by the caller at the end).
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("berth-discovery-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the manifest atomically (temporary file, then rename), as docs/gateway.md advises.
fn write_manifest(path: &Path, workers: &[&SimHandle]) {
    let list: Vec<_> = workers
        .iter()
        .map(|w| serde_json::json!({ "url": w.url() }))
        .collect();
    let text = serde_json::json!({ "version": 1, "workers": list }).to_string();
    write_raw(path, &text);
}

fn write_raw(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A discovery-only gateway config (no `--worker-urls`) with fast health checks.
fn discovery_config(path: &Path, interval: Duration) -> GatewayConfig {
    let mut c = config(&[]);
    let mut d = DiscoverySettings::file(path);
    d.check_interval = interval;
    c.discovery = Some(d);
    c
}

async fn registered(client: &TestClient) -> Vec<String> {
    let r = client.get("/workers", &[]).await;
    let mut urls: Vec<String> = r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["url"].as_str().unwrap().to_owned())
        .collect();
    urls.sort();
    urls
}

fn urls_of(workers: &[&SimHandle]) -> Vec<String> {
    let mut urls: Vec<String> = workers.iter().map(|w| w.url()).collect();
    urls.sort();
    urls
}

async fn all_healthy(client: &TestClient, want: Vec<String>) -> bool {
    if registered(client).await != want {
        return false;
    }
    for u in &want {
        if !healthy(client, u).await {
            return false;
        }
    }
    true
}

async fn pins(g: &Running, keys: &[String]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for k in keys {
        out.insert(k.clone(), g.client.keyed(k).await);
    }
    out
}

#[tokio::test]
async fn a_manifest_written_after_start_brings_its_workers_into_routing() {
    let w = sims(2).await;
    let dir = temp_dir("appears");
    let path = dir.join("workers.json");
    let g = start(discovery_config(&path, Duration::from_secs(3600))).await;
    let ready = g.client.get("/readiness", &[]).await;
    assert_eq!(ready.status, 503, "no manifest yet, no workers");
    assert!(registered(&g.client).await.is_empty());

    write_manifest(&path, &[&w[0], &w[1]]);
    eventually("both discovered workers healthy", || {
        all_healthy(&g.client, urls_of(&[&w[0], &w[1]]))
    })
    .await;
    assert_eq!(g.client.get("/readiness", &[]).await.status, 200);
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 200);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, r#"smg_discovery_workers_discovered{source="file"}"#),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_discovery_registrations_total{source="file",result="success"}"#
        ),
        Some(2.0)
    );
    g.gw.shutdown().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_change_adds_without_moving_keys_and_a_removal_moves_only_that_workers_keys() {
    let w = sims(3).await;
    let dir = temp_dir("membership");
    let path = dir.join("workers.json");
    write_manifest(&path, &[&w[0], &w[1]]);
    // An hour between full rereads: every change below is picked up by change detection.
    let mut c = discovery_config(&path, Duration::from_secs(3600));
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    eventually("first two workers", || {
        all_healthy(&g.client, urls_of(&[&w[0], &w[1]]))
    })
    .await;

    let keys: Vec<String> = (0..24).map(|i| format!("key-{i}")).collect();
    let before = pins(&g, &keys).await;

    write_manifest(&path, &[&w[0], &w[1], &w[2]]);
    eventually("third worker joins healthy", || {
        all_healthy(&g.client, urls_of(&[&w[0], &w[1], &w[2]]))
    })
    .await;
    assert_eq!(
        pins(&g, &keys).await,
        before,
        "adding a worker moves no key"
    );
    let fresh: Vec<String> = (0..30).map(|i| format!("fresh-{i}")).collect();
    assert!(
        pins(&g, &fresh).await.values().any(|u| *u == w[2].url()),
        "the added worker receives traffic"
    );

    let gone = w[0].url();
    write_manifest(&path, &[&w[1], &w[2]]);
    eventually("removed worker leaves", || async {
        !registered(&g.client).await.contains(&gone)
    })
    .await;
    let after = pins(&g, &keys).await;
    let mut moved = 0;
    for k in &keys {
        if before[k] == gone {
            assert_ne!(after[k], gone);
            moved += 1;
        } else {
            assert_eq!(after[k], before[k], "{k} was not on the removed worker");
        }
    }
    assert!(moved > 0, "some key was on the removed worker");
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_discovery_deregistrations_total{source="file",reason="reconciled"}"#
        ),
        Some(1.0),
        "{m}"
    );
    g.gw.shutdown().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_invalid_manifest_keeps_the_last_good_set_is_logged_once_and_counted() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (logs, _guard) = logs::capture_debug_logs();
    rt.block_on(async {
        let w = sims(2).await;
        let dir = temp_dir("invalid");
        let path = dir.join("workers.json");
        write_manifest(&path, &[&w[0]]);
        // A short interval: the broken file is reread many times while the test waits.
        let g = start(discovery_config(&path, Duration::from_millis(50))).await;
        eventually("first worker", || all_healthy(&g.client, urls_of(&[&w[0]]))).await;

        write_raw(&path, r#"{"version": 1, "workers": [{"url": "#);
        eventually("the error is counted", || async {
            let m = metrics(&g.gw).await;
            sample(
                &m,
                r#"berth_discovery_errors_total{source="file",reason="invalid"}"#,
            ) == Some(1.0)
        })
        .await;
        // Several full rereads of the same broken file later (counted from the log):
        let seen = full_looks(&logs);
        eventually("three more full looks", || async {
            full_looks(&logs) >= seen + 3
        })
        .await;
        assert_eq!(
            g.client.chat(&[], chat_body(None)).await.worker(),
            Some(w[0].url())
        );
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(
                &m,
                r#"berth_discovery_errors_total{source="file",reason="invalid"}"#
            ),
            Some(1.0),
            "counted once: {m}"
        );
        assert_eq!(
            registered(&g.client).await,
            [w[0].url()],
            "last good set kept"
        );

        // A version the gateway does not know is invalid too, and is a new problem.
        write_raw(&path, r#"{"version": 2, "workers": []}"#);
        eventually("second error counted", || async {
            let m = metrics(&g.gw).await;
            sample(
                &m,
                r#"berth_discovery_errors_total{source="file",reason="invalid"}"#,
            ) == Some(2.0)
        })
        .await;
        assert_eq!(registered(&g.client).await, [w[0].url()]);

        // Fixed: the new set applies.
        write_manifest(&path, &[&w[1]]);
        eventually("fixed manifest applies", || {
            all_healthy(&g.client, urls_of(&[&w[1]]))
        })
        .await;
        g.gw.shutdown().await;
        std::fs::remove_dir_all(dir).unwrap();
    });
    let text = logs.text();
    let lines = text
        .lines()
        .filter(|l| l.contains("keeping the last good worker set"))
        .count();
    assert_eq!(lines, 2, "one line per distinct problem:\n{text}");
    assert!(text.contains("invalid manifest"), "{text}");
}

/// Full looks the discovery loop has logged so far.
fn full_looks(logs: &logs::LogBuf) -> usize {
    logs.text()
        .lines()
        .filter(|l| l.contains("service discovery full look"))
        .count()
}

#[test]
fn static_workers_are_left_alone_and_a_deleted_discovered_worker_comes_back_on_the_interval() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (logs, _guard) = logs::capture_debug_logs();
    rt.block_on(static_workers_are_left_alone(&logs));
}

async fn static_workers_are_left_alone(logs: &logs::LogBuf) {
    let w = sims(2).await;
    let dir = temp_dir("static");
    let path = dir.join("workers.json");
    // w0 is a --worker-urls worker and is also listed; w1 only in the manifest.
    write_manifest(&path, &[&w[0], &w[1]]);
    let mut c = discovery_config(&path, Duration::from_millis(100));
    c.worker_urls = vec![w[0].url()];
    let g = start(c).await;
    eventually("both workers", || {
        all_healthy(&g.client, urls_of(&[&w[0], &w[1]]))
    })
    .await;
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, r#"smg_discovery_workers_discovered{source="file"}"#),
        Some(1.0),
        "discovery owns only the worker it added: {m}"
    );

    // The file does not change; the periodic reread restores a discovered worker removed by hand.
    let path_w1 = format!(
        "/workers/{}",
        w[1].url().replace(':', "%3A").replace('/', "%2F")
    );
    let r = g.client.send(Method::DELETE, &path_w1, &[], "").await;
    assert_eq!(r.status, 200);
    eventually("re-added by the interval reread", || {
        all_healthy(&g.client, urls_of(&[&w[0], &w[1]]))
    })
    .await;

    // Leaving the manifest removes the discovered worker, never the static one.
    write_raw(&path, r#"{"version": 1, "workers": []}"#);
    eventually("discovered worker removed", || async {
        registered(&g.client).await == [w[0].url()]
    })
    .await;
    // several full rereads of the manifest later, the static worker is still there
    let seen = full_looks(logs);
    eventually("three more full looks", || async {
        full_looks(logs) >= seen + 3
    })
    .await;
    assert_eq!(registered(&g.client).await, [w[0].url()]);
    g.gw.shutdown().await;
    std::fs::remove_dir_all(dir).unwrap();
}
