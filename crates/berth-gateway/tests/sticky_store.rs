//! Issue #9: pins shared by every gateway replica through a real Redis (`--sticky-store`).
//! Two in-process gateways with their own pin tables stand for two `berth serve` replicas.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_gateway::{GatewayConfig, StoreSettings};
use berth_sim::SimHandle;
use common::redis::RedisServer;
use common::*;
use http::Method;

/// Manual pins (random placement: replicas without a store disagree on most new keys) shared
/// through `redis`, with a generous timeout (a loaded CI machine must not fall back to local
/// placement) and a fast refresh.
pub fn store_config(w: &[SimHandle], redis: &RedisServer) -> GatewayConfig {
    let mut c = config(w);
    c.router.policy = PolicyKind::Manual;
    let mut s = StoreSettings::new(redis.url());
    s.timeout = Duration::from_secs(3);
    s.sync_every = Duration::from_millis(100);
    c.sticky_store = Some(s);
    c
}

async fn sticky(client: &TestClient, key: &str) -> serde_json::Value {
    let r = client.get(&format!("/sticky/{key}"), &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.json()
}

/// The first URL of a `/sticky` `local` or `store` field.
fn first(v: &serde_json::Value) -> Option<String> {
    v.as_array()?.first()?.as_str().map(str::to_owned)
}

#[tokio::test]
async fn a_conversation_alternating_replicas_stays_on_one_worker() {
    let Some(redis) = RedisServer::start("alternating replicas") else {
        return;
    };
    let w = sims(4).await;
    let mut c = store_config(&w, &redis);
    c.router.policy = PolicyKind::CacheAware;
    c.router.routing_key_override = true;
    let a = start(c.clone()).await;
    let b = start(c).await;
    for conv in 0..20 {
        let mut pinned = None;
        for turn in 1..=6 {
            let replica = if (conv + turn) % 2 == 0 { &a } else { &b };
            let rid = format!("conv-{conv}_t{turn}");
            let r = replica.client.chat(&[], chat_body(Some(&rid))).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            let worker = r.worker().unwrap();
            assert_eq!(
                *pinned.get_or_insert_with(|| worker.clone()),
                worker,
                "conversation {conv} turn {turn} left its worker"
            );
        }
    }
}

#[tokio::test]
async fn first_turns_racing_on_both_replicas_agree() {
    let Some(redis) = RedisServer::start("racing first turns") else {
        return;
    };
    let w = sims(4).await;
    let c = store_config(&w, &redis);
    let a = start(c.clone()).await;
    let b = start(c).await;
    for batch in 0..10 {
        let mut races = Vec::new();
        for i in 0..10 {
            let key = format!("race-{batch}-{i}");
            // two first turns on each replica at once: across replicas the store decides,
            // within one the second waits for the first's answer from the store
            let sends: Vec<_> = [&a, &b, &a, &b]
                .iter()
                .map(|g| {
                    let (c, k) = (g.client.clone(), key.clone());
                    tokio::spawn(async move { c.keyed(&k).await })
                })
                .collect();
            races.push((key, sends));
        }
        for (key, sends) in races {
            let mut got = Vec::new();
            for s in sends {
                got.push(s.await.unwrap());
            }
            let x = got[0].clone();
            assert!(
                got.iter().all(|w| *w == x),
                "{key}: first turns split: {got:?}"
            );
            let s = sticky(&a.client, &key).await;
            assert_eq!(first(&s["store"]), Some(x), "{key}: {s}");
        }
    }
}

#[tokio::test]
async fn a_failover_on_one_replica_is_seen_by_the_other() {
    let Some(redis) = RedisServer::start("failover seen by the other replica") else {
        return;
    };
    let w = sims(3).await;
    let c = store_config(&w, &redis);
    let a = start(c.clone()).await;
    let b = start(c).await;
    let x = a.client.keyed("fo").await;
    assert_eq!(b.client.keyed("fo").await, x);
    // the worker leaves replica A only: B would keep sending there unless told
    let enc = x.replace(':', "%3A").replace('/', "%2F");
    let r = a
        .client
        .send(Method::DELETE, &format!("/workers/{enc}"), &[], "")
        .await;
    assert_eq!(r.status, 200);
    let y = a.client.keyed("fo").await;
    assert_ne!(y, x);
    eventually("B dropped its stale pin", || async {
        first(&sticky(&b.client, "fo").await["local"]).as_deref() != Some(x.as_str())
    })
    .await;
    assert_eq!(b.client.keyed("fo").await, y, "B follows A's failover");
    assert_eq!(first(&sticky(&b.client, "fo").await["store"]), Some(y));
    let m = metrics(&b.gw).await;
    assert!(sample(&m, "berth_sticky_store_invalidations_total").unwrap() >= 1.0);
}

#[tokio::test]
async fn a_restarted_replica_keeps_every_pin() {
    let Some(redis) = RedisServer::start("replica restart") else {
        return;
    };
    let w = sims(4).await;
    let c = store_config(&w, &redis);
    let a = start(c.clone()).await;
    let mut before = Vec::new();
    for i in 0..40 {
        let key = format!("restart-{i}");
        before.push((key.clone(), a.client.keyed(&key).await));
    }
    a.gw.shutdown().await;
    let a2 = start(c).await;
    // nothing is loaded at start: pins come back on demand
    let m = metrics(&a2.gw).await;
    assert_eq!(sample(&m, "smg_manual_policy_cache_entries"), Some(0.0));
    for (key, worker) in &before {
        assert_eq!(
            &a2.client.keyed(key).await,
            worker,
            "{key} moved on restart"
        );
    }
    let m = metrics(&a2.gw).await;
    assert!(sample(&m, "berth_sticky_store_adopted_total").unwrap() >= 1.0);
}

/// The gateway's connections to `redis` (every client but the `CLIENT LIST` callers).
fn gateway_clients(redis: &RedisServer) -> usize {
    redis
        .command("CLIENT LIST")
        .lines()
        .filter(|l| l.contains(" fd=") && !l.contains("cmd=client|list"))
        .count()
}

#[tokio::test]
async fn each_io_thread_places_new_keys_over_its_own_connection() {
    let Some(redis) = RedisServer::start("io thread connections") else {
        return;
    };
    let w = sims(2).await;
    let mut c = store_config(&w, &redis);
    c.io_threads = 2;
    let g = start(c).await;
    // the shared connection and the invalidation subscriber
    eventually("two connections at start", || async {
        gateway_clients(&redis) == 2
    })
    .await;
    // a fresh client connection per request: the accept loop deals them to both IO threads
    // in turn, and each thread makes its own connection on its first new key
    let fresh = || TestClient::new(g.gw.addr());
    for i in 0..8 {
        fresh().keyed(&format!("io-{i}")).await;
    }
    eventually("one more connection per IO thread", || async {
        gateway_clients(&redis) == 4
    })
    .await;
    for i in 8..40 {
        let key = format!("io-{i}");
        let worker = fresh().keyed(&key).await;
        let pin = sticky(&g.client, &key).await;
        assert_eq!(first(&pin["store"]), Some(worker), "{key} stored: {pin}");
    }
    assert_eq!(gateway_clients(&redis), 4, "no connection per request");
}

#[tokio::test]
async fn sticky_admin_shows_a_pin_everywhere_and_delete_drops_it_everywhere() {
    let Some(redis) = RedisServer::start("sticky admin") else {
        return;
    };
    let w = sims(3).await;
    let mut c = store_config(&w, &redis);
    c.api_key = Some(berth_gateway::config::Secret("k3y".into()));
    let a = start(c.clone()).await;
    let b = start(c).await;
    let auth = [("authorization", &b"Bearer k3y"[..])];
    let keyed = |client: TestClient| async move {
        let r = client
            .chat(&[("x-smg-routing-key", b"adm"), auth[0]], chat_body(None))
            .await;
        assert_eq!(r.status, 200);
        r.worker().unwrap()
    };
    let x = keyed(a.client.clone()).await;
    assert_eq!(keyed(b.client.clone()).await, x);
    assert_eq!(
        a.client.get("/sticky/adm", &[]).await.status,
        401,
        "guarded like /workers"
    );
    let s = a.client.get("/sticky/adm", &auth).await.json();
    assert_eq!(s["key"], "adm");
    assert_eq!(first(&s["local"]), Some(x.clone()));
    assert_eq!(first(&s["store"]), Some(x.clone()));
    assert!(s["store_ttl_secs"].as_f64().unwrap() > 0.0, "{s}");
    let d = a
        .client
        .send(Method::DELETE, "/sticky/adm", &auth, "")
        .await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    assert_eq!(d.json()["local"], true);
    assert_eq!(d.json()["store"], true);
    eventually("B dropped the deleted pin", || async {
        b.client.get("/sticky/adm", &auth).await.json()["local"].is_null()
    })
    .await;
    let s = a.client.get("/sticky/adm", &auth).await.json();
    assert!(s["local"].is_null() && s["store"].is_null(), "{s}");
    // a pin of another model under the override, and an unknown key
    let s = a.client.get("/sticky/never-seen", &auth).await.json();
    assert!(s["local"].is_null() && s["store"].is_null(), "{s}");
    let r = a.client.send(Method::PUT, "/sticky/adm", &auth, "").await;
    assert_eq!(r.status, 405);
}

#[tokio::test]
async fn sticky_admin_without_a_store_shows_and_drops_the_local_pin() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let x = g.client.keyed("a b").await;
    let s = sticky(&g.client, "a%20b").await;
    assert_eq!(s["key"], "a b");
    assert_eq!(first(&s["local"]), Some(x));
    assert!(s.get("store").is_none(), "{s}");
    let d = g
        .client
        .send(Method::DELETE, "/sticky/a%20b", &[], "")
        .await;
    assert_eq!(
        (d.status.as_u16(), d.json()["local"].clone()),
        (200, true.into())
    );
    assert!(sticky(&g.client, "a%20b").await["local"].is_null());
    let m = metrics(&g.gw).await;
    assert_eq!(sample(&m, "smg_manual_policy_cache_entries"), Some(0.0));
}

