//! Deterministic filler text.
//!
//! Words come from a small vocabulary of short, common English words so that most tokenizers
//! (and the simulated worker's) count about one token per word.

use crate::rng::Rng;

const VOCAB: [&str; 64] = [
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "he", "as",
    "at", "by", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which",
    "one", "you", "were", "her", "all", "she", "there", "would", "their", "we", "him", "been",
    "has", "when", "who", "will", "more", "no", "if", "out", "so", "said", "what", "up", "its",
    "about", "into", "than", "them", "can", "only", "other", "new", "some", "could", "time",
    "these",
];

/// `n` words drawn from `rng`, separated by single spaces.
pub fn words(rng: &mut Rng, n: u64) -> String {
    let mut out = String::with_capacity(n as usize * 5);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(VOCAB[rng.below(VOCAB.len() as u64) as usize]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_count_and_determinism() {
        let a = words(&mut Rng::new(1), 50);
        assert_eq!(a.split(' ').count(), 50);
        assert_eq!(a, words(&mut Rng::new(1), 50));
        assert_ne!(a, words(&mut Rng::new(2), 50));
        assert_eq!(words(&mut Rng::new(1), 0), "");
    }
}
