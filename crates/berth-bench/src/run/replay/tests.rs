//! The replay's scheduling and histories on a paused clock, through a recording sink.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::cli::Args;
use crate::config::BenchConfig;
use crate::trace::blocks::block_text;
use crate::trace::source::scan;
use crate::transport::HttpClient;
use crate::workload::Role;

/// One turn as the sink saw it.
#[derive(Debug, Clone)]
struct Sent {
    session: String,
    turn: u32,
    at: Duration,
    history: Vec<(Role, String)>,
    max_tokens: u64,
}

struct Recorder {
    start: Instant,
    answer_after: Duration,
    log: Mutex<Vec<Sent>>,
}

impl TurnSink for Arc<Recorder> {
    async fn send<'a>(&'a self, _ctx: &'a RunContext, turn: TurnRequest<'a>) -> Option<String> {
        let sent = Sent {
            session: turn.session_id.to_owned(),
            turn: turn.turn_index,
            at: Instant::now() - self.start,
            history: turn
                .history
                .iter()
                .map(|m| (m.role, m.content.clone()))
                .collect(),
            max_tokens: turn.max_tokens,
        };
        self.log.lock().unwrap().push(sent);
        tokio::time::sleep(self.answer_after).await;
        Some(format!("answer {} {} ", turn.session_id, turn.turn_index))
    }
}

