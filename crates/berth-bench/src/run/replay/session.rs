//! One replayed session's task: its history as segments, each prompt built from the shared
//! block cache when its turn is due, and the routing key of its trace session id.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use berth_client::RoutingKey;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;

use super::{Shared, TurnRequest, TurnSink};
use crate::rng::Rng;
use crate::trace::blocks::BlockCache;
use crate::trace::timing::{Due, due};
use crate::trace::{RowInput, TraceRow};
use crate::workload::{Message, Role};

/// A trace session key as a routing key: the key itself when a gateway accepts it, otherwise
/// a UUID derived from it.
pub fn routing_key(key: &str) -> String {
    match RoutingKey::new(key) {
        Ok(k) => k.as_str().to_owned(),
        Err(_) => {
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            for b in key.as_bytes() {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
            RoutingKey::from_random_bytes(Rng::new(h).bytes16())
                .as_str()
                .to_owned()
        }
    }
}

/// One turn of a session's history.
enum Segment {
    Blocks {
        ids: Vec<u64>,
        input_length: u64,
        line: u64,
    },
    Text(String),
    Answer(String),
}

fn messages(blocks: &Mutex<BlockCache>, history: &[Segment]) -> Vec<Message> {
    let Ok(mut cache) = blocks.lock() else {
        return Vec::new();
    };
    history
        .iter()
        .map(|seg| match seg {
            Segment::Blocks {
                ids,
                input_length,
                line,
            } => {
                let mut content = String::new();
                cache.append_row(ids, *input_length, *line, &mut content);
                Message {
                    role: Role::User,
                    content,
                }
            }
            Segment::Text(t) => Message {
                role: Role::User,
                content: t.clone(),
            },
            Segment::Answer(a) => Message {
                role: Role::Assistant,
                content: a.clone(),
            },
        })
        .collect()
}

pub(super) async fn run_session<S: TurnSink>(
    shared: Arc<Shared<S>>,
    key: String,
    turns: u32,
    mut rx: mpsc::UnboundedReceiver<TraceRow>,
    starving: Arc<AtomicBool>,
    permit: Option<OwnedSemaphorePermit>,
) {
    let ctx = &shared.ctx;
    let live = ctx.session_started();
    let session_id = routing_key(&key);
    let session_start = Instant::now();
    let mut last_answer = session_start;
    let mut session_first_ms = None;
    let mut history: Vec<Segment> = Vec::new();
    for i in 0..turns {
        let row = match rx.try_recv() {
            Ok(row) => row,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                // The dispatcher clears the flag (and the count) when it hands the row over.
                if !starving.swap(true, Ordering::AcqRel) {
                    shared.starved.fetch_add(1, Ordering::AcqRel);
                }
                shared.notify.notify_one();
                let row = rx.recv().await;
                match row {
                    Some(r) => r,
                    None => break,
                }
            }
        };
        if i == 0 {
            session_first_ms = row.timestamp_ms;
        }
        let t = &shared.trace;
        let at = match due(
            &row,
            t.fixed_schedule,
            t.speedup,
            t.ignore_delays,
            shared.first_ms,
            session_first_ms,
        ) {
            Due::Now => last_answer,
            Due::FromStart(d) => shared.start + d,
            Due::AfterAnswer(d) => last_answer + d,
            Due::FromSessionStart(d) => session_start + d,
        }
        .max(last_answer);
        if !ctx
            .sleep(at.saturating_duration_since(Instant::now()))
            .await
        {
            break;
        }
        history.push(match row.input {
            RowInput::Blocks {
                hash_ids,
                input_length,
            } => Segment::Blocks {
                ids: hash_ids,
                input_length,
                line: row.line,
            },
            RowInput::Text(t) => Segment::Text(t),
        });
        let sent = messages(&shared.blocks, &history);
        let request = TurnRequest {
            session_id: &session_id,
            turn_index: i,
            is_last: i + 1 == turns,
            history: &sent,
            max_tokens: t.max_tokens(row.output_length),
        };
        let Some(answer) = shared.sink.send(ctx, request).await else {
            break;
        };
        drop(sent);
        history.push(Segment::Answer(answer));
        last_answer = Instant::now();
    }
    drop(live);
    drop(permit);
    shared.notify.notify_one();
}
