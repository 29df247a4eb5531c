use serde_json::json;

use super::*;

fn sim_tokens(text: &str) -> Vec<u64> {
    berth_sim::tokenize::tokenize(text)
}

#[test]
fn the_tokenizer_mirrors_the_sim_worker() {
    for text in [
        "",
        "abc ",
        "hello wonderful world\n and more\ttext",
        "<|im_start|>user\nthe cat sat <|im_end|>\n",
        "é unicode ünïcödé  double  spaces",
        "averyveryverylongwordwithoutanyspace",
    ] {
        let mut ours = Vec::new();
        tokenize_into(text, &mut ours);
        assert_eq!(ours, sim_tokens(text), "{text:?}");
    }
}

#[test]
fn chat_prompts_render_as_the_sim_worker_renders_them() {
    let body = json!({
        "model": "m",
        "messages": [
            {"role": "user", "content": "the cat "},
            {"role": "assistant", "content": "yak sea "},
            {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "dog "}]},
        ],
    });
    let mut expected = String::new();
    berth_sim::tokenize::render_message("user", "the cat ", &mut expected);
    berth_sim::tokenize::render_message("assistant", "yak sea ", &mut expected);
    berth_sim::tokenize::render_message("user", "and dog ", &mut expected);
    expected.push_str(berth_sim::tokenize::GENERATION_PROMPT);
    let Value::Object(body) = body else {
        unreachable!()
    };
    assert_eq!(
        sent_tokens(EndpointType::Chat, &body),
        sim_tokens(&expected)
    );
    let completion = json!({"prompt": "User: hi\nAssistant:"});
    let Value::Object(completion) = completion else {
        unreachable!()
    };
    assert_eq!(
        sent_tokens(EndpointType::Completions, &completion),
        sim_tokens("User: hi\nAssistant:")
    );
    assert_eq!(IDEAL_BLOCK_TOKENS, berth_sim::kv::BLOCK_TOKENS);
}

fn words(n: usize, salt: &str) -> String {
    (0..n).map(|i| format!("{salt}{:02} ", i % 100)).collect()
}

#[test]
fn shared_prefixes_count_whole_blocks_and_answers_extend_them() {
    let mut c = IdealCache::new();
    // 40 one-token words: 2 whole blocks and 8 tokens.
    let a: Vec<u64> = {
        let mut t = Vec::new();
        tokenize_into(&words(40, "a"), &mut t);
        t
    };
    assert_eq!(a.len(), 40);
    assert_eq!(c.send(&a), 0, "cold");
    assert_eq!(c.len(), 2);
    // The same prompt again: both whole blocks.
    assert_eq!(c.send(&a), 32);
    // Exactly 32 tokens: at most one block (one token is always computed).
    assert_eq!(c.send(&a[..32]), 16);
    // A prompt sharing only the first block.
    let mut b = a[..16].to_vec();
    tokenize_into(&words(30, "b"), &mut b);
    assert_eq!(c.send(&b), 16);
    // The answer is cached with its prompt: the next turn (prompt + answer + more) hits past it.
    c.answered(&a, &words(24, "z"));
    let mut next = a.clone();
    tokenize_into(&words(24, "z"), &mut next);
    tokenize_into(&words(20, "n"), &mut next);
    assert_eq!(next.len(), 84);
    assert_eq!(c.send(&next), 64, "40 + 24 tokens = 4 whole blocks");
    // A different first block shares nothing, even if later blocks are equal text.
    let mut other = Vec::new();
    tokenize_into(&words(16, "q"), &mut other);
    other.extend_from_slice(&a[16..]);
    assert_eq!(c.send(&other), 0);
}
