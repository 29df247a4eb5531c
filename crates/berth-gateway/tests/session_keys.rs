//! `--routing-key-sources` through HTTP: every berth source keys a request (pinned, not refused
//! as keyless), the precedence between sources, malformed values skipped, the list's flag.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;
use serde_json::{Value, json};

/// One way of naming the session `key`: headers and the body fields to add.
type Namer = fn(&str) -> (Vec<(&'static str, String)>, Value);

fn sources() -> Vec<(&'static str, Namer)> {
    vec![
        ("session_header", |k| {
            (vec![("session_id", k.to_owned())], json!({}))
        }),
        ("session_header", |k| {
            (vec![("conversation_id", k.to_owned())], json!({}))
        }),
        ("session_header", |k| {
            (vec![("x-claude-code-session-id", k.to_owned())], json!({}))
        }),
        ("nvext_session_id", |k| {
            (
                vec![],
                json!({"nvext": {"session_control": {"session_id": k, "action": "bind", "timeout": 60}}}),
            )
        }),
        ("prompt_cache_key", |k| {
            (vec![], json!({"prompt_cache_key": k}))
        }),
        ("conversation", |k| (vec![], json!({"conversation": k}))),
        ("conversation", |k| {
            (vec![], json!({"conversation": {"id": k}}))
        }),
        ("metadata_user_id", |k| {
            (
                vec![],
                json!({"metadata": {"user_id": format!("user_abc_account__session_{k}")}}),
            )
        }),
    ]
}

fn body_with(extra: &Value) -> Value {
    let mut b = chat_body(None);
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// Whether `GET /sticky/{key}` shows a local pin.
async fn pinned(g: &Running, key: &str) -> bool {
    let r = g.client.get(&format!("/sticky/{key}"), &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    !r.json()["local"].is_null()
}

async fn send(g: &Running, headers: &[(&'static str, String)], extra: &Value) -> Resp {
    let h: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    g.client.chat(&h, body_with(extra)).await
}

#[tokio::test]
async fn every_source_keys_and_pins_under_manual_and_consistent_hashing() {
    let w = sims(4).await;
    for policy in [PolicyKind::Manual, PolicyKind::ConsistentHashing] {
        let mut c = config(&w);
        c.router.policy = policy;
        let g = start(c).await;
        for (i, (label, name)) in sources().into_iter().enumerate() {
            let before = sample(
                &metrics(&g.gw).await,
                &format!("smg_routing_key_source_total{{source=\"{label}\"}}"),
            )
            .unwrap_or(0.0);
            // Several sessions, so a source that were ignored (random placement or a refusal)
            // could not pass by luck.
            for s in 0..4 {
                let key = format!("sess-{i}-{s}");
                let (h, extra) = name(&key);
                let first = send(&g, &h, &extra).await;
                assert_eq!(first.status, 200, "{policy:?} {label}: {:?}", first.body);
                let first = first.worker().unwrap();
                for _ in 0..3 {
                    assert_eq!(send(&g, &h, &extra).await.worker().unwrap(), first);
                }
            }
            let after = sample(
                &metrics(&g.gw).await,
                &format!("smg_routing_key_source_total{{source=\"{label}\"}}"),
            )
            .unwrap();
            assert_eq!(after - before, 16.0, "{policy:?} {label}");
        }
        if policy == PolicyKind::Manual {
            // The key is the bare value: the pin table shows it under that name.
            let (h, extra) = (sources()[4].1)("pck-visible");
            send(&g, &h, &extra).await;
            assert!(pinned(&g, "pck-visible").await);
            assert!(!pinned(&g, "never-sent").await);
        }
        g.gw.shutdown().await;
    }
}

#[tokio::test]
async fn precedence_follows_the_list_and_smg_sources_come_first() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let count = |m: &str, s: &str| {
        sample(
            m,
            &format!("smg_routing_key_source_total{{source=\"{s}\"}}"),
        )
    };
    let all = json!({
        "prompt_cache_key": "p",
        "conversation": "c",
        "metadata": {"user_id": "user_a_session_m"},
        "nvext": {"session_control": {"session_id": "n"}}
    });
    // x-smg-routing-key beats an agent header, which beats every body field.
    send(
        &g,
        &[
            ("x-smg-routing-key", "smg".into()),
            ("session_id", "s".into()),
        ],
        &all,
    )
    .await;
    let m = metrics(&g.gw).await;
    assert_eq!(count(&m, "header"), Some(1.0));
    assert_eq!(count(&m, "session_header"), None);
    send(&g, &[("session_id", "s".into())], &all).await;
    let m = metrics(&g.gw).await;
    assert_eq!(count(&m, "session_header"), Some(1.0));
    assert_eq!(count(&m, "nvext_session_id"), None);
    // Body fields: nvext, prompt_cache_key, conversation, metadata.user_id.
    let mut body = all.clone();
    for (field, label) in [
        ("nvext", "nvext_session_id"),
        ("prompt_cache_key", "prompt_cache_key"),
        ("conversation", "conversation"),
        ("metadata", "metadata_user_id"),
    ] {
        let r = send(&g, &[], &body).await;
        assert_eq!(r.status, 200);
        assert_eq!(count(&metrics(&g.gw).await, label), Some(1.0), "{label}");
        body.as_object_mut().unwrap().remove(field);
    }
    // Every key has its own pin, named as sent.
    for key in ["smg", "s", "n", "p", "c", "m"] {
        assert!(pinned(&g, key).await, "{key}");
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn malformed_values_are_skipped_as_invalid_headers_are() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let long = "k".repeat(129);
    for (h, extra) in [
        (vec![], json!({"prompt_cache_key": long})),
        (vec![], json!({"prompt_cache_key": 7})),
        (vec![], json!({"prompt_cache_key": ""})),
        (vec![], json!({"conversation": ["c"]})),
        (vec![], json!({"conversation": {"id": 3}})),
        (
            vec![],
            json!({"metadata": {"user_id": "user_only_no_session"}}),
        ),
        (vec![], json!({"metadata": "m"})),
        (
            vec![],
            json!({"nvext": {"session_control": {"session_id": {"a": 1}}}}),
        ),
        (vec![("session_id", long.clone())], json!({})),
    ] {
        let r = send(&g, &h, &extra).await;
        assert_eq!(r.status, 400, "{extra} {h:?}");
        assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    }
    // A malformed earlier source falls through to a valid later one.
    let r = send(
        &g,
        &[("session_id", long.clone())],
        &json!({"prompt_cache_key": 7, "conversation": "ok"}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(pinned(&g, "ok").await);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_flag_sets_the_list_and_smg_only_reads_no_body() {
    let w = sims(2).await;
    let args = berth_gateway::cli::Args {
        worker_urls: w.iter().map(|s| s.url()).collect(),
        policy: Some("manual".into()),
        routing_key_sources: vec!["rid".into(), "routing_key_headers".into()],
        ..Default::default()
    };
    let c = berth_gateway::GatewayConfig::from_args(&args.resolve().unwrap()).unwrap();
    let g = start(c).await;
    let r = send(
        &g,
        &[("session_id", "s".into())],
        &json!({"prompt_cache_key": "p"}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code().as_deref(), Some("missing_routing_key"));
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="scanned",reason="routing_key_body"}"#
        ),
        None
    );
    g.gw.shutdown().await;

    // Default list: a header key streams the body unread; a body-only key reads it.
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    send(&g, &[("session_id", "s".into())], &json!({})).await;
    send(&g, &[], &json!({"prompt_cache_key": "p"})).await;
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="scanned",reason="routing_key_body"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="streamed",reason="not_needed"}"#
        ),
        Some(1.0)
    );
    g.gw.shutdown().await;
}

#[test]
fn unknown_sources_refuse_start_up_naming_the_flag() {
    for bad in ["cookie", "header:bad name", "previous_response"] {
        let args = berth_gateway::cli::Args {
            worker_urls: vec!["http://127.0.0.1:1".into()],
            routing_key_sources: vec![bad.into()],
            ..Default::default()
        };
        let e = berth_gateway::GatewayConfig::from_args(&args.resolve().unwrap())
            .and_then(|c| {
                berth_gateway::routing::Router::new(&c.router)
                    .map(|_| c)
                    .map_err(|e| berth_gateway::GatewayError::Config(e.to_string()))
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("--routing-key-sources"), "{bad}: {e}");
    }
}

#[tokio::test]
async fn nvext_close_drops_the_pin_before_the_response_and_the_session_is_placed_again() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let nv = |action: &str| json!({"nvext": {"session_control": {"session_id": "agent-1", "action": action, "timeout": 300}}});
    let plain = json!({"nvext": {"session_control": {"session_id": "agent-1"}}});
    assert_eq!(send(&g, &[], &nv("bind")).await.status, 200);
    assert!(pinned(&g, "agent-1").await);
    assert_eq!(send(&g, &[], &plain).await.status, 200);
    let m = metrics(&g.gw).await;
    let vacant = |m: &str| sample(m, r#"smg_manual_policy_branch_total{branch="vacant"}"#).unwrap();
    let hits = |m: &str| {
        sample(
            m,
            r#"smg_manual_policy_branch_total{branch="occupied_hit"}"#,
        )
        .unwrap()
    };
    assert_eq!((vacant(&m), hits(&m)), (1.0, 1.0));
    // The close request itself still reaches the session's worker (an occupied hit) ...
    let r = send(&g, &[], &nv("close")).await;
    assert_eq!(r.status, 200);
    // ... and once its response is read the pin is gone.
    assert!(!pinned(&g, "agent-1").await);
    let m = metrics(&g.gw).await;
    assert_eq!(hits(&m), 2.0);
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="close",outcome="dropped"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="bind",outcome="timeout_set"}"#
        ),
        Some(1.0)
    );
    // The next request of that session is placed afresh (a new pin).
    assert_eq!(send(&g, &[], &plain).await.status, 200);
    assert_eq!(vacant(&metrics(&g.gw).await), 2.0);
    assert!(pinned(&g, "agent-1").await);
    // A close for a session never seen is placed (and pinned) like any keyed request, then
    // dropped: no pin is left behind.
    let r = send(
        &g,
        &[],
        &json!({"nvext": {"session_control": {"session_id": "agent-2", "action": "close"}}}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(!pinned(&g, "agent-2").await);
    assert_eq!(
        sample(
            &metrics(&g.gw).await,
            r#"berth_session_control_total{action="close",outcome="dropped"}"#
        ),
        Some(2.0)
    );
    g.gw.shutdown().await;
}
