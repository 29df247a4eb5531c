//! Wire output of each mode on single requests, and option validation.

use serde_json::{Value, json};

use super::*;

fn ident<'a>(session: &'a str, parent: Option<&'a str>, root: &'a str) -> RequestIdentity<'a> {
    RequestIdentity {
        session_id: session,
        parent_id: parent,
        root_id: root,
        turn_index: 2,
        retry: 0,
        is_session_final: false,
        is_tree_final: false,
        previous_response_id: None,
    }
}

fn wire(mode: &SessionRouting, id: &RequestIdentity<'_>) -> WireRequest {
    let mut req = WireRequest::default();
    req.body.insert("model".into(), json!("m"));
    mode.apply(id, &mut req);
    req
}

fn parse(mode: &str, opts: &[&str]) -> Result<SessionRouting, crate::error::BenchError> {
    let opts: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
    SessionRouting::parse(mode, &opts)
}

#[test]
fn header_presets() {
    let child = ident("s", Some("p"), "r");
    let root = ident("r", None, "r");
    let cases = [
        (
            "dynamo_headers",
            &child,
            vec![
                ("X-Dynamo-Session-ID", "s"),
                ("X-Dynamo-Parent-Session-ID", "p"),
            ],
        ),
        ("dynamo_headers", &root, vec![("X-Dynamo-Session-ID", "r")]),
        ("smg_routing_key", &child, vec![("X-SMG-Routing-Key", "s")]),
        ("session_id_header", &child, vec![("X-Session-ID", "s")]),
        ("codex_session_header", &child, vec![("session_id", "s")]),
        (
            "claude_code_header",
            &child,
            vec![("X-Claude-Code-Session-Id", "s")],
        ),
        ("none", &child, vec![]),
    ];
    for (mode, id, expected) in cases {
        let req = wire(&parse(mode, &[]).unwrap(), id);
        let got: Vec<(&str, &str)> = req
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, expected, "{mode}");
        assert_eq!(
            req.body,
            json!({"model": "m"}).as_object().unwrap().clone(),
            "{mode} body"
        );
    }
}

#[test]
fn rid_mode_carries_lineage() {
    let mode = parse("rid", &[]).unwrap();
    let mut id = ident("sess", None, "sess");
    assert_eq!(wire(&mode, &id).body["rid"], json!("sess_t2"));
    id.retry = 1;
    let req = wire(&mode, &id);
    assert_eq!(req.body["rid"], json!("sess_t2_r1"));
    assert!(req.headers.is_empty());
    assert_eq!(berth_client::strip_lineage("sess_t2_r1"), "sess");
}

#[test]
fn identity_headers_tiers() {
    let mode = parse(
        "identity_headers",
        &[
            "session=X-Session-ID, X-SMG-Routing-Key",
            "parent=X-Parent",
            "root=X-Tree-ID",
        ],
    )
    .unwrap();
    let child = wire(&mode, &ident("s", Some("p"), "r"));
    let names: Vec<(&str, &str)> = child
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("X-Session-ID", "s"),
            ("X-SMG-Routing-Key", "s"),
            ("X-Parent", "p"),
            ("X-Tree-ID", "r")
        ]
    );
    let root = wire(&mode, &ident("r", None, "r"));
    let names: Vec<&str> = root.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec!["X-Session-ID", "X-SMG-Routing-Key", "X-Tree-ID"],
        "parent omitted on roots"
    );
}

#[test]
fn identity_headers_validation_matrix() {
    let ok: &[&[&str]] = &[
        &["session=X-A"],
        &["parent=X-A"],
        &["root=X-A"],
        &["session=X-A,X-B", "parent=X-C", "root=X-D"],
        &["session= X-A , X-B "],
    ];
    for opts in ok {
        assert!(parse("identity_headers", opts).is_ok(), "{opts:?}");
    }
    let bad: &[(&[&str], &str)] = &[
        (&[], "at least one"),
        (&["session="], "empty header name"),
        (&["session=X-A,"], "empty header name"),
        (&["session=X A"], "RFC 9110"),
        (&["root=X:A"], "RFC 9110"),
        (&["parent=Ä"], "RFC 9110"),
        (&["session=X-A,x-a"], "twice"),
        (&["session=X-A", "root=x-A"], "twice"),
        (&["session=X-A", "parent=X-B", "root=X-b"], "twice"),
        (&["session=X-A", "session=X-B"], "more than once"),
        (&["tree=X-A"], "unknown option `tree`"),
        (&["session"], "not key=value"),
    ];
    for (opts, needle) in bad {
        let err = parse("identity_headers", opts).unwrap_err().to_string();
        assert!(err.contains(needle), "{opts:?}: {err}");
    }
}

