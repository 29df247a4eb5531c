//! Running a generation request through the engine, whole or streamed.
//!
//! The same driver serves every API; only the framing differs (see `framing`). A streamed
//! response's status and headers leave at once, its events as tokens are decoded. A stream task
//! stops as soon as its client goes away, freeing its running slot.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::mpsc;

use super::framing;
use super::request::{GenApi, GenRequest};
use super::respond::{self, SimResponse};
use crate::SimError;
use crate::body::SimBody;
use crate::engine::Job;
use crate::faults::Faults;
use crate::pd::{Role, RoomInfo};
use crate::state::{Shared, unix_now};
use crate::stats::Counters;
use crate::tokenize::{Answer, Token};

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// The request's token limit was reached.
    Length,
    /// The worker's default length was reached (as if the model stopped).
    Stop,
}

/// Everything framing needs to know about a generation.
#[derive(Debug)]
pub(crate) struct Generation {
    pub(crate) id: String,
    pub(crate) model: String,
    pub(crate) created: u64,
    pub(crate) worker_id: String,
    pub(crate) rid: Option<String>,
    pub(crate) text: String,
    pub(crate) prompt_tokens: u64,
    pub(crate) cached_tokens: u64,
    pub(crate) completion_tokens: u32,
    pub(crate) finish: Finish,
    pub(crate) queue_ms: f64,
    pub(crate) prefill_ms: f64,
}

/// Context of one request, decided before the engine sees it.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) shared: Arc<Shared>,
    pub(crate) req: GenRequest,
    pub(crate) model: String,
    pub(crate) rid: Option<String>,
    pub(crate) seq: u64,
    pub(crate) faults: Faults,
    /// Its part in a prefill/decode pair.
    pub(crate) role: Role,
}

fn describe(call: &Call, job: &Job, text: String, n: u32, finish: Finish) -> Generation {
    let prefix = match call.req.api {
        GenApi::Chat => "chatcmpl",
        GenApi::Completion => "cmpl",
        GenApi::Generate => "gen",
        GenApi::Messages => "msg",
        GenApi::Responses => "resp",
    };
    Generation {
        id: call
            .rid
            .clone()
            .unwrap_or_else(|| format!("{prefix}-{}-{}", call.shared.worker_id, call.seq)),
        model: call.model.clone(),
        created: unix_now(),
        worker_id: call.shared.worker_id.clone(),
        rid: call.rid.clone(),
        text,
        prompt_tokens: job.prompt_tokens(),
        cached_tokens: job.cached_tokens(),
        completion_tokens: n,
        finish,
        queue_ms: job.queue_wait().as_secs_f64() * 1e3,
        prefill_ms: job.prefill_time().as_secs_f64() * 1e3,
    }
}

fn limit(call: &Call) -> (u32, Finish) {
    // A prefill server generates the first token only; the decode server does the rest.
    if matches!(call.role, Role::Prefill { .. }) {
        return (1, Finish::Length);
    }
    match call.req.max_tokens {
        Some(n) => (n, Finish::Length),
        None => (call.shared.config.default_max_tokens, Finish::Stop),
    }
}

/// Admits and prefills; the answer's words are produced by the caller.
async fn start(call: &mut Call) -> Result<(Job, Generation, Answer), SimError> {
    let prompt = std::mem::take(&mut call.req.prompt);
    let mut job = call.shared.engine.admit(&call.model, prompt).await?;
    let c = &call.shared.counters;
    Counters::bump(&c.prompt_tokens, job.prompt_tokens());
    match call.role {
        Role::Decode(_) => job.skip_prefill(),
        Role::Regular | Role::Prefill { .. } => job.prefill(call.faults.slowdown).await,
    }
    // A decode worker received the prompt's KV cache: no prefill here, and the prefix-cache hit
    // it reports is the prefill worker's. Otherwise the hit is what the prefill found when it
    // started (the prefix is matched again then).
    let cached = match call.role {
        Role::Decode(RoomInfo { cached_tokens, .. }) => cached_tokens,
        Role::Regular | Role::Prefill { .. } => job.cached_tokens(),
    };
    Counters::bump(&c.cached_tokens, cached);
    if let Role::Prefill { room } = call.role {
        call.shared.rooms.ready(
            room,
            RoomInfo {
                prompt_tokens: job.prompt_tokens(),
                cached_tokens: cached,
            },
        );
    }
    let (n, finish) = limit(call);
    let mut generation = describe(call, &job, String::new(), n, finish);
    generation.cached_tokens = cached;
    let answer = Answer::new(job.prompt());
    Ok((job, generation, answer))
}

fn done(shared: &Shared, job: Job, output: &[Token]) {
    job.finish(output);
    Counters::bump(&shared.counters.completion_tokens, output.len() as u64);
    Counters::bump(&shared.counters.completed, 1);
}

/// Runs a non-streamed generation and frames its whole response.
pub(crate) async fn whole(mut call: Call) -> SimResponse {
    let (job, mut generation, answer) = match start(&mut call).await {
        Ok(started) => started,
        Err(err) => {
            return respond::error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                &err.to_string(),
                None,
            );
        }
    };
    let mut output = Vec::with_capacity(generation.completion_tokens as usize);
    let mut answer = answer;
    for _ in 0..generation.completion_tokens {
        job.decode_step(call.faults.slowdown).await;
        let (word, token) = answer.next_word();
        generation.text.push_str(word);
        output.push(token);
    }
    done(&call.shared, job, &output);
    let body = framing::whole(call.req.api, &generation);
    if call.faults.drop_after_chunks.is_some() {
        respond::json_cut(body)
    } else {
        respond::json_bytes(StatusCode::OK, body)
    }
}

/// Starts a streamed generation; its events follow as they are decoded.
pub(crate) fn streamed(call: Call) -> SimResponse {
    let (tx, rx) = mpsc::channel(16);
    let task = tokio::spawn(produce(call, tx));
    respond::sse(SimBody::channel(rx, task))
}

/// Sends events, honouring the drop-mid-stream fault; `Err(())` means stop now.
struct Sender {
    tx: mpsc::Sender<Result<Bytes, SimError>>,
    sent: u32,
    drop_after: Option<u32>,
}

impl Sender {
    async fn send(&mut self, event: Bytes) -> Result<(), ()> {
        if self.drop_after == Some(self.sent) {
            let _ = self.tx.send(Err(SimError::DroppedByFault)).await;
            return Err(());
        }
        self.sent += 1;
        self.tx.send(Ok(event)).await.map_err(|_| ())
    }
}

async fn produce(mut call: Call, tx: mpsc::Sender<Result<Bytes, SimError>>) {
    let mut out = Sender {
        tx,
        sent: 0,
        drop_after: call.faults.drop_after_chunks,
    };
    let _ = stream_events(&mut call, &mut out).await;
}

async fn stream_events(call: &mut Call, out: &mut Sender) -> Result<(), ()> {
    let (job, mut generation, mut answer) = start(call).await.map_err(|_| ())?;
    let api = call.req.api;
    for event in framing::stream_head(api, &generation) {
        out.send(event).await?;
    }
    let mut output = Vec::new();
    for i in 0..generation.completion_tokens as usize {
        job.decode_step(call.faults.slowdown).await;
        let (word, token) = answer.next_word();
        output.push(token);
        if api == GenApi::Generate {
            // SGLang streams the cumulative text; the others only need the new word.
            generation.text.push_str(word);
        }
        out.send(framing::stream_token(api, &generation, i, word))
            .await?;
    }
    done(&call.shared, job, &output);
    for event in framing::stream_tail(api, &generation) {
        out.send(event).await?;
    }
    Ok(())
}
