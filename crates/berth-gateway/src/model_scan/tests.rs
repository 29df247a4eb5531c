use proptest::prelude::*;

use super::*;

fn scan_chunks(chunks: &[&[u8]]) -> Found {
    let mut s = ModelScan::new();
    for c in chunks {
        if s.feed(c).is_some() {
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
    let m = |s: &str| Found::Model(s.to_owned());
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
    assert_eq!(s.feed(big.as_bytes()), Some(&Found::Model("m".into())));
    let mut s = ModelScan::new();
    let big = format!(r#"{{"messages":"{}","model":"m"}}"#, "y".repeat(1 << 20));
    s.feed(big.as_bytes());
    assert!(s.buf.capacity() <= MAX_MODEL.max(MAX_KEY) * 2);
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
        let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points {
            chunks.push(&bytes[last..p]);
            last = p;
        }
        chunks.push(&bytes[last..]);
        prop_assert_eq!(scan_chunks(&chunks), Found::Model(model));
    }
}
