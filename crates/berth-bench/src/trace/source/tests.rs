use super::*;

fn file(name: &str, lines: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("berth-trace-src-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

fn source(path: PathBuf, format: TraceFormat) -> TraceSource {
    TraceSource {
        path,
        format,
        max_sessions: None,
        sample: None,
        seed: 1,
    }
}

fn keys(src: &TraceSource) -> (TraceIndex, Vec<(String, u32, u64)>) {
    let index = scan(src).unwrap();
    let mut reader = TraceReader::open(src).unwrap();
    let mut out = Vec::new();
    while let Some(k) = reader.next_row(&index).unwrap() {
        out.push((k.key, k.session_turns, k.row.line));
    }
    (index, out)
}

const MOONCAKE: [&str; 6] = [
    r#"{"session_id": "a", "timestamp": 5, "input_length": 4, "hash_ids": [1]}"#,
    r#"{"timestamp": 7, "input_length": 4}"#,
    r#"{"session_id": "b", "input_length": 4, "hash_ids": [1], "extra_field": [1, 2]}"#,
    "",
    r#"{"session_id": "a", "delay": 10, "input_length": 4, "hash_ids": [2]}"#,
    r#"{"session_id": "b", "input_length": 4}"#,
];

#[test]
fn mooncake_sessions_and_single_rows() {
    let src = source(file("m.jsonl", &MOONCAKE), TraceFormat::MooncakeTrace);
    let (index, rows) = keys(&src);
    assert_eq!(index.rows, 5);
    assert_eq!(index.sessions, 3);
    assert_eq!(index.first_timestamp_ms, Some(5.0));
    assert_eq!(
        rows,
        [
            ("a".into(), 2, 1),
            ("line-2".into(), 1, 2),
            ("b".into(), 2, 3),
            ("a".into(), 2, 5),
            ("b".into(), 2, 6),
        ]
    );
}

#[test]
fn num_sessions_keeps_the_first_sessions_without_cycling() {
    let mut src = source(file("n.jsonl", &MOONCAKE), TraceFormat::MooncakeTrace);
    src.max_sessions = Some(2);
    let (index, rows) = keys(&src);
    assert_eq!(index.sessions, 2);
    let lines: Vec<u64> = rows.iter().map(|r| r.2).collect();
    assert_eq!(lines, [1, 2, 5], "session b starts after the cut");
    src.max_sessions = Some(1);
    let (_, rows) = keys(&src);
    assert_eq!(rows.iter().map(|r| r.2).collect::<Vec<_>>(), [1, 5]);
}

#[test]
fn sampling_keeps_whole_sessions_reproducibly() {
    let lines: Vec<String> = (0..400)
        .flat_map(|s| {
            (0..3).map(move |_| format!(r#"{{"session_id": "s{s}", "input_length": 2}}"#))
        })
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let mut src = source(file("s.jsonl", &refs), TraceFormat::MooncakeTrace);
    src.sample = Some(0.25);
    let (index, rows) = keys(&src);
    assert!((70..130).contains(&index.sessions), "{}", index.sessions);
    assert_eq!(index.rows, index.sessions * 3, "whole sessions");
    assert_eq!(rows.len() as u64, index.rows);
    assert!(rows.iter().all(|r| r.1 == 3));
    let (again, _) = keys(&src);
    assert_eq!(again.sessions, index.sessions);
}

#[test]
fn bailian_children_join_their_roots_session() {
    let src = source(
        file(
            "b.jsonl",
            &[
                r#"{"chat_id": 10, "parent_chat_id": -1, "timestamp": 1.5, "input_length": 3, "output_length": 1, "turn": 1, "hash_ids": [1]}"#,
                r#"{"chat_id": 20, "parent_chat_id": -1, "timestamp": 2.0, "input_length": 3, "output_length": 1, "turn": 1}"#,
                r#"{"chat_id": 11, "parent_chat_id": 10, "timestamp": 3.0, "input_length": 3, "output_length": 1, "turn": 2}"#,
                r#"{"chat_id": 12, "parent_chat_id": 11, "timestamp": 4.0, "input_length": 3, "output_length": 1, "turn": 3}"#,
                r#"{"chat_id": 30, "parent_chat_id": 99, "timestamp": 5.0, "input_length": 3, "output_length": 1, "turn": 2}"#,
            ],
        ),
        TraceFormat::BailianTrace,
    );
    let (index, rows) = keys(&src);
    assert_eq!(index.first_timestamp_ms, Some(1500.0));
    assert_eq!(
        rows,
        [
            ("10".into(), 3, 1),
            ("20".into(), 1, 2),
            ("10".into(), 3, 3),
            ("10".into(), 3, 4),
            ("30".into(), 1, 5),
        ],
        "a parent missing from the file makes its child a root, as in aiperf"
    );
}

#[test]
fn refusals_stop_the_scan_at_their_line() {
    for (name, lines, needle) in [
        (
            "bad.jsonl",
            &[r#"{"input_length": 3}"#, r#"{"input_length": 3}"#, "{oops"][..],
            "trace line 3:",
        ),
        (
            "order.jsonl",
            &[
                r#"{"chat_id": 1, "input_length": 3, "output_length": 1, "turn": 2}"#,
                r#"{"chat_id": 2, "parent_chat_id": 1, "input_length": 3, "output_length": 1, "turn": 1}"#,
            ][..],
            "trace line 2: turn 1 of session 1",
        ),
        (
            "dup.jsonl",
            &[
                r#"{"chat_id": 1, "input_length": 3, "output_length": 1}"#,
                r#"{"chat_id": 1, "input_length": 3, "output_length": 1}"#,
            ][..],
            "trace line 2: `chat_id` 1 appears twice",
        ),
    ] {
        let format = if name == "bad.jsonl" {
            TraceFormat::MooncakeTrace
        } else {
            TraceFormat::BailianTrace
        };
        let err = scan(&source(file(name, lines), format))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{name}: {err}");
    }
    let missing = source(
        PathBuf::from("/nonexistent/trace.jsonl"),
        TraceFormat::MooncakeTrace,
    );
    assert!(
        scan(&missing)
            .unwrap_err()
            .to_string()
            .contains("cannot read trace")
    );
}
