use super::*;
use proptest::prelude::*;

fn cfg(override_on: bool, names: &[&str]) -> KeyConfig {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    KeyConfig::try_new(override_on, &names).unwrap()
}

fn h<'a>(pairs: &'a [(&'a str, &'a [u8])]) -> &'a HeaderList<'a> {
    Box::leak(Box::new(HeaderList(pairs)))
}

#[test]
fn lineage_examples_from_spec() {
    for (rid, key) in [
        ("conv_t2_r1", "conv"),
        ("conv_r1_t2", "conv_r1"),
        ("conv_t2", "conv"),
        ("conv_r3", "conv"),
        ("chat-7f3a_t1", "chat-7f3a"),
        ("chat-7f3a_t2_r1", "chat-7f3a"),
        ("conv", "conv"),
        // each suffix at most once
        ("conv_t1_t2", "conv_t1"),
        ("conv_r1_r2", "conv_r1"),
        // tag must be lowercase, digits required, at the very end
        ("conv_T2", "conv_T2"),
        ("conv_R2", "conv_R2"),
        ("conv_t", "conv_t"),
        ("conv_t2x", "conv_t2x"),
        ("conv_x2", "conv_x2"),
        ("convt2", "convt2"),
        // nothing left: the whole rid is the key
        ("_t2", "_t2"),
        ("_t2_r1", "_t2_r1"),
        ("_r1", "_r1"),
        // non-ASCII base survives
        ("日本_t3", "日本"),
        ("_", "_"),
        ("", ""),
    ] {
        assert_eq!(strip_lineage(rid), key, "rid {rid:?}");
    }
}

#[test]
fn override_uses_stripped_rid() {
    let c = cfg(true, &["x-smg-routing-key"]);
    let k = c.derive(Some("conv_t2_r1"), h(&[])).unwrap();
    assert_eq!(
        k,
        RoutingKey {
            key: "conv".into(),
            source: KeySource::Rid
        }
    );
}

#[test]
fn rid_ignored_without_override() {
    let c = cfg(false, &["x-smg-routing-key"]);
    assert_eq!(c.derive(Some("conv_t2"), h(&[])), None);
    let k = c
        .derive(Some("conv_t2"), h(&[("x-smg-routing-key", b"hdr_t3")]))
        .unwrap();
    // without the override header keys are not stripped
    assert_eq!(
        k,
        RoutingKey {
            key: "hdr_t3".into(),
            source: KeySource::Header
        }
    );
}

#[test]
fn rid_beats_header_under_override() {
    let c = cfg(true, &["x-smg-routing-key"]);
    let k = c
        .derive(Some("conv_t1"), h(&[("x-smg-routing-key", b"unique-123")]))
        .unwrap();
    assert_eq!(k.source, KeySource::Rid);
    assert_eq!(k.key, "conv");
}

#[test]
fn header_keys_stripped_under_override() {
    let c = cfg(true, &["x-smg-routing-key"]);
    let k = c
        .derive(None, h(&[("x-smg-routing-key", b"conv_t2")]))
        .unwrap();
    assert_eq!(
        k,
        RoutingKey {
            key: "conv".into(),
            source: KeySource::Header
        }
    );
}

#[test]
fn overlong_stripped_rid_falls_back_to_headers() {
    let c = cfg(true, &["x-smg-routing-key"]);
    let long = format!("{}_t1", "a".repeat(129));
    let k = c
        .derive(Some(&long), h(&[("x-smg-routing-key", b"fallback")]))
        .unwrap();
    assert_eq!(
        k,
        RoutingKey {
            key: "fallback".into(),
            source: KeySource::Header
        }
    );
    assert_eq!(c.derive(Some(&long), h(&[])), None);
    // exactly 128 after stripping is fine, even if the rid itself is longer
    let edge = format!("{}_t1_r2", "b".repeat(128));
    assert_eq!(c.derive(Some(&edge), h(&[])).unwrap().key, "b".repeat(128));
}

