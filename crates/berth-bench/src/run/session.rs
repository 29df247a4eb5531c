//! One session: its turn loop, its children, and the attempts of one turn.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_client::RoutingKey;
use bytes::Bytes;
use serde_json::Value;

use crate::config::ExportLevel;
use crate::metrics::{RawRequest, RequestRecord};
use crate::rng::Rng;
use crate::routing::{RequestIdentity, WireRequest};
use crate::run::context::RunContext;
use crate::trace::ideal::{IdealCache, sent_tokens};
use crate::transport::Exchange;
use crate::workload::message::request_body;
use crate::workload::prompts::system_prompt_choice;
use crate::workload::{AgentContext, Message, Role, SessionPlan};

/// Where a session sits in its agent tree.
#[derive(Debug, Clone)]
pub struct SessionNode {
    /// This session's id.
    pub id: String,
    /// The parent's id (children only).
    pub parent: Option<String>,
    /// The root's id.
    pub root: String,
    /// Depth (0 for roots).
    pub depth: u32,
    /// This session's own generator.
    pub rng: Rng,
    /// The messages its history starts with: the tree's system prompt, or (a sub-agent under
    /// `--agent-context parent`) its parent's conversation up to the spawn point.
    pub prefix: Vec<Message>,
}

impl SessionNode {
    /// The root session of tree number `index`.
    pub fn root(ctx: &RunContext, index: u64) -> Self {
        let mut rng = ctx.seed.derive(index);
        let id = mint(ctx, &mut rng);
        let count = ctx.config.shape.num_system_prompts;
        let prefix = ctx
            .system_prompts
            .get(system_prompt_choice(ctx.seed_value, index, count))
            .map(|system| Message {
                role: Role::System,
                content: system.clone(),
            })
            .into_iter()
            .collect();
        Self {
            parent: None,
            root: id.clone(),
            id,
            depth: 0,
            rng,
            prefix,
        }
    }

    /// Child number `k`, spawned when the parent's history is `history`.
    fn child(&self, ctx: &RunContext, k: u32, history: &[Message]) -> Self {
        let mut rng = self.rng.derive(u64::from(k) + 1);
        let id = mint(ctx, &mut rng);
        let prefix = match ctx.config.shape.agent_context {
            AgentContext::Fresh => self.prefix.clone(),
            AgentContext::Parent => history.to_vec(),
        };
        Self {
            id,
            parent: Some(self.id.clone()),
            root: self.root.clone(),
            depth: self.depth + 1,
            rng,
            prefix,
        }
    }
}

/// Session ids are UUIDs: from the seeded generator when `--random-seed` is given (so a
/// rerun places sessions identically under consistent hashing), from the OS otherwise.
fn mint(ctx: &RunContext, rng: &mut Rng) -> String {
    let bytes = rng.bytes16();
    let key = if ctx.config.seed.is_some() {
        RoutingKey::from_random_bytes(bytes)
    } else {
        RoutingKey::mint()
    };
    key.as_str().to_owned()
}

/// A boxed session future (sessions spawn sessions).
pub type SessionFuture = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// Runs one session and, recursively, its children; resolves to its final answer, or `None`
/// when a turn failed or the run stopped before the session finished.
pub fn run_session(ctx: Arc<RunContext>, mut node: SessionNode) -> SessionFuture {
    Box::pin(async move {
        let _live = ctx.session_started();
        let plan = SessionPlan::draw(&ctx.config.shape, node.depth, &mut node.rng);
        let mut history: Vec<Message> =
            Vec::with_capacity(node.prefix.len() + plan.turns.len() * 2);
        history.extend_from_slice(&node.prefix);
        let last = plan.turns.len().saturating_sub(1);
        let mut child_answers: Vec<String> = Vec::new();
        let mut answer = None;
        // The previous answer's id (Responses API): the next turn's `previous_response_id`.
        let mut previous: Option<String> = None;
        for (i, turn) in plan.turns.iter().enumerate() {
            if !ctx.sleep(Duration::from_millis(turn.delay_ms)).await {
                return None;
            }
            let mut user = if node.depth > 0 && i == 0 {
                format!("Sub-agent task: {}", turn.user_text)
            } else {
                turn.user_text.clone()
            };
            if !child_answers.is_empty() {
                user = format!("Sub-agent results:\n{}\n\n{user}", child_answers.join("\n"));
                child_answers.clear();
            }
            history.push(Message {
                role: Role::User,
                content: user,
            });
            let identity = RequestIdentity {
                session_id: &node.id,
                parent_id: node.parent.as_deref(),
                root_id: &node.root,
                turn_index: i as u32,
                retry: 0,
                is_session_final: i == last,
                // Parents wait for their children, so the root's final turn ends the tree.
                is_tree_final: node.depth == 0 && i == last,
                previous_response_id: previous.as_deref(),
            };
            let (text, id) =
                send_turn(&ctx, &node, identity, &history, turn.output_tokens, None).await?;
            previous = id;
            history.push(Message {
                role: Role::Assistant,
                content: text.clone(),
            });
            answer = Some(text);
            if i == 0 && plan.children > 0 {
                let mut set = tokio::task::JoinSet::new();
                for k in 0..plan.children {
                    set.spawn(run_session(Arc::clone(&ctx), node.child(&ctx, k, &history)));
                }
                while let Some(done) = set.join_next().await {
                    if let Ok(Some(a)) = done {
                        child_answers.push(a);
                    }
                }
            }
        }
        answer
    })
}

