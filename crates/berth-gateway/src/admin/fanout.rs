//! The routes that ask every worker: `POST /flush_cache` and `GET /get_loads`.
//!
//! Data-parallel ranks of one server (`<url>@<rank>`) share its base URL: the base is asked
//! once and the answer counts for each of its ranks. Every worker is asked, healthy or not (a
//! flush after a worker came back must reach it; a worker that does not answer is reported).
//! Each call gets `--health-check-timeout-secs`. Shapes are SMG 1.13's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use http::{Method, Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use super::respond::json;
use crate::proxy::Body;
use crate::registry::Worker;
use crate::state::AppState;
use crate::upstream::{self, HttpClient};

/// Largest worker answer read.
const LIMIT: usize = 1 << 20;

/// Registered workers grouped by the base URL they share (a plain worker is its own group).
fn by_base(workers: Vec<Arc<Worker>>) -> BTreeMap<String, Vec<Arc<Worker>>> {
    let mut groups: BTreeMap<String, Vec<Arc<Worker>>> = BTreeMap::new();
    for w in workers {
        let base = w.addr.uri("/").map(|u| u.to_string()).unwrap_or_default();
        groups.entry(base).or_default().push(w);
    }
    groups
}

/// Calls `method path` once per base URL, in parallel; each worker gets its base's answer
/// (the JSON body of a 2xx, else the error).
async fn ask_all(
    state: &AppState,
    method: Method,
    paths: &'static [&'static str],
) -> Vec<(Arc<Worker>, Result<Value, String>)> {
    let groups = by_base(state.registry.workers());
    let mut set = JoinSet::new();
    for (_, group) in groups {
        let (client, timeout, method) = (
            state.client.clone(),
            state.config.health.timeout,
            method.clone(),
        );
        set.spawn(async move {
            let answer = ask_one(&client, &group[0], method, paths, timeout).await;
            (group, answer)
        });
    }
    let mut out = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok((group, answer)) = joined {
            out.extend(group.into_iter().map(|w| (w, answer.clone())));
        }
    }
    out.sort_by_key(|(w, _)| w.id.0);
    out
}

