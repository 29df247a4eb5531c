//! What a session's prompt starts with: one of the shared system prompts and, for a sub-agent
//! under `--agent-context parent`, its parent's conversation so far.
//!
//! Agentic fleets serve a few long system prompts (one per agent product or tool set), each
//! shared by many conversations. `--num-system-prompts N` makes `N` distinct prompts of
//! `--shared-system-prompt-length` words; each root session draws one, uniformly and
//! reproducibly from the seed and its position in the run, and its whole agent tree inherits
//! it. Prompt 0 is the text a single shared prompt always had, so `N = 1` is the old workload,
//! byte for byte.
//!
//! A sub-agent is usually spawned *from* its parent's context: its first request is the
//! parent's conversation up to the spawn point followed by its own task, so the two share a
//! prefix a router can exploit (`--agent-context parent`). `--agent-context fresh`, the
//! default, starts children from the system prompt alone, as the bench always did.

use crate::rng::Rng;
use crate::workload::text::words;

/// How a sub-agent's conversation starts (`--agent-context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentContext {
    /// The tree's system prompt, then the child's task.
    #[default]
    Fresh,
    /// The parent's messages up to the spawn point (system prompt included), then the task.
    Parent,
}

/// Seed salt of the system prompts' text (prompt 0 keeps the historical salt).
const TEXT_SALT: u64 = 0x5157_E3B0;
/// Seed salt of each root's choice of prompt.
const CHOICE_SALT: u64 = 0x5157_C401;

/// The `count` shared system prompts of `length` words for `seed`; empty when `length` is 0.
pub fn system_prompts(seed: u64, count: u32, length: u64) -> Vec<String> {
    if length == 0 {
        return Vec::new();
    }
    let base = Rng::new(seed ^ TEXT_SALT);
    (0..count.max(1))
        .map(|k| {
            let mut rng = if k == 0 {
                base.clone()
            } else {
                base.derive(u64::from(k))
            };
            words(&mut rng, length)
        })
        .collect()
}

/// Which of `count` system prompts root session number `root_index` uses (0 when `count <= 1`).
pub fn system_prompt_choice(seed: u64, root_index: u64, count: u32) -> usize {
    if count <= 1 {
        return 0;
    }
    Rng::new(seed ^ CHOICE_SALT)
        .derive(root_index)
        .below(u64::from(count)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_distinct_sized_and_prompt_zero_is_the_historical_text() {
        let p = system_prompts(9, 4, 30);
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|t| t.split(' ').count() == 30));
        let distinct: std::collections::HashSet<_> = p.iter().collect();
        assert_eq!(distinct.len(), 4);
        assert_eq!(p[0], words(&mut Rng::new(9 ^ TEXT_SALT), 30));
        assert_eq!(system_prompts(9, 1, 30), p[..1]);
        assert_eq!(system_prompts(9, 4, 30), p, "same seed, same prompts");
        assert_ne!(system_prompts(10, 4, 30), p);
        assert!(system_prompts(9, 4, 0).is_empty());
    }

    #[test]
    fn roots_draw_every_prompt_about_equally_and_reproducibly() {
        let n = 4000u64;
        let mut counts = [0u32; 4];
        for i in 0..n {
            let c = system_prompt_choice(3, i, 4);
            assert_eq!(c, system_prompt_choice(3, i, 4));
            counts[c] += 1;
        }
        // Each prompt near n/4 = 1000 (binomial sd about 27).
        assert!(counts.iter().all(|c| (850..1150).contains(c)), "{counts:?}");
        let a: Vec<usize> = (0..32).map(|i| system_prompt_choice(3, i, 4)).collect();
        let b: Vec<usize> = (0..32).map(|i| system_prompt_choice(4, i, 4)).collect();
        assert_ne!(a, b, "another seed, another assignment");
        assert!((0..100).all(|i| system_prompt_choice(3, i, 1) == 0));
    }
}
