//! Reading a trace: a first streamed pass that checks every line and indexes the sessions, and
//! a second streamed pass that yields the kept rows with their session keys.
//!
//! The first pass stops at the first malformed line (so a bad file fails before a request is
//! sent) and keeps, per kept session with a name, its number of turns (so the replay knows which
//! turn is a session's last, and when to forget it), and for Bailian traces each chat's root (so
//! a child row finds its session, as aiperf's union-find over `parent_chat_id` does). A Mooncake
//! row without `session_id` is a session of its own and costs nothing. Neither pass holds rows:
//! memory grows with the sessions of the file, not with its requests.
//!
//! Sampling: `--num-sessions N` keeps the first `N` sessions in order of their first row (it
//! never cycles the file), and `--trace-session-sample P` keeps each session with probability
//! `P`, decided from its key and the seed, so both passes agree without remembering drops.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::rng::Rng;
use crate::trace::format::{RowSession, TraceFormat, TraceRow, parse_row};

/// What to read and which sessions to keep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceSource {
    /// The file (`--input-file`).
    pub path: PathBuf,
    /// Its format (`--custom-dataset-type`).
    pub format: TraceFormat,
    /// Keep only the first this many sessions (`--num-sessions`).
    pub max_sessions: Option<u64>,
    /// Keep each session with this probability (`--trace-session-sample`).
    pub sample: Option<f64>,
    /// Seed of the sampling.
    pub seed: u64,
}

/// Per kept session with a name: turns, and the last Bailian `turn` seen (order check).
#[derive(Debug, Clone, Copy)]
struct SessionEntry {
    turns: u32,
    last_turn: i64,
}

/// What the first pass learned.
#[derive(Debug, Default)]
pub struct TraceIndex {
    named: HashMap<String, SessionEntry>,
    chat_root: HashMap<i64, i64>,
    /// Unnamed rows after this line are past `--num-sessions`.
    single_cutoff: u64,
    /// Earliest recorded timestamp among kept rows, ms.
    pub first_timestamp_ms: Option<f64>,
    /// Kept rows (requests the replay will send).
    pub rows: u64,
    /// Kept sessions.
    pub sessions: u64,
    /// Lines read (rows of the file).
    pub lines: u64,
}

impl TraceIndex {
    /// Turns of the kept session `key`, `None` when it was not kept.
    pub fn turns(&self, key: &str) -> Option<u32> {
        self.named.get(key).map(|e| e.turns)
    }

    /// Sessions with a name held in the index (for the memory test).
    pub fn named_sessions(&self) -> usize {
        self.named.len()
    }
}

/// A kept row and its session.
#[derive(Debug, Clone)]
pub struct KeptRow {
    /// The session's key: `session_id`, the Bailian root `chat_id`, or `line-N`.
    pub key: String,
    /// A Mooncake row without `session_id` (its `line-N` key never names a session with a
    /// `session_id` of that text).
    pub single: bool,
    /// Turns the session has (1 for unnamed rows).
    pub session_turns: u32,
    /// The row.
    pub row: TraceRow,
}

fn sampled(source: &TraceSource, key: &str) -> bool {
    let Some(p) = source.sample else {
        return true;
    };
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in key.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(source.seed).derive(h).next_f64() < p
}

fn open(path: &Path) -> Result<Lines<BufReader<File>>, BenchError> {
    let file = File::open(path).map_err(|source| BenchError::TraceIo {
        path: path.display().to_string(),
        source,
    })?;
    Ok(BufReader::with_capacity(1 << 16, file).lines())
}

fn read_err(path: &Path, source: std::io::Error) -> BenchError {
    BenchError::TraceIo {
        path: path.display().to_string(),
        source,
    }
}