/// Sends one turn, retrying transport errors, 429 and 5xx up to `--max-retries` times; returns
/// the answer text of the successful attempt and its Responses id (if it had one). With `ideal` (trace replay), the prompt as sent
/// is looked up in and added to the ideal cache, its figures go into the records, and the
/// answer joins the cache.
pub(crate) async fn send_turn(
    ctx: &RunContext,
    node: &SessionNode,
    mut identity: RequestIdentity<'_>,
    history: &[Message],
    max_tokens: u64,
    ideal: Option<&Mutex<IdealCache>>,
) -> Option<(String, Option<String>)> {
    let cfg = &ctx.config;
    // (prompt tokens as sent, ideal cached tokens), computed on the first attempt.
    let mut ideal_prompt: Option<(Vec<u64>, u64)> = None;
    for retry in 0..=cfg.max_retries {
        if retry > 0 && ctx.stopped() {
            return None;
        }
        identity.retry = retry;
        let mut wire = WireRequest {
            headers: Vec::new(),
            body: request_body(cfg.endpoint, &cfg.model, history, max_tokens, cfg.streaming),
        };
        for (k, v) in &cfg.extra_inputs {
            wire.body.insert(k.clone(), v.clone());
        }
        cfg.routing.apply(&identity, &mut wire);
        if let (Some(cache), None) = (ideal, &ideal_prompt) {
            let tokens = sent_tokens(cfg.endpoint, &wire.body);
            let hit = cache.lock().map_or(0, |mut c| c.send(&tokens));
            ideal_prompt = Some((tokens, hit));
        }
        let body = Value::Object(wire.body);
        let bytes = match serde_json::to_vec(&body) {
            Ok(b) => Bytes::from(b),
            Err(_) => return None,
        };
        let seq = ctx.sent.fetch_add(1, Ordering::Relaxed);
        let ex = ctx
            .client
            .send(cfg.endpoint, cfg.streaming, &wire.headers, bytes)
            .await;
        let raw = (cfg.export_level == ExportLevel::Raw).then_some(RawRequest {
            headers: wire.headers,
            body,
        });
        let retryable =
            ex.transport_error.is_some() || ex.status.is_some_and(|s| s == 429 || s >= 500);
        let ok = ex.ok();
        let text = ok.then(|| ex.body.text.clone());
        let response_id = ex.body.response_id.clone();
        let mut rec = record(ctx, node, &identity, seq, &ex, raw);
        if let Some((tokens, hit)) = &ideal_prompt {
            rec.ideal_prompt_tokens = Some(tokens.len() as u64);
            rec.ideal_cached_tokens = Some(*hit);
        }
        ctx.push(rec);
        if ok {
            if let (Some(cache), Some((tokens, _)), Some(answer)) = (ideal, &ideal_prompt, &text)
                && let Ok(mut c) = cache.lock()
            {
                c.answered(tokens, answer);
            }
            return text.map(|t| (t, response_id));
        }
        if !retryable {
            return None;
        }
    }
    None
}

fn record(
    ctx: &RunContext,
    node: &SessionNode,
    id: &RequestIdentity<'_>,
    seq: u64,
    ex: &Exchange,
    raw: Option<RawRequest>,
) -> RequestRecord {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let output_tokens = ex
        .body
        .usage
        .completion_tokens
        .or((ex.body.content_events > 0).then_some(ex.body.content_events));
    let itl_ms = match (ex.ttft, output_tokens) {
        (Some(ttft), Some(n)) if n > 1 && ex.e2e > ttft => Some(ms(ex.e2e - ttft) / (n - 1) as f64),
        _ => None,
    };
    let ok = ex.ok();
    let (error_code, error_message) = if ok {
        (None, None)
    } else if let Some(e) = &ex.transport_error {
        (Some("transport".to_owned()), Some(e.clone()))
    } else {
        let body_err = ex.body.error.clone();
        let code = ex
            .error_code_header
            .clone()
            .or_else(|| body_err.as_ref().and_then(|(c, _)| c.clone()));
        let message = body_err
            .map(|(_, m)| m)
            .or_else(|| ex.body.malformed.then(|| "malformed body".to_owned()));
        (code, message)
    };
    RequestRecord {
        seq,
        session_id: node.id.clone(),
        parent_id: node.parent.clone(),
        root_id: node.root.clone(),
        depth: node.depth,
        turn_index: id.turn_index,
        retry: id.retry,
        warmup: seq < ctx.config.warmup_requests,
        start_ms: ctx.elapsed_ms(ex.started),
        ttft_ms: if ok { ex.ttft.map(ms) } else { None },
        itl_ms: if ok { itl_ms } else { None },
        e2e_ms: ms(ex.e2e),
        status: ex.status,
        ok,
        error_code,
        error_message,
        prompt_tokens: ex.body.usage.prompt_tokens,
        cached_tokens: ex.body.usage.cached_tokens,
        output_tokens,
        routed_worker: ex.routed_worker.clone(),
        sim_worker: ex.sim_worker.clone(),
        raw,
        ideal_prompt_tokens: None,
        ideal_cached_tokens: None,
    }
}
