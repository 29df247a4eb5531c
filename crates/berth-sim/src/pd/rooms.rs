//! The prefill worker's board of finished rooms.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Rooms kept at most (a decode worker that never came leaves its room behind).
const MAX_ROOMS: usize = 65_536;
/// A room older than this is dropped when the board is full.
const ROOM_TTL: Duration = Duration::from_secs(300);

/// What the prefill worker hands over for a room: the KV cache's size, and how much of it came
/// from its prefix cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RoomInfo {
    pub(crate) prompt_tokens: u64,
    pub(crate) cached_tokens: u64,
}

/// Finished rooms, each taken once.
#[derive(Debug, Default)]
pub(crate) struct RoomBoard {
    rooms: Mutex<HashMap<u64, (RoomInfo, Instant)>>,
    changed: Notify,
}

impl RoomBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (RoomInfo, Instant)>> {
        self.rooms.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The prefill of `room` finished.
    pub(crate) fn ready(&self, room: u64, info: RoomInfo) {
        let now = Instant::now();
        {
            let mut rooms = self.lock();
            if rooms.len() >= MAX_ROOMS {
                rooms.retain(|_, (_, at)| now.duration_since(*at) < ROOM_TTL);
            }
            if rooms.len() < MAX_ROOMS {
                rooms.insert(room, (info, now));
            }
        }
        self.changed.notify_waiters();
    }

    /// Takes `room`, waiting up to `wait` for it; `None` when it did not come in time.
    pub(crate) async fn take(&self, room: u64, wait: Duration) -> Option<RoomInfo> {
        let deadline = Instant::now() + wait;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some((info, _)) = self.lock().remove(&room) {
                return Some(info);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// Rooms ready and not yet taken.
    pub(crate) fn pending(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_room_is_taken_once_and_waiters_wake_when_it_arrives() {
        let board = std::sync::Arc::new(RoomBoard::default());
        let info = RoomInfo {
            prompt_tokens: 40,
            cached_tokens: 32,
        };
        let waiter = tokio::spawn({
            let board = board.clone();
            async move { board.take(5, Duration::from_secs(5)).await }
        });
        tokio::task::yield_now().await;
        board.ready(5, info);
        assert_eq!(waiter.await.unwrap(), Some(info));
        assert_eq!(board.pending(), 0);
        assert_eq!(board.take(5, Duration::from_millis(10)).await, None);
    }
}