fn trace_file(name: &str, lines: &[String]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("berth-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

async fn run(
    path: &std::path::Path,
    flags: &[&str],
    answer_after: Duration,
) -> (Vec<Sent>, ReplayStats, Arc<RunContext>) {
    let mut all = vec![
        "--url",
        "http://127.0.0.1:9",
        "--quiet",
        "--input-file",
        path.to_str().unwrap(),
    ];
    all.extend_from_slice(flags);
    let config = BenchConfig::try_from_args(&Args::from_flags(all).unwrap()).unwrap();
    let client = HttpClient::new(&config.url, Duration::from_secs(5)).unwrap();
    let trace = config.trace.clone().unwrap();
    let index = scan(&trace.source).unwrap();
    let ctx = Arc::new(RunContext::new(config, client));
    let recorder = Arc::new(Recorder {
        start: Instant::now(),
        answer_after,
        log: Mutex::new(Vec::new()),
    });
    let stats = replay(Arc::clone(&ctx), trace, index, Arc::clone(&recorder), None)
        .await
        .unwrap();
    let log = recorder.log.lock().unwrap().clone();
    (log, stats, ctx)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn fixed_schedule_sends_at_recorded_times_and_delays_after_answers() {
    let path = trace_file(
        "fixed.jsonl",
        &[
            r#"{"session_id": "s1", "timestamp": 1000, "input_length": 8, "hash_ids": [1, 2], "output_length": 5}"#.into(),
            r#"{"session_id": "s1", "delay": 500, "input_length": 4, "hash_ids": [3]}"#.into(),
            r#"{"timestamp": 2000, "input_length": 4, "output_length": 900}"#.into(),
            r#"{"session_id": "s2", "timestamp": 3000, "input_length": 8, "hash_ids": [1, 2]}"#.into(),
        ],
    );
    let flags = [
        "--custom-dataset-type",
        "mooncake_trace",
        "--prompt-input-tokens-block-size",
        "4",
        "--fixed-schedule",
        "--trace-max-output-tokens",
        "64",
        "--output-tokens-mean",
        "7",
    ];
    let (log, stats, _) = run(&path, &flags, ms(100)).await;
    let mut got: Vec<(String, u32, Duration, u64)> = log
        .iter()
        .map(|s| (s.session.clone(), s.turn, s.at, s.max_tokens))
        .collect();
    got.sort_by_key(|g| g.2);
    assert_eq!(
        got,
        [
            ("s1".into(), 0, ms(0), 5),
            ("s1".into(), 1, ms(600), 7),
            ("line-3".into(), 0, ms(1000), 64),
            ("s2".into(), 0, ms(2000), 7),
        ]
    );
    assert_eq!(stats.sessions_started, 3);

    // Twice as fast: every recorded time and delay halves; answers still take what they take.
    let mut fast = flags.to_vec();
    fast.extend(["--replay-speedup", "2"]);
    let (log, _, _) = run(&path, &fast, ms(100)).await;
    let mut at: Vec<Duration> = log.iter().map(|s| s.at).collect();
    at.sort();
    assert_eq!(at, [ms(0), ms(350), ms(500), ms(1000)]);
}

#[tokio::test(start_paused = true)]
async fn sessions_resend_their_history_and_share_blocks_exactly() {
    let path = trace_file(
        "history.jsonl",
        &[
            r#"{"session_id": "a", "input_length": 7, "hash_ids": [1, 2]}"#.into(),
            r#"{"session_id": "b", "input_length": 8, "hash_ids": [1, 2]}"#.into(),
            r#"{"session_id": "a", "delay": 250, "input_length": 3, "hash_ids": [9]}"#.into(),
            r#"{"session_id": "b", "delay": 40, "text_input": "literal prompt"}"#.into(),
        ],
    );
    let (log, stats, ctx) = run(
        &path,
        &[
            "--custom-dataset-type",
            "mooncake_trace",
            "--prompt-input-tokens-block-size",
            "4",
            "--concurrency",
            "1",
        ],
        ms(10),
    )
    .await;
    // One slot: session a runs both turns (its second is read past b's first), then b.
    let order: Vec<(&str, u32, Duration)> = log
        .iter()
        .map(|s| (s.session.as_str(), s.turn, s.at))
        .collect();
    assert_eq!(
        order,
        [
            ("a", 0, ms(0)),
            ("a", 1, ms(260)),
            ("b", 0, ms(270)),
            ("b", 1, ms(320)),
        ]
    );
    let b1 = format!("{}{}", block_text(1, 4), block_text(2, 4));
    // a's first block content is cut to 7 tokens; b's is whole: the first 7 words are shared.
    assert_eq!(log[0].history, [(Role::User, b1[..28].to_owned())]);
    assert_eq!(log[2].history, [(Role::User, b1.clone())]);
    assert_eq!(
        log[1].history,
        [
            (Role::User, b1[..28].to_owned()),
            (Role::Assistant, "answer a 0 ".to_owned()),
            (Role::User, block_text(9, 4)[..12].to_owned()),
        ]
    );
    assert_eq!(log[3].history[2], (Role::User, "literal prompt".into()));
    assert_eq!(stats.peak_buffered_rows, 1);
    assert_eq!(ctx.peak_live_sessions.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn closed_loop_uses_recorded_offsets_and_can_ignore_them() {
    let path = trace_file(
        "bailian.jsonl",
        &[
            r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 10.0, "input_length": 4, "output_length": 3, "turn": 1, "hash_ids": [5]}"#.into(),
            r#"{"chat_id": 2, "parent_chat_id": 1, "timestamp": 12.5, "input_length": 4, "output_length": 3, "turn": 2, "hash_ids": [6]}"#.into(),
            r#"{"chat_id": 3, "parent_chat_id": 2, "timestamp": 13.0, "input_length": 4, "output_length": 3, "turn": 3, "hash_ids": [7]}"#.into(),
        ],
    );
    let base = [
        "--custom-dataset-type",
        "bailian_trace",
        "--prompt-input-tokens-block-size",
        "4",
    ];
    let (log, _, _) = run(&path, &base, ms(1000)).await;
    let at: Vec<(String, u32, Duration)> = log
        .iter()
        .map(|s| (s.session.clone(), s.turn, s.at))
        .collect();
    // One session keyed by the root chat; turns at their offsets from its start, never before
    // the previous answer (the third is due at 3.0 s but the second answers at 3.5 s).
    assert_eq!(
        at,
        [
            ("1".into(), 0, ms(0)),
            ("1".into(), 1, ms(2500)),
            ("1".into(), 2, ms(3500)),
        ]
    );
    assert_eq!(
        log[2].history.len(),
        5,
        "the child carries its parent's lineage"
    );
    let mut ignore = base.to_vec();
    ignore.push("--ignore-trace-delays");
    let (log, _, _) = run(&path, &ignore, ms(1000)).await;
    let at: Vec<Duration> = log.iter().map(|s| s.at).collect();
    assert_eq!(at, [ms(0), ms(1000), ms(2000)]);
}

#[tokio::test(start_paused = true)]
async fn interleaved_sessions_do_not_deadlock_the_slots() {
    // a1 b1 c1 a2 b2 c2 a3 b3 c3 under two slots: c waits, its rows are buffered only while
    // a and b need rows behind them.
    let lines: Vec<String> = (0..3)
        .flat_map(|_| {
            ["a", "b", "c"].map(|s| format!(r#"{{"session_id": "{s}", "input_length": 2}}"#))
        })
        .collect();
    let path = trace_file("interleaved.jsonl", &lines);
    let (log, stats, ctx) = run(
        &path,
        &[
            "--custom-dataset-type",
            "mooncake_trace",
            "--concurrency",
            "2",
        ],
        ms(5),
    )
    .await;
    assert_eq!(log.len(), 9);
    for s in ["a", "b", "c"] {
        let turns: Vec<u32> = log
            .iter()
            .filter(|x| x.session == s)
            .map(|x| x.turn)
            .collect();
        assert_eq!(turns, [0, 1, 2], "{s}");
    }
    assert_eq!(ctx.peak_live_sessions.load(Ordering::Relaxed), 2);
    assert_eq!(stats.peak_open_sessions, 3);
    assert_eq!(stats.sessions_started, 3);
}

#[tokio::test(start_paused = true)]
async fn memory_is_bounded_by_distinct_blocks_and_live_sessions() {
    // 3,000 sessions of 3 turns (9,000 requests), each turn with a shared block and two of
    // its own: 18,000 distinct ids, more than the block cache holds.
    let sessions = 3_000u64;
    let mut lines = Vec::with_capacity(sessions as usize * 3);
    for s in 0..sessions {
        for t in 0..3u64 {
            let own = 1_000 + s * 6 + t * 2;
            lines.push(format!(
                r#"{{"session_id": "s{s}", "input_length": 3000, "hash_ids": [7, {own}, {}], "output_length": 2}}"#,
                own + 1
            ));
        }
    }
    let path = trace_file("large.jsonl", &lines);
    let (log, stats, ctx) = run(
        &path,
        &[
            "--custom-dataset-type",
            "mooncake_trace",
            "--prompt-input-tokens-block-size",
            "1024",
            "--concurrency",
            "8",
        ],
        ms(1),
    )
    .await;
    assert_eq!(log.len(), 9_000);
    assert_eq!(stats.sessions_started, sessions);
    let capacity = (BlockCache::generation_bytes() / (1024 * 4)) as u64 * 2;
    assert_eq!(stats.block_cache_capacity, capacity);
    assert!(capacity < 18_000);
    assert!(stats.block_cache_entries <= capacity);
    assert!(ctx.peak_live_sessions.load(Ordering::Relaxed) <= 8);
    assert!(stats.peak_open_sessions <= 9, "{stats:?}");
    assert!(stats.peak_buffered_rows <= 1, "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn request_rate_spaces_session_starts() {
    let lines: Vec<String> = (0..4)
        .map(|i| format!(r#"{{"session_id": "r{i}", "input_length": 2}}"#))
        .collect();
    let path = trace_file("rate.jsonl", &lines);
    let (log, _, _) = run(
        &path,
        &[
            "--custom-dataset-type",
            "mooncake_trace",
            "--request-rate",
            "4",
            "--concurrency",
            "10",
        ],
        ms(1),
    )
    .await;
    let at: Vec<Duration> = log.iter().map(|s| s.at).collect();
    assert_eq!(at, [ms(0), ms(250), ms(500), ms(750)]);
}

#[tokio::test(start_paused = true)]
async fn a_row_without_session_id_never_joins_a_session_named_like_its_key() {
    let path = trace_file(
        "collide.jsonl",
        &[
            r#"{"session_id": "line-2", "input_length": 2}"#.into(),
            r#"{"input_length": 2}"#.into(),
            r#"{"session_id": "line-2", "input_length": 2}"#.into(),
        ],
    );
    let (log, stats, _) = run(&path, &["--custom-dataset-type", "mooncake_trace"], ms(1)).await;
    assert_eq!(stats.sessions_started, 2);
    let mut turns: Vec<(u32, usize)> = log.iter().map(|s| (s.turn, s.history.len())).collect();
    turns.sort();
    assert_eq!(turns, [(0, 1), (0, 1), (1, 3)]);
    // The named session's second turn is line 3's row, not line 2's.
    let second = log.iter().find(|s| s.turn == 1).unwrap();
    let line3 =
        &crate::trace::blocks::block_text(crate::trace::blocks::unique_block_id(3, 0), 512)[..8];
    assert_eq!(second.history[2], (Role::User, line3.to_owned()));
}