#[test]
fn empty_rid_falls_back_to_headers() {
    let c = cfg(true, &["x-smg-routing-key"]);
    let k = c
        .derive(Some(""), h(&[("x-smg-routing-key", b"k")]))
        .unwrap();
    assert_eq!(k.source, KeySource::Header);
}

#[test]
fn header_order_and_invalid_values_skipped() {
    let c = cfg(false, &["x-routing-key", "x-smg-routing-key"]);
    // first valid in configured order wins, regardless of request order
    let k = c
        .derive(
            None,
            h(&[
                ("x-smg-routing-key", b"second"),
                ("x-routing-key", b"first"),
            ]),
        )
        .unwrap();
    assert_eq!(k.key, "first");
    let long = [b'a'; 129];
    let exact = vec![b'a'; 128];
    for bad in [&b""[..], &long[..], b"\xff\xfe"] {
        let k = c
            .derive(
                None,
                h(&[("x-routing-key", bad), ("x-smg-routing-key", b"second")]),
            )
            .unwrap();
        assert_eq!(k.key, "second", "value {bad:?} must be skipped");
    }
    let k = c.derive(None, h(&[("x-routing-key", &exact)])).unwrap();
    assert_eq!(k.key.len(), 128);
    assert_eq!(c.derive(None, h(&[("x-routing-key", b"")])), None);
}

#[test]
fn header_names_match_case_insensitively() {
    let c = cfg(false, &["X-SMG-Routing-Key"]);
    assert_eq!(c.header_names(), ["x-smg-routing-key"]);
    let k = c.derive(None, h(&[("X-Smg-Routing-KEY", b"v")])).unwrap();
    assert_eq!(k.key, "v");
}

#[test]
fn invalid_header_names_refuse_configuration() {
    for bad in ["", "x key", "x:key", "x\u{e9}", "(x)", "x/y"] {
        let err = KeyConfig::try_new(false, &[bad.to_string()]).unwrap_err();
        assert!(err.to_string().contains("--routing-key-headers"), "{err}");
    }
}

#[test]
fn never_derived_from_other_headers() {
    let c = cfg(true, &["x-smg-routing-key"]);
    let k = c.derive(
        None,
        h(&[
            ("authorization", b"Bearer sk-constant"),
            ("x-forwarded-for", b"10.0.0.1"),
            ("cookie", b"a=b"),
        ]),
    );
    assert_eq!(k, None);
}

proptest! {
    #[test]
    fn stripping_is_a_prefix_and_never_empty(rid in "[a-z_0-9tr]{0,24}") {
        let k = strip_lineage(&rid);
        prop_assert!(rid.starts_with(k));
        prop_assert!(!k.is_empty() || rid.is_empty());
    }

    #[test]
    fn turn_and_retry_suffixes_share_a_key(base in "[a-zA-Z0-9-]{1,20}", t in 0u32..1000, r in 0u32..1000) {
        let turn = format!("{base}_t{t}");
        let retry = format!("{base}_t{t}_r{r}");
        prop_assert_eq!(strip_lineage(&turn), base.as_str());
        prop_assert_eq!(strip_lineage(&retry), base.as_str());
    }
}

#[test]
fn the_body_decision_takes_a_header_value_as_the_key_does() {
    let long = vec![b'k'; MAX_KEY_BYTES];
    let too_long = vec![b'k'; MAX_KEY_BYTES + 1];
    for raw in [
        &b""[..],
        b"session-1",
        &long,
        &too_long,
        "caf\u{e9}".as_bytes(),
        b"bad\xff",
        b"\xc3",
    ] {
        assert_eq!(
            is_valid_header_key(raw),
            valid_header_key(raw).is_some(),
            "{raw:?}"
        );
    }
}

proptest! {
    #[test]
    fn any_header_value_is_valid_for_the_body_decision_exactly_when_it_is_a_key(
        raw in proptest::collection::vec(any::<u8>(), 0..140)
    ) {
        prop_assert_eq!(is_valid_header_key(&raw), valid_header_key(&raw).is_some());
    }
}
