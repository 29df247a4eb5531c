use super::super::{HeaderList, KeyConfig, KeySource, MAX_KEY_BYTES};
use super::*;

fn defaults(override_on: bool) -> KeyConfig {
    let items: Vec<String> = DEFAULT_KEY_SOURCES.iter().map(|s| s.to_string()).collect();
    KeyConfig::try_new(override_on, &["x-smg-routing-key".to_owned()])
        .unwrap()
        .with_sources(parse_sources(&items).unwrap())
}

fn body() -> BodyKeys {
    BodyKeys {
        nvext_session_id: Some("nv".into()),
        previous_response_key: Some("chain".into()),
        prompt_cache_key: Some("pck".into()),
        conversation: Some("conv".into()),
        metadata_user_id: Some("user_ab_account_cd_session_md".into()),
    }
}

fn derive(
    cfg: &KeyConfig,
    rid: Option<&str>,
    b: Option<&BodyKeys>,
    h: &[(&str, &[u8])],
) -> Option<(String, KeySource)> {
    cfg.derive_with_body(rid, b, &HeaderList(h))
        .map(|k| (k.key.into(), k.source))
}

#[test]
fn default_order_each_source_wins_over_the_ones_after_it() {
    let cfg = defaults(true);
    let all_headers: &[(&str, &[u8])] = &[
        ("x-smg-routing-key", b"smg"),
        ("session_id", b"codex-s"),
        ("conversation_id", b"codex-c"),
        ("x-claude-code-session-id", b"claude"),
    ];
    let mut b = body();
    // rid (override) beats everything, as in SMG.
    assert_eq!(
        derive(&cfg, Some("r_t1"), Some(&b), all_headers),
        Some(("r".into(), KeySource::Rid))
    );
    // Then SMG's header, then each agent header in list order.
    let expect = [
        ("smg", KeySource::Header),
        ("codex-s", KeySource::SessionHeader),
        ("codex-c", KeySource::SessionHeader),
        ("claude", KeySource::SessionHeader),
    ];
    for n in 0..all_headers.len() {
        assert_eq!(
            derive(&cfg, None, Some(&b), &all_headers[n..]),
            Some((expect[n].0.into(), expect[n].1)),
            "headers from {n}"
        );
    }
    // Then the body fields in list order.
    let order = [
        ("nv", KeySource::NvextSessionId),
        ("chain", KeySource::PreviousResponseId),
        ("pck", KeySource::PromptCacheKey),
        ("conv", KeySource::Conversation),
        ("md", KeySource::MetadataUserId),
    ];
    for (key, source) in order {
        assert_eq!(
            derive(&cfg, None, Some(&b), &[]),
            Some((key.into(), source))
        );
        match source {
            KeySource::NvextSessionId => b.nvext_session_id = None,
            KeySource::PreviousResponseId => b.previous_response_key = None,
            KeySource::PromptCacheKey => b.prompt_cache_key = None,
            KeySource::Conversation => b.conversation = None,
            _ => b.metadata_user_id = None,
        }
    }
    assert_eq!(derive(&cfg, None, Some(&b), &[]), None);
    // Without the override the rid is not a source; without the body no body source is.
    assert_eq!(derive(&defaults(false), Some("r_t1"), None, &[]), None);
}

