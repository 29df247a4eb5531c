"""berth bench's system-prompt draw, recomputed in Python for the analysis scripts.

`prompt_choice(seed, i, n)` is `system_prompt_choice` (crates/berth-bench/src/workload/prompts.rs):
`Rng::new(seed ^ CHOICE_SALT).derive(i).below(n)` over SplitMix64. Imported by
bench-feedback-timeline.py and bench-agentic-set-lru.py (from this directory).
"""

M = (1 << 64) - 1


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return state, z ^ (z >> 31)


def prompt_choice(seed, root_index, count):
    """The system prompt (0..count) of root session `root_index` of a run with `seed`."""
    if count <= 1:
        return 0
    _, derived = splitmix((seed ^ 0x5157C401) ^ ((root_index * 0xA0761D6478BD642F) & M))
    _, x = splitmix(derived)
    return x % count
