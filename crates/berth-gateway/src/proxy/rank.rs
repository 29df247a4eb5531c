//! Data-parallel workers (`<url>@<rank>`): the rank goes into the request body.
//!
//! As SGLang's dp-aware routing does, a request for a rank worker is sent to the worker's base
//! URL with `"data_parallel_rank": <rank>` at the top level of its JSON body. Only bodies for
//! rank workers are rewritten, and only here: every other member is copied as its original bytes
//! (only the whitespace between top-level members goes), an existing `data_parallel_rank` is
//! replaced, and a body that is not a JSON object is sent unchanged.

use bytes::Bytes;

/// SGLang's request field for the data-parallel rank.
pub(crate) const RANK_FIELD: &str = "data_parallel_rank";

/// `body` with `"data_parallel_rank": rank` set at its top level; `None` when `body` is not a
/// JSON object (then it is forwarded unchanged).
pub(crate) fn with_rank(body: &[u8], rank: u32) -> Option<Bytes> {
    super::rewrite::with_members(body, &[RANK_FIELD], &format!("\"{RANK_FIELD}\":{rank}"))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::with_rank;

    fn parsed(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn the_rank_is_added_and_other_members_keep_their_bytes() {
        let body =
            br#"{ "model": "m", "seed": 18446744073709551616, "x": 1.50, "k\u00e9": [1, 2] }"#;
        let out = with_rank(body, 3).unwrap();
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.contains("18446744073709551616"), "{text}");
        assert!(text.contains("1.50"), "{text}");
        assert!(text.contains("[1, 2]"), "{text}");
        let v = parsed(&out);
        assert_eq!(v["data_parallel_rank"], 3);
        assert_eq!(v["model"], "m");
        assert_eq!(v["k\u{e9}"], json!([1, 2]));
    }

    #[test]
    fn an_existing_rank_is_replaced() {
        let out = with_rank(
            br#"{"data_parallel_rank":9,"a":{"data_parallel_rank":9}}"#,
            0,
        );
        let out = out.unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"a":{"data_parallel_rank":9},"data_parallel_rank":0}"#
        );
        assert_eq!(
            with_rank(b"{}", 1).unwrap(),
            &br#"{"data_parallel_rank":1}"#[..]
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_is_left_alone() {
        for body in [
            &b"[1,2]"[..],
            b"hello",
            b"",
            b"{\"a\":1",
            b"{\"a\":1} x",
            b"42",
        ] {
            assert!(with_rank(body, 1).is_none(), "{body:?}");
        }
    }
}