#[test]
fn the_list_sets_the_order_and_what_is_off() {
    let items: Vec<String> = ["prompt_cache_key", "routing_key_headers"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cfg = KeyConfig::try_new(false, &["x-smg-routing-key".to_owned()])
        .unwrap()
        .with_sources(parse_sources(&items).unwrap());
    let b = body();
    let h: &[(&str, &[u8])] = &[("x-smg-routing-key", b"smg"), ("session_id", b"s")];
    assert_eq!(
        derive(&cfg, None, Some(&b), h),
        Some(("pck".into(), KeySource::PromptCacheKey))
    );
    // session_id is not in the list: ignored.
    assert_eq!(derive(&cfg, None, None, &h[1..]), None);
    // SMG's own list (rid, headers) is what try_new alone gives: no berth source.
    let smg = KeyConfig::try_new(false, &["x-smg-routing-key".to_owned()]).unwrap();
    assert_eq!(derive(&smg, None, Some(&b), &h[1..]), None);
}

#[test]
fn malformed_values_are_skipped_like_invalid_headers() {
    let cfg = defaults(false);
    let long = "k".repeat(MAX_KEY_BYTES + 1);
    let ok = "k".repeat(MAX_KEY_BYTES);
    let b = BodyKeys {
        nvext_session_id: Some(String::new()),
        prompt_cache_key: Some(long.clone()),
        conversation: Some(ok.clone()),
        metadata_user_id: None,
        previous_response_key: None,
    };
    assert_eq!(
        derive(&cfg, None, Some(&b), &[("session_id", long.as_bytes())]),
        Some((ok, KeySource::Conversation))
    );
    let b = BodyKeys {
        metadata_user_id: Some(format!("user_a_session_{long}")),
        ..BodyKeys::default()
    };
    assert_eq!(derive(&cfg, None, Some(&b), &[("session_id", b"")]), None);
    // Non-UTF-8 header value: skipped.
    assert_eq!(
        derive(&cfg, None, None, &[("session_id", b"\xff\xfe")]),
        None
    );
}

#[test]
fn claude_code_user_id_forms() {
    assert_eq!(
        session_from_user_id("user_5dd0_account__session_d2e70091-3007"),
        Some("d2e70091-3007")
    );
    assert_eq!(
        session_from_user_id(r#"{"device_id":"d","account_uuid":"","session_id":"2c4e-1cf0"}"#),
        Some("2c4e-1cf0")
    );
    for none in [
        "user_5dd0",
        "user_x_session_",
        r#"{"device_id":"d"}"#,
        r#"{"session_id":7}"#,
        r#"{"session_id":"a\"b"}"#,
        r#"{"session_id":""}"#,
        "",
    ] {
        assert_eq!(session_from_user_id(none), None, "{none}");
    }
}

#[test]
fn needs_body_only_when_no_earlier_header_names_the_key() {
    let cfg = defaults(false);
    assert!(cfg.needs_body(&HeaderList(&[])));
    assert!(!cfg.needs_body(&HeaderList(&[("x-smg-routing-key", b"k")])));
    assert!(!cfg.needs_body(&HeaderList(&[("session_id", b"k")])));
    // An invalid header value does not count.
    assert!(cfg.needs_body(&HeaderList(&[("session_id", b"")])));
    // No body source in the list: never.
    let smg = KeyConfig::try_new(false, &["x-smg-routing-key".to_owned()]).unwrap();
    assert!(!smg.needs_body(&HeaderList(&[])));
}

#[test]
fn list_parsing() {
    let p =
        |items: &[&str]| parse_sources(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        p(&["header:Session_ID", "rid", "header:session_id"]).unwrap(),
        [Source::Header("session_id".into()), Source::Rid]
    );
    for bad in ["header:bad name", "header:", "cookie", "previous_response"] {
        let e = p(&[bad]).unwrap_err().to_string();
        assert!(e.contains("--routing-key-sources"), "{e}");
    }
    assert!(Source::PromptCacheKey.in_body() && !Source::Header("a".into()).in_body());
    assert_eq!(
        p(&["previous_response_id"]).unwrap(),
        [Source::PreviousResponseId]
    );
    assert!(Source::PreviousResponseId.in_body());
}

#[test]
fn body_settled_once_nothing_unseen_ranks_above_a_valid_value() {
    let cfg = defaults(false);
    let none: &[(&str, &[u8])] = &[];
    let seen_of = |names: &'static [Source]| move |s: &Source| names.contains(s);
    let pck = BodyKeys {
        prompt_cache_key: Some("pck".into()),
        ..BodyKeys::default()
    };
    // prompt_cache_key seen, but nvext_session_id and previous_response_id (ranked above) not
    // yet: a later member could still win.
    assert!(!cfg.body_settled(
        Some(&pck),
        &HeaderList(none),
        &seen_of(&[Source::PromptCacheKey])
    ));
    // Both seen (invalid or absent values): settled, whatever comes later.
    assert!(cfg.body_settled(
        Some(&pck),
        &HeaderList(none),
        &seen_of(&[
            Source::NvextSessionId,
            Source::PreviousResponseId,
            Source::PromptCacheKey
        ])
    ));
    // The top source valid: settled at once.
    let nv = BodyKeys {
        nvext_session_id: Some("nv".into()),
        ..BodyKeys::default()
    };
    assert!(cfg.body_settled(
        Some(&nv),
        &HeaderList(none),
        &seen_of(&[Source::NvextSessionId])
    ));
    // A value over 128 bytes is no key: the next sources must be seen.
    let long = BodyKeys {
        nvext_session_id: Some("n".repeat(MAX_KEY_BYTES + 1)),
        ..BodyKeys::default()
    };
    assert!(!cfg.body_settled(
        Some(&long),
        &HeaderList(none),
        &seen_of(&[Source::NvextSessionId])
    ));
    // Nothing seen of a keyless body: only its end settles it.
    assert!(!cfg.body_settled(None, &HeaderList(none), &|_| false));
    assert!(cfg.body_settled(None, &HeaderList(none), &|_| true));
    // A header ranked after a body source settles once that body source is seen empty.
    let items: Vec<String> = ["nvext_session_id", "header:session_id", "prompt_cache_key"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mixed = KeyConfig::try_new(false, &[])
        .unwrap()
        .with_sources(parse_sources(&items).unwrap());
    let hdr: &[(&str, &[u8])] = &[("session_id", b"s")];
    assert!(!mixed.body_settled(None, &HeaderList(hdr), &|_| false));
    assert!(mixed.body_settled(None, &HeaderList(hdr), &seen_of(&[Source::NvextSessionId])));
}