fn from_argv(argv: &[&str]) -> Result<GatewayConfig, String> {
    use clap::{Args as _, FromArgMatches as _};
    let m = berth_gateway::cli::Args::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(
            ["serve", "--worker-urls", "http://127.0.0.1:1"]
                .iter()
                .chain(argv),
        )
        .map_err(|e| e.to_string())?;
    let args = berth_gateway::cli::Args::from_arg_matches(&m)
        .map_err(|e| e.to_string())?
        .resolve()
        .map_err(|e| e.to_string())?;
    GatewayConfig::from_args(&args).map_err(|e| e.to_string())
}

#[test]
fn sticky_store_flags_parse_and_bad_ones_refuse_naming_the_flag() {
    let c = from_argv(&[
        "--policy",
        "manual",
        "--sticky-store",
        "redis://127.0.0.1:6379/3",
        "--sticky-store-timeout-ms",
        "20",
        "--sticky-store-sync-ms",
        "250",
        "--sticky-store-prefix",
        "fleet-a",
    ])
    .unwrap();
    let s = c.sticky_store.unwrap();
    assert_eq!(s.url, "redis://127.0.0.1:6379/3");
    assert_eq!(s.timeout, Duration::from_millis(20));
    assert_eq!(s.sync_every, Duration::from_millis(250));
    assert_eq!(s.prefix, "fleet-a");
    let d = from_argv(&[
        "--routing-key-override",
        "--sticky-store",
        "rediss://h:6380",
    ])
    .unwrap();
    let d = d.sticky_store.unwrap();
    assert_eq!(
        (d.timeout, d.prefix.as_str()),
        (Duration::from_millis(50), "berth")
    );
    assert!(from_argv(&[]).unwrap().sticky_store.is_none());
    for (argv, flag) in [
        (
            &["--policy", "manual", "--sticky-store", "http://h:1"][..],
            "--sticky-store:",
        ),
        (&["--sticky-store", "redis://h:1"][..], "--sticky-store:"), // cache_aware, no override: no pins
        (
            &[
                "--policy",
                "consistent_hashing",
                "--routing-key-override",
                "--sticky-store",
                "redis://h:1",
            ][..],
            "--sticky-store:",
        ),
        (
            &["--sticky-store-timeout-ms", "5"][..],
            "--sticky-store-timeout-ms",
        ),
        (
            &[
                "--policy",
                "manual",
                "--sticky-store",
                "redis://h:1",
                "--sticky-store-sync-ms",
                "0",
            ][..],
            "--sticky-store-sync-ms",
        ),
    ] {
        let e = from_argv(argv).unwrap_err();
        assert!(e.contains(flag), "{argv:?}: {e}");
    }
}

#[test]
fn sticky_store_is_a_config_file_key() {
    let dir = std::env::temp_dir().join(format!("berth-store-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    std::fs::write(
        &file,
        "policy = \"manual\"\nsticky-store = \"redis://127.0.0.1:7000\"\nsticky-store-timeout-ms = 30\n",
    )
    .unwrap();
    let c = from_argv(&["--config", file.to_str().unwrap()]).unwrap();
    let s = c.sticky_store.unwrap();
    assert_eq!(
        (s.url.as_str(), s.timeout),
        ("redis://127.0.0.1:7000", Duration::from_millis(30))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
