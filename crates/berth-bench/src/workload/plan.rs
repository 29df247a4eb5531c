//! What each session will do, drawn up front from its own seeded generator.

use crate::rng::Rng;
use crate::workload::prompts::{AgentContext, system_prompts};
use crate::workload::text::words;

/// The distribution parameters of the workload (validated flags).
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadShape {
    /// Mean turns per session (`--session-turns-mean`).
    pub turns_mean: f64,
    /// Standard deviation of turns per session.
    pub turns_stddev: f64,
    /// Mean delay before each turn after the first, in ms.
    pub delay_mean_ms: f64,
    /// Standard deviation of that delay.
    pub delay_stddev_ms: f64,
    /// Words of each shared system prompt (0: none).
    pub shared_system_prompt_length: u64,
    /// Distinct shared system prompts; each root draws one (`--num-system-prompts`).
    pub num_system_prompts: u32,
    /// Mean words of each turn's new user message.
    pub input_tokens_mean: f64,
    /// Standard deviation of that.
    pub input_tokens_stddev: f64,
    /// Mean output tokens requested per turn (`max_tokens`).
    pub output_tokens_mean: f64,
    /// Standard deviation of that.
    pub output_tokens_stddev: f64,
    /// Children each agent spawns (0: no trees).
    pub agent_fanout: u32,
    /// Depth of agent trees (0: no trees).
    pub agent_depth: u32,
    /// How a sub-agent's conversation starts.
    pub agent_context: AgentContext,
}

impl WorkloadShape {
    /// Sessions in one tree: `1 + f + f^2 + ... + f^depth`.
    pub fn sessions_per_tree(&self) -> u64 {
        let f = u64::from(self.agent_fanout);
        (0..=self.agent_depth)
            .fold((0u64, 1u64), |(sum, level), _| {
                (sum.saturating_add(level), level.saturating_mul(f))
            })
            .0
    }

    /// Whether a session at `depth` spawns children.
    pub fn spawns_children(&self, depth: u32) -> bool {
        self.agent_fanout > 0 && depth < self.agent_depth
    }

    /// The shared system prompts (same texts for every run with this seed; none when the
    /// length is 0).
    pub fn system_prompts(&self, seed: u64) -> Vec<String> {
        system_prompts(
            seed,
            self.num_system_prompts,
            self.shared_system_prompt_length,
        )
    }
}

/// One planned turn.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    /// The new user message of this turn.
    pub user_text: String,
    /// `max_tokens` for this turn.
    pub output_tokens: u64,
    /// Pause before sending this turn (0 on the first).
    pub delay_ms: u64,
}

/// One session's plan.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    /// The turns, in order; never empty.
    pub turns: Vec<TurnPlan>,
    /// Children spawned after the first turn (0 for leaves).
    pub children: u32,
}

impl SessionPlan {
    /// Draws a plan for a session at `depth` from `rng`.
    pub fn draw(shape: &WorkloadShape, depth: u32, rng: &mut Rng) -> Self {
        let spawns = shape.spawns_children(depth);
        let min_turns = if spawns { 2 } else { 1 };
        let n = rng.normal_at_least(shape.turns_mean, shape.turns_stddev, min_turns);
        let turns = (0..n)
            .map(|i| {
                let input =
                    rng.normal_at_least(shape.input_tokens_mean, shape.input_tokens_stddev, 1);
                let output =
                    rng.normal_at_least(shape.output_tokens_mean, shape.output_tokens_stddev, 1);
                let delay = if i == 0 {
                    0
                } else {
                    rng.normal_at_least(shape.delay_mean_ms, shape.delay_stddev_ms, 0)
                };
                TurnPlan {
                    user_text: words(rng, input),
                    output_tokens: output,
                    delay_ms: delay,
                }
            })
            .collect();
        Self {
            turns,
            children: if spawns { shape.agent_fanout } else { 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(fanout: u32, depth: u32) -> WorkloadShape {
        WorkloadShape {
            turns_mean: 1.0,
            turns_stddev: 0.0,
            delay_mean_ms: 5.0,
            delay_stddev_ms: 0.0,
            shared_system_prompt_length: 10,
            input_tokens_mean: 4.0,
            input_tokens_stddev: 0.0,
            output_tokens_mean: 3.0,
            output_tokens_stddev: 0.0,
            agent_fanout: fanout,
            agent_depth: depth,
            num_system_prompts: 1,
            agent_context: AgentContext::Fresh,
        }
    }

    #[test]
    fn tree_sizes() {
        assert_eq!(shape(0, 3).sessions_per_tree(), 1);
        assert_eq!(shape(2, 0).sessions_per_tree(), 1);
        assert_eq!(shape(2, 2).sessions_per_tree(), 7);
        assert_eq!(shape(3, 1).sessions_per_tree(), 4);
    }

    #[test]
    fn agents_plan_at_least_two_turns_and_leaves_follow_the_mean() {
        let s = shape(2, 1);
        let root = SessionPlan::draw(&s, 0, &mut Rng::new(1));
        assert_eq!(root.turns.len(), 2);
        assert_eq!(root.children, 2);
        let leaf = SessionPlan::draw(&s, 1, &mut Rng::new(1));
        assert_eq!(leaf.turns.len(), 1);
        assert_eq!(leaf.children, 0);
        assert_eq!(root.turns[0].delay_ms, 0);
        assert_eq!(root.turns[1].delay_ms, 5);
        assert_eq!(root.turns[0].user_text.split(' ').count(), 4);
    }
}
