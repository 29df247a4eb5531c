use proptest::prelude::*;

use super::*;

fn scan_chunks(chunks: &[&[u8]]) -> Found {
    let mut s = ModelScan::new();
    for c in chunks {
        if s.feed(c) {
            break;
        }
    }
    s.finish().clone()
}

fn scan(body: &str) -> Found {
    scan_chunks(&[body.as_bytes()])
}

#[test]
fn finds_the_top_level_model_wherever_it_is() {
    let m = |s: &str| Found::Model(s.into());
    assert_eq!(scan(r#"{"model":"m1","messages":[]}"#), m("m1"));
    assert_eq!(
        scan(
            r#" { "messages" : [{"role":"user","content":"say \"model\": x {[" , "model":"no"}], "max_tokens": 12, "stream": true, "n": null, "model" : "m2" } "#
        ),
        m("m2")
    );
    assert_eq!(
        scan(r#"{"meta":{"model":"inner"},"model":"outer"}"#),
        m("outer")
    );
    assert_eq!(scan(r#"{"mod\u0065l":"m\u00e9"}"#), m("m\u{e9}"));
    assert_eq!(scan(r#"{"model":"a\"b"}"#), m("a\"b"));
    assert_eq!(scan(r#"{"x":-1.5e3,"model":"m"}"#), m("m"));
    assert_eq!(
        scan(r#"{"x":true,"y":[1,[2,{"z":"}"}]],"model":"m"}"#),
        m("m")
    );
}

#[test]
fn no_model_and_not_judged() {
    assert_eq!(scan(r#"{"messages":[{"model":"x"}]}"#), Found::NoModel);
    assert_eq!(scan("{}"), Found::NoModel);
    assert_eq!(scan(r#"{"model":null}"#), Found::NotJudged);
    assert_eq!(scan(r#"{"model":3}"#), Found::NotJudged);
    assert_eq!(scan(r#"[{"model":"m"}]"#), Found::NotJudged);
    assert_eq!(scan("not json"), Found::NotJudged);
    assert_eq!(scan(r#"{"messages":[1,2"#), Found::NotJudged, "cut short");
    assert_eq!(scan(""), Found::NotJudged);
    let long = format!(r#"{{"model":"{}"}}"#, "x".repeat(MAX_MODEL + 1));
    assert_eq!(scan(&long), Found::NotJudged);
    let long_key = format!(r#"{{"{}":1,"model":"m"}}"#, "k".repeat(MAX_KEY * 2));
    assert_eq!(scan(&long_key), Found::Model("m".into()));
}

#[test]
fn stops_at_the_answer_and_keeps_little() {
    let mut s = ModelScan::new();
    let big = format!(r#"{{"model":"m","messages":"{}"}}"#, "y".repeat(1 << 20));
    assert!(s.feed(big.as_bytes()));
    assert_eq!(s.found(), Some(&Found::Model("m".into())));
    let mut s = ModelScan::new();
    let big = format!(r#"{{"messages":"{}","model":"m"}}"#, "y".repeat(1 << 20));
    s.feed(big.as_bytes());
    assert!(s.buf.capacity() <= MAX_MODEL.max(MAX_KEY) * 2);
}

/// The fields a body's scan keeps, as strings, and whether the object ended.
fn fields(chunks: &[&[u8]]) -> (Vec<(Field, Option<String>)>, bool) {
    let mut s = ModelScan::with_fields(&Field::ALL);
    for c in chunks {
        if s.feed(c) {
            break;
        }
    }
    let kept = Field::ALL
        .into_iter()
        .filter_map(|f| {
            s.kept(f).map(|k| {
                (
                    f,
                    match k {
                        Kept::Raw(r) => Some(String::from_utf8(r.clone()).unwrap()),
                        Kept::TooLong => None,
                    },
                )
            })
        })
        .collect();
    (kept, s.ended())
}

#[test]
fn keeps_the_raw_values_of_the_fields_asked_for() {
    let body = r#"{"messages":[{"role":"user","content":"say \"nvext\": {"}],
        "prompt_cache_key" : "p\u0031", "conversation":{"id":"c","x":[1,{"y":"}"}]},
        "metadata":{"user_id":"u_session_s"},"previous_response_id":null,
        "nvext":{"session_control":{"session_id":"s","action":"close"}},"n":7,"model":"m"}"#;
    let want = vec![
        (Field::PromptCacheKey, Some(r#""p\u0031""#.to_owned())),
        (Field::PreviousResponseId, Some("null".to_owned())),
        (
            Field::Conversation,
            Some(r#"{"id":"c","x":[1,{"y":"}"}]}"#.to_owned()),
        ),
        (
            Field::Metadata,
            Some(r#"{"user_id":"u_session_s"}"#.to_owned()),
        ),
        (
            Field::Nvext,
            Some(r#"{"session_control":{"session_id":"s","action":"close"}}"#.to_owned()),
        ),
    ];
    // every field seen: done before the object's end (the model came last)
    let (kept, _) = fields(&[body.as_bytes()]);
    assert_eq!(kept, want);
    // byte by byte: the same
    let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
    assert_eq!(fields(&bytes).0, want);
    // scalars at the end of the object, and a member only once
    let (kept, ended) = fields(&[br#"{"previous_response_id":12,"conversation":true}"#]);
    assert_eq!(
        kept,
        vec![
            (Field::PreviousResponseId, Some("12".to_owned())),
            (Field::Conversation, Some("true".to_owned())),
        ]
    );
    assert!(ended);
    let (kept, _) = fields(&[br#"{"conversation":"a","conversation":"b"}"#]);
    assert_eq!(kept, vec![(Field::Conversation, Some(r#""a""#.to_owned()))]);
    // too long: seen, not kept; nested members of the same name are not top-level
    let long = format!(
        r#"{{"metadata":{{"pad":"{}"}},"x":{{"nvext":1}}}}"#,
        "x".repeat(MAX_FIELD)
    );
    let (kept, ended) = fields(&[long.as_bytes()]);
    assert_eq!(kept, vec![(Field::Metadata, None)]);
    assert!(ended);
    // fields not asked for are not kept
    let mut s = ModelScan::with_fields(&[Field::Nvext]);
    s.feed(br#"{"prompt_cache_key":"p","nvext":{}}"#);
    assert_eq!(
        (s.kept(Field::PromptCacheKey), s.seen(Field::Nvext)),
        (None, true)
    );
}

#[test]
fn done_waits_for_what_was_asked() {
    // A model that is not a string is not judged, and the fields are still read.
    let mut s = ModelScan::with_fields(&[Field::Nvext]);
    assert!(!s.feed(br#"{"model":5,"messages":[]"#));
    assert_eq!(s.found(), Some(&Found::NotJudged));
    assert!(s.feed(br#","nvext":{"a":1}}"#));
    // Asking only for the fields: no wait for the model.
    let mut s = ModelScan::with_fields(&[Field::Nvext]);
    s.want_only(false, &[Field::Nvext]);
    assert!(s.feed(br#"{"nvext":{}"#));
    assert_eq!(s.found(), None);
    // Not an object: ended, nothing kept.
    let mut s = ModelScan::with_fields(&Field::ALL);
    assert!(s.feed(b"[1]"));
    assert!(s.ended());
}

proptest! {
    /// Any split of the body into chunks gives the answer of the whole, and on JSON objects the
    /// answer is serde_json's.
    #[test]
    fn chunking_never_changes_the_answer(
        model in "[a-zA-Z0-9/_.\"\\\\é-]{0,20}",
        before in proptest::collection::vec(("[a-z]{1,8}", "[a-z \"{}\\[\\]:,\\\\]{0,12}"), 0..4),
        cuts in proptest::collection::vec(0usize..200, 0..6),
    ) {
        let mut obj = serde_json::Map::new();
        for (k, v) in &before {
            if k != "model" {
                obj.insert(k.clone(), serde_json::Value::String(v.clone()));
            }
        }
        obj.insert("model".into(), serde_json::Value::String(model.clone()));
        let body = serde_json::Value::Object(obj).to_string();
        let bytes = body.as_bytes();
        let chunks = split_at(bytes, cuts);
        prop_assert_eq!(scan_chunks(&chunks), Found::Model(model.into()));
    }
}

proptest! {
    /// Any split of the body gives the same kept members, and each kept raw value parses to
    /// the value serde_json reads at that top-level member.
    #[test]
    fn kept_members_are_serde_values_whatever_the_chunking(
        members in proptest::collection::vec(
            (
                prop_oneof![
                    Just("nvext"), Just("metadata"), Just("conversation"),
                    Just("prompt_cache_key"), Just("messages"), Just("model"),
                ],
                prop_oneof![
                    "[a-z \"{}\\[\\]:,\\\\]{0,12}".prop_map(serde_json::Value::String),
                    any::<i32>().prop_map(serde_json::Value::from),
                    "[a-z\"]{0,6}".prop_map(|s| serde_json::json!({"session_control": {"session_id": s, "x": [1, {"y": null}]}})),
                    Just(serde_json::json!([true, false, "}"])),
                ],
            ),
            0..6,
        ),
        cuts in proptest::collection::vec(0usize..300, 0..6),
    ) {
        let mut obj = serde_json::Map::new();
        for (k, v) in &members {
            obj.insert((*k).to_owned(), v.clone());
        }
        let body = serde_json::Value::Object(obj.clone()).to_string();
        let bytes = body.as_bytes();
        let chunks = split_at(bytes, cuts);
        let (kept, ended) = fields(&chunks);
        let whole = fields(&[bytes]).0;
        prop_assert_eq!(&kept, &whole);
        for f in Field::ALL {
            let got = kept.iter().find(|(k, _)| *k == f).map(|(_, v)| {
                serde_json::from_str::<serde_json::Value>(v.as_deref().unwrap()).unwrap()
            });
            prop_assert_eq!(got.as_ref(), obj.get(f.name()), "{:?}", f);
        }
        let all_seen = Field::ALL.iter().all(|f| obj.contains_key(f.name()));
        prop_assert!(ended || all_seen);
    }
}

/// The scan's answers after `chunks`, the last one fed as the body's last bytes.
fn fields_last(chunks: &[&[u8]], want_model: bool, wanted: &[Field]) -> (Found, Vec<Option<Kept>>) {
    let mut s = ModelScan::with_fields(wanted);
    s.want_only(want_model, wanted);
    let (last, before) = chunks.split_last().unwrap();
    for c in before {
        s.feed(c);
    }
    let found = s.feed_last(last).clone();
    assert!(s.ended());
    (found, Field::ALL.map(|f| s.kept(f).cloned()).to_vec())
}

#[test]
fn the_last_bytes_are_passed_over_when_they_cannot_name_a_member() {
    let nvext = |v: &str| Some(Kept::Raw(v.as_bytes().to_vec()));
    let chat = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let (found, kept) = fields_last(&[chat], true, &[Field::Nvext]);
    assert_eq!(found, Found::Model("m".into()));
    assert_eq!(kept[Field::Nvext as usize], None);
    // named after the model, plainly or with escapes: scanned and kept
    let (_, kept) = fields_last(
        &[br#"{"model":"m","nvext":{"a":1}}"#],
        true,
        &[Field::Nvext],
    );
    assert_eq!(kept[Field::Nvext as usize], nvext(r#"{"a":1}"#));
    let (_, kept) = fields_last(
        &[br#"{"model":"m","nv\u0065xt":{"a":2}}"#],
        true,
        &[Field::Nvext],
    );
    assert_eq!(kept[Field::Nvext as usize], nvext(r#"{"a":2}"#));
    // a key cut between the frames: its end alone does not spell the name
    let (_, kept) = fields_last(
        &[br#"{"model":"m","nv"#, br#"ext":{"a":3}}"#],
        true,
        &[Field::Nvext],
    );
    assert_eq!(kept[Field::Nvext as usize], nvext(r#"{"a":3}"#));
    // a kept value cut between the frames
    let (_, kept) = fields_last(
        &[br#"{"model":"m","nvext":{"a":"#, br#"4}}"#],
        true,
        &[Field::Nvext],
    );
    assert_eq!(kept[Field::Nvext as usize], nvext(r#"{"a":4}"#));
    // the model after the other members, or none: the answers of a full scan
    let (found, kept) = fields_last(
        &[br#"{"nvext":{},"messages":[],"model":"x"}"#],
        true,
        &[Field::Nvext],
    );
    assert_eq!(
        (found, kept[Field::Nvext as usize].clone()),
        (Found::Model("x".into()), nvext("{}"))
    );
    let (found, _) = fields_last(&[br#"{"messages":[]}"#], true, &[Field::Nvext]);
    assert_eq!(found, Found::NoModel);
    // the model not asked for: members only
    let (_, kept) = fields_last(&[br#"{"nvext":5}"#], false, &[Field::Nvext]);
    assert_eq!(kept[Field::Nvext as usize], nvext("5"));
    // the last bytes begin after a key asked for, before its value (found by the proptest
    // below: the value was lost): scanned and kept
    for cut in [19, 20] {
        let body: &[u8] = br#"{"prompt_cache_key": 0}"#;
        let (_, kept) = fields_last(&[&body[..cut], &body[cut..]], false, &Field::ALL);
        assert_eq!(
            kept[Field::PromptCacheKey as usize],
            nvext("0"),
            "cut at {cut}"
        );
    }
}

proptest! {
    /// Feeding the last chunk as the body's last bytes gives the answers of a full scan.
    #[test]
    fn the_last_chunk_gives_the_answers_of_a_full_scan(
        members in proptest::collection::vec(
            (
                prop_oneof![
                    Just("nvext"), Just("metadata"), Just("conversation"),
                    Just("prompt_cache_key"), Just("messages"), Just("model"), Just("nv"),
                ],
                prop_oneof![
                    "[a-z \"{}\\[\\]:,\\\\]{0,12}".prop_map(serde_json::Value::String),
                    any::<i32>().prop_map(serde_json::Value::from),
                    "[a-z\"]{0,6}".prop_map(|s| serde_json::json!({"nvext": s, "x": [1, {"y": null}]})),
                ],
            ),
            0..6,
        ),
        cuts in proptest::collection::vec(0usize..300, 0..4),
        want_model in any::<bool>(),
        all in any::<bool>(),
    ) {
        let mut obj = serde_json::Map::new();
        for (k, v) in &members {
            obj.insert((*k).to_owned(), v.clone());
        }
        let body = serde_json::Value::Object(obj).to_string();
        let bytes = body.as_bytes();
        let chunks = split_at(bytes, cuts);
        let wanted: &[Field] = if all { &Field::ALL } else { &[Field::Nvext] };
        let mut full = ModelScan::with_fields(wanted);
        full.want_only(want_model, wanted);
        full.feed(bytes);
        let found = full.finish().clone();
        let kept = Field::ALL.map(|f| full.kept(f).cloned()).to_vec();
        let (got_found, got_kept) = fields_last(&chunks, want_model, wanted);
        prop_assert_eq!(got_kept, kept);
        // (the model answer counts only when asked for)
        if want_model {
            prop_assert_eq!(got_found, found);
        }
    }
}

/// `bytes` cut at `cuts` (clamped to its length, in any order) into consecutive chunks, the
/// empty ones included: what a client's frames could be.
fn split_at(bytes: &[u8], cuts: Vec<usize>) -> Vec<&[u8]> {
    let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut last = 0;
    for p in points {
        chunks.push(&bytes[last..p]);
        last = p;
    }
    chunks.push(&bytes[last..]);
    chunks
}

#[test]
fn the_model_is_taken_out_and_the_answer_stays_found() {
    let mut s = ModelScan::new();
    s.feed(br#"{"model":"m1","messages":[]}"#);
    assert_eq!(s.take_model().as_ref().map(ModelText::as_str), Some("m1"));
    // still answered (a late check is not started for it), its value gone
    assert_eq!(s.found(), Some(&Found::Model(String::new().into())));
    assert_eq!(s.take_model().as_ref().map(ModelText::as_str), Some(""));
    for body in [&br#"{"messages":[]}"#[..], br#"{"model":7}"#, b"[1]"] {
        let mut s = ModelScan::new();
        s.feed(body);
        s.finish();
        assert_eq!(s.take_model(), None);
        assert!(s.found().is_some());
    }
    assert_eq!(ModelScan::new().take_model(), None);
}

#[test]
fn a_found_model_is_the_scans_buffer_and_goes_back_to_the_spares() {
    // (each test runs on its own thread: the spares start empty)
    std::thread::spawn(|| {
        let mut s = ModelScan::new();
        s.feed(br#"{"model":"m1"}"#);
        let m = s.take_model().unwrap();
        assert_eq!(m.as_str(), "m1");
        assert!(m.0.capacity() >= MAX_KEY, "the buffer itself, no copy");
        drop(s);
        assert_eq!(spare_bufs(), 0, "the scan has no buffer left");
        drop(m);
        assert_eq!(spare_bufs(), 1, "the model's buffer is a spare again");
        // an escaped value is decoded into a text of its own; the buffer stays with the scan
        let mut s = ModelScan::new();
        s.feed(br#"{"model":"m\u0031"}"#);
        assert_eq!(spare_bufs(), 0);
        let m = s.take_model().unwrap();
        assert_eq!(m.as_str(), "m1");
        drop(s);
        assert_eq!(spare_bufs(), 1);
        drop(m);
        assert_eq!(spare_bufs(), 1, "a decoded text's small buffer is not kept");
        // a value that is not UTF-8 is still not judged, and its buffer stays with the scan
        let mut s = ModelScan::new();
        s.feed(b"{\"model\":\"m\xff\"}");
        assert_eq!(s.found(), Some(&Found::NotJudged));
        assert!(s.buf.capacity() >= MAX_KEY);
    })
    .join()
    .unwrap();
}

#[test]
fn an_ended_scan_gives_its_buffer_to_the_next_one_on_the_thread() {
    // (each test runs on its own thread: the spares start empty)
    std::thread::spawn(|| {
        assert_eq!(spare_bufs(), 0);
        let mut s = ModelScan::new();
        s.feed(br#"{"model":"m1"}"#);
        // (the model's value is the scan's buffer, taken as it is)
        let cap = match s.found() {
            Some(Found::Model(m)) => m.0.capacity(),
            _ => s.buf.capacity(),
        };
        assert!(cap >= MAX_KEY);
        drop(s);
        assert_eq!(spare_bufs(), 1);
        let mut s = ModelScan::new();
        s.feed(br#"{"model":"m2"}"#);
        assert_eq!(spare_bufs(), 0, "taken by the next scan");
        assert_eq!(s.finish(), &Found::Model("m2".into()));
        drop(s);
        assert_eq!(spare_bufs(), 1);
        // a buffer grown past MAX_MODEL (a long kept member) is not kept; never more than
        // SPARE_BUFS are
        let mut s = ModelScan::with_fields(&[Field::Metadata]);
        let long = format!(r#"{{"metadata":{{"x":"{}"}}}}"#, "a".repeat(2 * MAX_MODEL));
        s.feed(long.as_bytes());
        assert!(s.buf.capacity() > MAX_MODEL);
        drop(s);
        assert_eq!(spare_bufs(), 0, "the grown buffer is freed");
        let scans: Vec<ModelScan> = (0..SPARE_BUFS + 5)
            .map(|_| {
                let mut s = ModelScan::new();
                s.feed(br#"{"model":"m"}"#);
                s
            })
            .collect();
        drop(scans);
        assert_eq!(spare_bufs(), SPARE_BUFS);
    })
    .join()
    .unwrap();
}
