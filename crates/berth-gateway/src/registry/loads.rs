//! The load monitor: every `--load-monitor-interval` seconds each worker's `GET /v1/loads`
//! (SGLang's older `/get_load` when that path is missing), published as one immutable
//! [`WorkerLoads`] the request path hands to the routing core (SMG 1.13's load monitoring, on by
//! default; overload protection and `agentic` read it).
//!
//! Data-parallel ranks of one server (`<url>@<rank>`) share its base URL: the base is asked
//! once and each rank worker takes its own `dp_rank` entry; a plain worker sums `num_waiting_reqs`
//! over the entries its answer lists and takes the mean `token_usage`. A worker that does not
//! answer (or answers without those fields) has no entry in the round: it counts as not
//! overloaded. Each call gets `--health-check-timeout-secs` and reads at most [`LIMIT`] bytes;
//! a round holds one entry per registered worker at most, with the requests this gateway had
//! in flight to the worker as the round closed (overload protection counts what it sends
//! after that as queued until the next round).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinSet;

use super::{Registry, Worker};
use crate::routing::{WorkerId, WorkerLoad, WorkerLoads};
use crate::upstream::{self, HttpClient};

/// Largest load answer read.
pub(crate) const LIMIT: usize = 1 << 20;

/// The paths asked, in order (the second is SGLang's older alias).
const PATHS: [&str; 2] = ["/v1/loads", "/get_load"];

/// Polls every registered worker each `interval` until the task is aborted.
pub(crate) fn spawn_load_monitor(
    registry: Arc<Registry>,
    client: HttpClient,
    interval: Duration,
    timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let loads = poll_once(&registry, &client, timeout).await;
            registry.set_loads(loads);
        }
    })
}

/// One round over every registered worker.
pub(crate) async fn poll_once(
    registry: &Registry,
    client: &HttpClient,
    timeout: Duration,
) -> WorkerLoads {
    let mut groups: BTreeMap<String, Vec<Arc<Worker>>> = BTreeMap::new();
    for w in registry.workers() {
        let base = w.addr.uri("/").map(|u| u.to_string()).unwrap_or_default();
        groups.entry(base).or_default().push(w);
    }
    let mut set = JoinSet::new();
    for (_, group) in groups {
        let client = client.clone();
        set.spawn(async move {
            let answer = ask(&client, &group[0], timeout).await;
            group
                .iter()
                .filter_map(|w| Some((w.id, load_of(w.addr.rank(), answer.as_ref()?)?)))
                .collect::<Vec<(WorkerId, WorkerLoad)>>()
        });
    }
    let mut entries = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok(group) = joined {
            entries.extend(group);
        }
    }
    // what this gateway has in flight to each worker as the round closes, and of that what
    // awaits its first byte: requests sent there later count as queued until their first byte
    // or the next round (`routing::OverloadConfig::screen`)
    let view = registry.view();
    for (id, load) in &mut entries {
        (load.in_flight, load.awaiting) = view.snapshot.flight(*id);
    }
    WorkerLoads::new(entries)
}

/// The first path that answers 2xx with JSON.
async fn ask(client: &HttpClient, worker: &Worker, timeout: Duration) -> Option<Value> {
    for path in PATHS {
        match upstream::send_empty(
            client,
            http::Method::GET,
            &worker.addr,
            path,
            timeout,
            LIMIT,
        )
        .await
        {
            Ok((200..=299, body)) => return serde_json::from_slice(&body).ok(),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// A worker's load from its server's answer: `{"loads": [...]}` (SGLang's `/v1/loads`), a bare
/// list of entries, or one entry; a rank worker takes its own `dp_rank` entry.
pub(crate) fn load_of(rank: Option<u32>, answer: &Value) -> Option<WorkerLoad> {
    let entries: Vec<&Value> = match answer {
        Value::Array(list) => list.iter().collect(),
        Value::Object(o) => match o.get("loads").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![answer],
        },
        _ => return None,
    };
    let mine: Vec<&Value> = entries
        .into_iter()
        .filter(|e| {
            rank.is_none_or(|r| e.get("dp_rank").and_then(Value::as_u64) == Some(u64::from(r)))
        })
        .collect();
    let waiting: Vec<f64> = mine
        .iter()
        .filter_map(|e| e.get("num_waiting_reqs").and_then(Value::as_f64))
        .collect();
    let usage: Vec<f64> = mine
        .iter()
        .filter_map(|e| e.get("token_usage").and_then(Value::as_f64))
        .filter(|u| u.is_finite())
        .collect();
    if waiting.is_empty() && usage.is_empty() {
        return None;
    }
    let waiting = waiting.iter().sum::<f64>().clamp(0.0, f64::from(u32::MAX)) as u32;
    let token_usage = if usage.is_empty() {
        0.0
    } else {
        (usage.iter().sum::<f64>() / usage.len() as f64).clamp(0.0, 1.0)
    };
    Some(WorkerLoad {
        waiting_reqs: waiting,
        token_usage,
        in_flight: 0,
        awaiting: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::load_of;
    use serde_json::json;

    #[test]
    fn a_worker_sums_its_queues_and_averages_its_usage() {
        let a = json!({"loads": [
            {"dp_rank": 0, "num_waiting_reqs": 3, "token_usage": 0.5},
            {"dp_rank": 1, "num_waiting_reqs": 6, "token_usage": 0.9},
        ]});
        let all = load_of(None, &a).unwrap();
        assert_eq!(all.waiting_reqs, 9);
        assert!((all.token_usage - 0.7).abs() < 1e-9);
        let rank1 = load_of(Some(1), &a).unwrap();
        assert_eq!((rank1.waiting_reqs, rank1.token_usage), (6, 0.9));
        assert_eq!(load_of(Some(2), &a), None);
    }

    #[test]
    fn older_shapes_and_junk() {
        let one = json!({"num_waiting_reqs": 2, "token_usage": 0.25});
        assert_eq!(load_of(None, &one).unwrap().waiting_reqs, 2);
        let list = json!([{"num_waiting_reqs": 1}, {"num_waiting_reqs": 4}]);
        let l = load_of(None, &list).unwrap();
        assert_eq!((l.waiting_reqs, l.token_usage), (5, 0.0));
        assert_eq!(load_of(None, &json!({"status": "ok"})), None);
        assert_eq!(load_of(None, &json!("x")), None);
        // out-of-range values are clamped, never trusted
        let wild = json!({"num_waiting_reqs": -5, "token_usage": 7.0});
        let w = load_of(None, &wild).unwrap();
        assert_eq!((w.waiting_reqs, w.token_usage), (0, 1.0));
    }
}
