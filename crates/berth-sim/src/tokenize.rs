//! Deterministic, cheap tokenization and prompt rendering.
//!
//! Real tokenizers are expensive and model-specific; what matters to a prefix cache is only that
//! the same text always yields the same tokens and that appending text appends tokens. Text is cut
//! into *pieces* that end just after a whitespace character, and each piece into tokens of at most
//! 4 bytes. Because a piece never spans a whitespace boundary, `tokens(a + b) == tokens(a) ++
//! tokens(b)` whenever `a` ends with whitespace: a chat prompt (every rendered message ends with a
//! newline) followed by the generated answer tokenizes exactly like the next turn's prompt, which
//! contains that answer verbatim.
//!
//! A token is a `u64`: its bytes packed little-endian, plus its length in the high bits, so no
//! hashing happens per token.
//!
//! Generated text is made of 4-byte words (three letters and a space), one token each, chosen
//! from the prompt's hash: the same prompt always gets the same answer.

use xxhash_rust::xxh3::xxh3_64;

/// One simulated token: up to 4 bytes of text packed with their length.
pub type Token = u64;

/// Appends the tokens of `text` to `out`.
pub fn tokenize_into(text: &str, out: &mut Vec<Token>) {
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if b.is_ascii_whitespace() {
            chunk_piece(&bytes[start..=i], out);
            start = i + 1;
        }
    }
    if start < bytes.len() {
        chunk_piece(&bytes[start..], out);
    }
}

/// The tokens of `text`.
pub fn tokenize(text: &str) -> Vec<Token> {
    let mut out = Vec::with_capacity(text.len() / 4 + 1);
    tokenize_into(text, &mut out);
    out
}

fn chunk_piece(piece: &[u8], out: &mut Vec<Token>) {
    for chunk in piece.chunks(4) {
        let mut packed = [0u8; 4];
        packed[..chunk.len()].copy_from_slice(chunk);
        out.push(u64::from(u32::from_le_bytes(packed)) | ((chunk.len() as u64) << 32));
    }
}

/// A token supplied as an id by the client (`input_ids`, a token-array prompt). Tagged so it can
/// never equal a text token.
pub fn id_token(id: u64) -> Token {
    (id & 0xFFFF_FFFF) | (0xFF << 32)
}

/// Renders one chat message the way a ChatML template would; always ends with a newline.
pub fn render_message(role: &str, content: &str, out: &mut String) {
    out.push_str("<|im_start|>");
    out.push_str(role);
    out.push('\n');
    out.push_str(content);
    out.push_str("<|im_end|>\n");
}

/// The generation prompt appended after the rendered messages.
pub const GENERATION_PROMPT: &str = "<|im_start|>assistant\n";

const WORDS: [&str; 32] = [
    "the ", "sim ", "cat ", "hit ", "one ", "two ", "six ", "ten ", "red ", "sea ", "sky ", "sun ",
    "map ", "key ", "pin ", "row ", "box ", "cup ", "dog ", "elk ", "fig ", "gem ", "hat ", "ink ",
    "jar ", "log ", "nut ", "oak ", "pea ", "rye ", "tin ", "yak ",
];

/// The deterministic answer to a prompt, produced one 4-byte word (one token) at a time, so a
/// long stream holds only what it has sent.
#[derive(Debug, Clone)]
pub struct Answer {
    seed: u64,
}

impl Answer {
    /// The answer to `prompt`.
    pub fn new(prompt: &[Token]) -> Self {
        Self {
            seed: prompt_seed(prompt),
        }
    }

    /// The next word and its token.
    pub fn next_word(&mut self) -> (&'static str, Token) {
        // xorshift64: cheap, deterministic, good enough to vary the words.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let word = WORDS[(self.seed % WORDS.len() as u64) as usize];
        let mut packed = [0u8; 4];
        packed.copy_from_slice(word.as_bytes());
        (word, u64::from(u32::from_le_bytes(packed)) | (4 << 32))
    }
}

/// The whole deterministic answer to a prompt: `n` words of 4 bytes, and their tokens.
pub fn generate_output(prompt: &[Token], n: u32) -> (String, Vec<Token>) {
    let mut answer = Answer::new(prompt);
    let mut text = String::with_capacity(n as usize * 4);
    let mut tokens = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let (word, token) = answer.next_word();
        text.push_str(word);
        tokens.push(token);
    }
    (text, tokens)
}

fn prompt_seed(prompt: &[Token]) -> u64 {
    let mut bytes = Vec::with_capacity(prompt.len().min(64) * 8);
    for t in prompt.iter().rev().take(64) {
        bytes.extend_from_slice(&t.to_le_bytes());
    }
    xxh3_64(&bytes) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_four_bytes_a_token() {
        assert_eq!(tokenize("abcdefgh").len(), 2);
        assert_eq!(tokenize("abcdefghi").len(), 3);
        assert_eq!(tokenize("ab cd").len(), 2);
        assert!(tokenize("").is_empty());
    }

    #[test]
    fn appending_after_whitespace_appends_tokens() {
        let a = "hello wonderful world\n";
        let b = "and more text";
        let mut joined = tokenize(a);
        joined.extend(tokenize(b));
        assert_eq!(tokenize(&format!("{a}{b}")), joined);
    }

    #[test]
    fn output_words_are_one_token_each_and_deterministic() {
        let prompt = tokenize("some prompt\n");
        let (text, tokens) = generate_output(&prompt, 10);
        assert_eq!(text.len(), 40);
        assert_eq!(tokens.len(), 10);
        assert_eq!(tokenize(&text), tokens);
        assert_eq!(generate_output(&prompt, 10).0, text);
        let mut answer = Answer::new(&prompt);
        assert_eq!(answer.next_word().0, &text[..4]);
    }

    #[test]
    fn id_tokens_differ_from_text_tokens() {
        assert_ne!(
            id_token(u64::from(u32::from_le_bytes(*b"abcd"))),
            tokenize("abcd")[0]
        );
    }
}