#[test]
fn modes_and_options_are_validated() {
    assert!(
        parse("sticky", &[])
            .unwrap_err()
            .to_string()
            .contains("unknown mode `sticky`")
    );
    for preset in [
        "none",
        "rid",
        "dynamo_headers",
        "smg_routing_key",
        "session_id_header",
        "prompt_cache_key",
        "conversation",
        "previous_response_id",
        "codex_session_header",
        "claude_code_header",
        "claude_code_metadata",
    ] {
        let err = parse(preset, &["timeout_seconds=3"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("takes no options"), "{preset}: {err}");
    }
    assert_eq!(
        parse("dynamo_nvext", &[]).unwrap(),
        SessionRouting::DynamoNvext {
            timeout_seconds: 300,
            scope: NvextScope::Conversation
        }
    );
    assert_eq!(
        parse("dynamo_nvext", &["timeout_seconds=600", "scope=lineage"]).unwrap(),
        SessionRouting::DynamoNvext {
            timeout_seconds: 600,
            scope: NvextScope::Lineage
        }
    );
    for bad in [
        "timeout_seconds=0",
        "timeout_seconds=-1",
        "timeout_seconds=1.5",
        "scope=tree",
        "session=X",
    ] {
        assert!(parse("dynamo_nvext", &[bad]).is_err(), "{bad}");
    }
}

#[test]
fn nvext_bind_close_and_preservation() {
    let mode = parse("dynamo_nvext", &["timeout_seconds=60"]).unwrap();
    let mut req = WireRequest::default();
    req.body.insert(
        "nvext".into(),
        json!({"priority": 3, "session_control": {"session_id": "dataset", "extra": 1}}),
    );
    let id = ident("s", None, "s");
    mode.apply(&id, &mut req);
    assert_eq!(
        req.body["nvext"],
        json!({"priority": 3, "session_control": {"session_id": "s", "action": "bind", "timeout": 60, "extra": 1}})
    );
    let mut last = WireRequest::default();
    mode.apply(
        &RequestIdentity {
            is_session_final: true,
            ..id
        },
        &mut last,
    );
    assert_eq!(
        last.body["nvext"],
        json!({"session_control": {"session_id": "s", "action": "close"}})
    );
    assert!(last.headers.is_empty());
}

#[test]
fn nvext_lineage_binds_root_and_closes_only_on_tree_final() {
    let mode = parse("dynamo_nvext", &["scope=lineage"]).unwrap();
    let child_final = RequestIdentity {
        is_session_final: true,
        ..ident("c", Some("r"), "r")
    };
    let req = wire(&mode, &child_final);
    assert_eq!(
        req.body["nvext"]["session_control"],
        json!({"session_id": "r", "action": "bind", "timeout": 300})
    );
    let tree_final = RequestIdentity {
        is_session_final: true,
        is_tree_final: true,
        ..ident("r", None, "r")
    };
    let req = wire(&mode, &tree_final);
    assert_eq!(
        req.body["nvext"]["session_control"],
        json!({"session_id": "r", "action": "close"})
    );
}

#[test]
fn body_field_presets() {
    let child = ident("s", Some("p"), "r");
    let zeros = "0".repeat(64);
    let cases = [
        (
            "prompt_cache_key",
            json!({"model": "m", "prompt_cache_key": "s"}),
        ),
        ("conversation", json!({"model": "m", "conversation": "s"})),
        (
            "claude_code_metadata",
            json!({"model": "m", "metadata": {"user_id": format!("user_{zeros}_account__session_s")}}),
        ),
    ];
    for (mode, expected) in cases {
        let m = parse(mode, &[]).unwrap();
        assert_eq!(m.name(), mode);
        let req = wire(&m, &child);
        assert!(req.headers.is_empty(), "{mode} adds no header");
        assert_eq!(Value::Object(req.body), expected, "{mode}");
    }
    // Other metadata members a workload shipped are kept.
    let mut req = WireRequest::default();
    req.body.insert("metadata".into(), json!({"trace": "t"}));
    parse("claude_code_metadata", &[])
        .unwrap()
        .apply(&child, &mut req);
    assert_eq!(req.body["metadata"]["trace"], "t");
    // The gateway's key is the part after the last `_session_` (berth-routing's
    // `session_from_user_id`; tests/session_keys.rs sends this form through a gateway).
    let user = req.body["metadata"]["user_id"].as_str().unwrap();
    assert_eq!(user.rsplit_once("_session_").map(|(_, s)| s), Some("s"));
}

#[test]
fn previous_response_id_names_the_previous_answer_after_the_first_turn() {
    let m = parse("previous_response_id", &[]).unwrap();
    assert_eq!(m.name(), "previous_response_id");
    // First turn: nothing names the chain yet.
    let first = wire(&m, &ident("s", None, "s"));
    assert!(first.headers.is_empty());
    assert_eq!(Value::Object(first.body), json!({"model": "m"}));
    // Later turns (and their retries) name the previous answer's id, and nothing else.
    let next = RequestIdentity {
        previous_response_id: Some("resp_7"),
        retry: 1,
        ..ident("s", None, "s")
    };
    let req = wire(&m, &next);
    assert!(req.headers.is_empty());
    assert_eq!(
        Value::Object(req.body),
        json!({"model": "m", "previous_response_id": "resp_7"})
    );
    // Other modes ignore the id.
    let pck = wire(&parse("prompt_cache_key", &[]).unwrap(), &next);
    assert!(!pck.body.contains_key("previous_response_id"));
}