/// The first of `paths` that answers 2xx (a later path is SGLang's older alias).
async fn ask_one(
    client: &HttpClient,
    worker: &Worker,
    method: Method,
    paths: &[&str],
    timeout: std::time::Duration,
) -> Result<Value, String> {
    let mut last = String::from("no path to ask");
    for path in paths {
        match upstream::send_empty(client, method.clone(), &worker.addr, path, timeout, LIMIT).await
        {
            Ok((200..=299, body)) => {
                return Ok(serde_json::from_slice(&body).unwrap_or(Value::Null));
            }
            Ok((status, _)) => last = format!("{path} answered {status}"),
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// `POST /flush_cache`: every worker's `POST /flush_cache`; 200 when all flushed, else 206
/// with the failures (SMG's `partial_success`).
pub(crate) async fn flush_cache(state: &Arc<AppState>) -> Response<Body> {
    let answers = ask_all(state, Method::POST, &["/flush_cache"]).await;
    let total = answers.len();
    let (ok, failed): (Vec<_>, Vec<_>) = answers.into_iter().partition(|(_, r)| r.is_ok());
    if failed.is_empty() {
        return json(
            StatusCode::OK,
            &json!({
                "status": "success",
                "message": format!("Successfully flushed cache on all {total} workers"),
                "workers_flushed": ok.len(),
                "total_http_workers": total,
                "total_grpc_workers": 0,
                "total_zmq_workers_skipped": 0,
                "total_workers": total,
            }),
        );
    }
    let failed: Vec<Value> = failed
        .into_iter()
        .map(|(w, r)| json!({"worker": &*w.url, "error": r.err().unwrap_or_default()}))
        .collect();
    json(
        StatusCode::PARTIAL_CONTENT,
        &json!({
            "status": "partial_success",
            "message": format!("Cache flush: {} succeeded, {} failed", ok.len(), failed.len()),
            "workers_flushed": ok.len(),
            "successful": ok.iter().map(|(w, _)| &*w.url).collect::<Vec<_>>(),
            "failed": failed,
            "total_http_workers": total,
            "total_grpc_workers": 0,
            "total_zmq_workers_skipped": 0,
            "total_workers": total,
        }),
    )
}

/// The load entries a worker's `/v1/loads` answer holds for it: all of them, or a rank
/// worker's own `dp_rank`; each tagged with the worker as SMG does.
fn entries_for(worker: &Worker, answer: &Value) -> Vec<Value> {
    let loads = answer.get("loads").and_then(Value::as_array);
    loads
        .into_iter()
        .flatten()
        .filter(|l| {
            worker.addr.rank().is_none_or(|rank| {
                l.get("dp_rank").and_then(Value::as_u64) == Some(u64::from(rank))
            })
        })
        .filter_map(Value::as_object)
        .map(|l| {
            let mut e = Map::new();
            e.insert("worker".into(), Value::from(&*worker.url));
            e.insert("worker_type".into(), Value::from("regular"));
            e.extend(l.iter().map(|(k, v)| (k.clone(), v.clone())));
            Value::Object(e)
        })
        .collect()
}

/// The fleet sums and means SMG puts under `aggregate`.
fn aggregate(loads: &[Value]) -> Value {
    let num = |l: &Value, k: &str| l.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let sum = |k: &str| loads.iter().map(|l| num(l, k)).sum::<f64>();
    // Means are rounded to 4 decimals, as SMG reports them.
    let mean = |k: &str| {
        if loads.is_empty() {
            0.0
        } else {
            (sum(k) / loads.len() as f64 * 10_000.0).round() / 10_000.0
        }
    };
    let total_reqs: f64 = loads
        .iter()
        .map(|l| match l.get("num_total_reqs").and_then(Value::as_f64) {
            Some(n) => n,
            None => num(l, "num_running_reqs") + num(l, "num_waiting_reqs"),
        })
        .sum();
    json!({
        "total_running_reqs": sum("num_running_reqs") as u64,
        "total_waiting_reqs": sum("num_waiting_reqs") as u64,
        "total_reqs": total_reqs as u64,
        "avg_token_usage": mean("token_usage"),
        "avg_throughput": mean("gen_throughput"),
        "avg_utilization": mean("utilization"),
    })
}

/// `GET /get_loads`: every worker's `GET /v1/loads` (or SGLang's older `/get_load`), one entry
/// per worker and data-parallel rank, with fleet totals. Workers that did not answer are listed
/// under `failed` (berth's; absent when all answered).
pub(crate) async fn get_loads(state: &Arc<AppState>) -> Response<Body> {
    let answers = ask_all(state, Method::GET, &["/v1/loads", "/get_load"]).await;
    let mut loads = Vec::new();
    let mut failed = Vec::new();
    for (w, answer) in &answers {
        match answer {
            Ok(a) => loads.extend(entries_for(w, a)),
            Err(e) => failed.push(json!({"worker": &*w.url, "error": e})),
        }
    }
    let mut body = json!({
        "timestamp": iso8601(SystemTime::now()),
        "version": concat!("berth-", env!("CARGO_PKG_VERSION")),
        "dp_rank_count": loads.len(),
        "aggregate": aggregate(&loads),
        "loads": loads,
    });
    if !failed.is_empty() {
        body["failed"] = Value::from(failed);
    }
    json(StatusCode::OK, &body)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` (UTC), as SMG stamps its load report.
fn iso8601(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since the epoch (Howard Hinnant's `civil_from_days`).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde_json::json;

    #[test]
    fn iso8601_is_utc() {
        let t = UNIX_EPOCH + Duration::from_micros(1_795_966_220_123_456);
        assert_eq!(super::iso8601(t), "2026-11-29T15:30:20.123456+00:00");
        assert_eq!(
            super::iso8601(UNIX_EPOCH),
            "1970-01-01T00:00:00.000000+00:00"
        );
    }

    #[test]
    fn aggregate_sums_and_means() {
        let loads = vec![
            json!({"num_running_reqs": 2, "num_waiting_reqs": 1, "token_usage": 0.5, "gen_throughput": 10.0, "utilization": 0.2}),
            json!({"num_running_reqs": 4, "num_waiting_reqs": 0, "num_total_reqs": 9, "token_usage": 0.1, "gen_throughput": 30.0, "utilization": 0.4}),
        ];
        let a = super::aggregate(&loads);
        assert_eq!(a["total_running_reqs"], 6);
        assert_eq!(a["total_waiting_reqs"], 1);
        assert_eq!(a["total_reqs"], 12, "3 counted from the first, 9 as given");
        assert_eq!(a["avg_token_usage"], 0.3);
        let tiny = super::aggregate(&[json!({"token_usage": 0.000061})]);
        assert_eq!(tiny["avg_token_usage"], 0.0001, "rounded as SMG does");
        assert_eq!(a["avg_throughput"], 20.0);
        assert_eq!(super::aggregate(&[])["avg_utilization"], 0.0);
    }
}