/// The first pass: checks every line and indexes the kept sessions.
pub fn scan(source: &TraceSource) -> Result<TraceIndex, BenchError> {
    let mut index = TraceIndex {
        single_cutoff: u64::MAX,
        ..TraceIndex::default()
    };
    let limit = source.max_sessions.unwrap_or(u64::MAX);
    for (i, line) in open(&source.path)?.enumerate() {
        let line_no = i as u64 + 1;
        let text = line.map_err(|e| read_err(&source.path, e))?;
        index.lines = line_no;
        if text.trim().is_empty() {
            continue;
        }
        let row = parse_row(source.format, line_no, &text)?;
        let kept = match &row.session {
            RowSession::Single => {
                let key = single_key(line_no);
                let keep = index.sessions < limit && sampled(source, &key);
                if keep {
                    index.sessions += 1;
                    if index.sessions == limit {
                        index.single_cutoff = line_no;
                    }
                }
                keep
            }
            RowSession::Named(name) => admit(&mut index, source, name.clone(), None, line_no)?,
            RowSession::Chat {
                chat_id,
                parent,
                turn,
            } => {
                if index.chat_root.contains_key(chat_id) {
                    return Err(BenchError::Trace {
                        line: line_no,
                        message: format!("`chat_id` {chat_id} appears twice"),
                    });
                }
                let root = index.chat_root.get(parent).copied().unwrap_or(*chat_id);
                index.chat_root.insert(*chat_id, root);
                admit(&mut index, source, root.to_string(), Some(*turn), line_no)?
            }
        };
        if kept {
            index.rows += 1;
            if let Some(ts) = row.timestamp_ms {
                index.first_timestamp_ms =
                    Some(index.first_timestamp_ms.map_or(ts, |f: f64| f.min(ts)));
            }
        }
    }
    Ok(index)
}

fn admit(
    index: &mut TraceIndex,
    source: &TraceSource,
    key: String,
    turn: Option<i64>,
    line: u64,
) -> Result<bool, BenchError> {
    if let Some(entry) = index.named.get_mut(&key) {
        if let Some(t) = turn {
            if t < entry.last_turn {
                return Err(BenchError::Trace {
                    line,
                    message: format!(
                        "turn {t} of session {key} comes after its turn {} (rows must be in turn order)",
                        entry.last_turn
                    ),
                });
            }
            entry.last_turn = t;
        }
        entry.turns += 1;
        return Ok(true);
    }
    let limit = source.max_sessions.unwrap_or(u64::MAX);
    if index.sessions >= limit || !sampled(source, &key) {
        return Ok(false);
    }
    index.sessions += 1;
    if index.sessions == limit {
        index.single_cutoff = line;
    }
    index.named.insert(
        key,
        SessionEntry {
            turns: 1,
            last_turn: turn.unwrap_or(0),
        },
    );
    Ok(true)
}

fn single_key(line: u64) -> String {
    format!("line-{line}")
}

/// The second pass: the kept rows in file order.
pub struct TraceReader {
    lines: Lines<BufReader<File>>,
    line_no: u64,
    source: TraceSource,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("line_no", &self.line_no)
            .finish_non_exhaustive()
    }
}

impl TraceReader {
    /// Opens the file again for the replay.
    pub fn open(source: &TraceSource) -> Result<Self, BenchError> {
        Ok(Self {
            lines: open(&source.path)?,
            line_no: 0,
            source: source.clone(),
        })
    }

    /// The next kept row, `None` at the end of the file.
    pub fn next_row(&mut self, index: &TraceIndex) -> Result<Option<KeptRow>, BenchError> {
        loop {
            let Some(line) = self.lines.next() else {
                return Ok(None);
            };
            self.line_no += 1;
            let text = line.map_err(|e| read_err(&self.source.path, e))?;
            if text.trim().is_empty() {
                continue;
            }
            let row = parse_row(self.source.format, self.line_no, &text)?;
            let kept = match &row.session {
                RowSession::Single => {
                    let key = single_key(self.line_no);
                    (self.line_no <= index.single_cutoff && sampled(&self.source, &key))
                        .then_some((key, 1))
                }
                RowSession::Named(name) => index.turns(name).map(|t| (name.clone(), t)),
                RowSession::Chat { chat_id, .. } => index
                    .chat_root
                    .get(chat_id)
                    .map(|root| root.to_string())
                    .and_then(|key| index.turns(&key).map(|t| (key, t))),
            };
            if let Some((key, session_turns)) = kept {
                return Ok(Some(KeptRow {
                    single: row.session == RowSession::Single,
                    key,
                    session_turns,
                    row,
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests;
