//! The synthetic workload: multi-turn sessions and agent trees.
//!
//! A *session* is one live conversation: its own UUID, a planned number of turns, and a history
//! that every turn resends in full, the assistant messages being exactly what the server
//! returned. A session at depth below `--agent-depth` is an agent that, after its first turn,
//! spawns `--agent-fanout` child sessions; the children share the root's system prompt (or, with
//! `--agent-context parent`, start with the parent's whole conversation so far), carry
//! parent and root identities, and run concurrently, and the parent's next turn waits for them
//! and quotes their final answers. Such a parent always plans at least two turns, so the last
//! request of a whole tree is always the root's final turn: that is what lets `dynamo_nvext`
//! with `scope=lineage` know, before sending it, which request closes the tree.
//!
//! - [`text`]: deterministic filler text, one word per token.
//! - [`plan`]: turn counts, lengths and delays drawn from the seeded RNG.
//! - [`message`]: the chat history and how each endpoint type serializes it.
//! - [`prompts`]: the shared system prompts each root draws from, and how a sub-agent's
//!   conversation starts (`--agent-context`).

pub mod message;
pub mod plan;
pub mod prompts;
pub mod text;

pub use message::{EndpointType, Message, Role};
pub use plan::{SessionPlan, TurnPlan, WorkloadShape};
pub use prompts::AgentContext;
