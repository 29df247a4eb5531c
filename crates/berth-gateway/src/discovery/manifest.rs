//! The discovery manifest: `{"version": 1, "workers": [{"url": "http://10.0.0.1:8000"}, ...]}`.
//!
//! Each worker entry takes SMG's worker fields (`WorkerSpec`, the body of its `POST /workers`):
//! `url` (required; `@<rank>` for a data-parallel rank as with `--worker-urls`), `worker_type`
//! (only `regular`), `connection_mode` (only `http`), and `model_id`, `models`, `runtime_type`
//! (alias `runtime`), `labels`, `priority`, `cost`, `api_key`, `bootstrap_port`, `dp_rank`,
//! `dp_size`, which are checked for their type and otherwise not used (berth learns a worker's
//! models from its `GET /v1/models`; see docs/gateway.md). Other members are ignored, as SMG
//! ignores unknown worker fields. A URL listed twice counts once.

use std::collections::HashMap;

use serde::Deserialize;

use super::source::DesiredWorker;
use crate::upstream::WorkerAddr;

/// The one manifest version understood.
pub(crate) const VERSION: u32 = 1;

#[derive(Deserialize)]
struct Raw {
    version: u32,
    workers: Vec<Entry>,
}

/// One worker entry, with SMG's optional fields.
#[derive(Deserialize)]
struct Entry {
    url: String,
    worker_type: Option<String>,
    connection_mode: Option<String>,
    model_id: Option<String>,
    models: Option<serde_json::Value>,
    #[serde(alias = "runtime")]
    runtime_type: Option<String>,
    labels: Option<HashMap<String, String>>,
    priority: Option<u32>,
    cost: Option<f32>,
    api_key: Option<String>,
    bootstrap_port: Option<u16>,
    dp_rank: Option<usize>,
    dp_size: Option<usize>,
}

impl Entry {
    /// Names of the SMG fields this entry sets that berth does not act on.
    fn unused(&self) -> impl Iterator<Item = &'static str> {
        [
            ("model_id", self.model_id.is_some()),
            ("models", self.models.is_some()),
            ("runtime_type", self.runtime_type.is_some()),
            ("labels", self.labels.is_some()),
            ("priority", self.priority.is_some()),
            ("cost", self.cost.is_some()),
            ("api_key", self.api_key.is_some()),
            ("bootstrap_port", self.bootstrap_port.is_some()),
            ("dp_rank", self.dp_rank.is_some()),
            ("dp_size", self.dp_size.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
    }
}

/// A parsed, valid manifest.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// The workers, deduplicated, in file order.
    pub(crate) workers: Vec<DesiredWorker>,
    /// SMG fields present in the file that berth accepts but does not use (sorted, unique).
    pub(crate) unused_fields: Vec<&'static str>,
}

/// Parses and validates a manifest; the error says what is wrong (and where).
pub(crate) fn parse(bytes: &[u8]) -> Result<Manifest, String> {
    let raw: Raw = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if raw.version != VERSION {
        return Err(format!(
            "version {} is not supported (expected {VERSION})",
            raw.version
        ));
    }
    let mut workers: Vec<DesiredWorker> = Vec::with_capacity(raw.workers.len());
    let mut unused_fields = Vec::new();
    for (i, e) in raw.workers.iter().enumerate() {
        let at = |why: String| format!("workers[{i}]: {why}");
        WorkerAddr::parse(&e.url).map_err(at)?;
        if let Some(t) = e.worker_type.as_deref().filter(|t| *t != "regular") {
            return Err(at(format!(
                "worker_type `{t}` is not supported by file discovery (only `regular`)"
            )));
        }
        if let Some(m) = e.connection_mode.as_deref().filter(|m| *m != "http") {
            return Err(at(format!(
                "connection_mode `{m}` is not supported (only `http`)"
            )));
        }
        unused_fields.extend(e.unused());
        if !workers.iter().any(|w| w.url == e.url) {
            workers.push(DesiredWorker { url: e.url.clone() });
        }
    }
    unused_fields.sort_unstable();
    unused_fields.dedup();
    Ok(Manifest {
        workers,
        unused_fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(m: &Manifest) -> Vec<&str> {
        m.workers.iter().map(|w| w.url.as_str()).collect()
    }

    #[test]
    fn a_minimal_manifest_and_smg_fields() {
        let m = parse(
            br#"{"version": 1, "workers": [{"url": "http://a:1"}, {"url": "http://b:2@3"}]}"#,
        )
        .unwrap();
        assert_eq!(urls(&m), ["http://a:1", "http://b:2@3"]);
        assert!(m.unused_fields.is_empty());
        let m = parse(
            br#"{"version": 1, "workers": [{"url": "http://a:1", "worker_type": "regular",
                "connection_mode": "http", "model_id": "m", "priority": 5, "cost": 1.5,
                "labels": {"zone": "a"}, "api_key": "k", "some_future_field": [1]},
                {"url": "http://a:1"}]}"#,
        )
        .unwrap();
        assert_eq!(urls(&m), ["http://a:1"], "a URL listed twice counts once");
        assert_eq!(
            m.unused_fields,
            ["api_key", "cost", "labels", "model_id", "priority"]
        );
        let empty = parse(br#"{"version": 1, "workers": []}"#).unwrap();
        assert!(empty.workers.is_empty());
    }

    #[test]
    fn invalid_manifests_say_why() {
        for (text, needle) in [
            ("", "EOF"),
            ("{", "EOF"),
            (r#"{"workers": []}"#, "version"),
            (r#"{"version": 1}"#, "workers"),
            (r#"{"version": 2, "workers": []}"#, "version 2"),
            (r#"{"version": 1, "workers": [{}]}"#, "url"),
            (
                r#"{"version": 1, "workers": [{"url": "ftp://a:1"}]}"#,
                "workers[0]",
            ),
            (
                r#"{"version": 1, "workers": [{"url": "http://a:1"}, {"url": "http://b:1@x"}]}"#,
                "workers[1]",
            ),
            (
                r#"{"version": 1, "workers": [{"url": "http://a:1", "worker_type": "prefill"}]}"#,
                "worker_type",
            ),
            (
                r#"{"version": 1, "workers": [{"url": "http://a:1", "connection_mode": "grpc"}]}"#,
                "connection_mode",
            ),
            (
                r#"{"version": 1, "workers": [{"url": "http://a:1", "priority": "high"}]}"#,
                "invalid type",
            ),
        ] {
            let err = parse(text.as_bytes()).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
