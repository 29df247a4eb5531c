//! The file provider: a JSON manifest on disk (`--discovery-file`).
//!
//! Each look first checks the file's modification time and length (cheap), and rereads it
//! when either changed, or when the caller asks for a full look (every
//! `--discovery-check-interval-secs`, which also catches a rewrite the metadata missed). The
//! file may not exist yet at start-up: until it appears there is simply no discovered set.
//!
//! A manifest that is unreadable or invalid, or that disappears after a good one was read, is a
//! [`Fault`]: reported once (the same bad content or the same error is not reported again at
//! every look), and the last good set stays. Write the manifest atomically (to a temporary file,
//! then rename it over the old one), or a look may catch it half-written and report it invalid
//! until the write completes.

use std::hash::{Hash, Hasher};
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::manifest;
use super::source::{Discovery, Fault, Look};

/// What the last look concluded (to report each problem once).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Last {
    /// Nothing read yet (the file has not appeared).
    Nothing,
    /// A valid manifest with this content hash.
    Good(u64),
    /// A fault; for an invalid manifest, the hash of its content.
    Bad(Fault, Option<u64>),
}

/// File discovery of one manifest.
#[derive(Debug)]
pub(crate) struct FileDiscovery {
    path: PathBuf,
    /// Modification time and length when last read.
    stamp: Option<Stamp>,
    last: Last,
    /// A good manifest was read at some point (a later disappearance is then a fault).
    had_good: bool,
}

impl FileDiscovery {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            stamp: None,
            last: Last::Nothing,
            had_good: false,
        }
    }

    /// Records a fault; returns it unless the same fault was the last thing reported.
    fn fault(&mut self, fault: Fault, hash: Option<u64>) -> Look {
        let next = Last::Bad(fault.clone(), hash);
        if self.last == next {
            return Look::Unchanged;
        }
        self.last = next;
        Look::Fault(fault)
    }

    fn missing(&mut self) -> Look {
        self.stamp = None;
        if self.had_good {
            return self.fault(Fault::Missing, None);
        }
        Look::NotYet
    }
}

/// Modification time and length: a change in either means the file was rewritten.
type Stamp = (Option<SystemTime>, u64);

/// The file's stamp and, unless the stamp equals `known`, its content; `None` when it does not
/// exist.
fn read_if_changed(
    path: &Path,
    known: Option<Stamp>,
) -> io::Result<Option<(Stamp, Option<Vec<u8>>)>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let stamp = (meta.modified().ok(), meta.len());
    if known == Some(stamp) {
        return Ok(Some((stamp, None)));
    }
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some((stamp, Some(bytes)))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl Discovery for FileDiscovery {
    fn source(&self) -> &'static str {
        "file"
    }

    async fn look(&mut self, full: bool) -> Look {
        let path = self.path.clone();
        let known = if full { None } else { self.stamp };
        // Blocking file IO off the runtime's threads (the file is small; this is cheap).
        let read = tokio::task::spawn_blocking(move || read_if_changed(&path, known)).await;
        let (stamp, bytes) = match read {
            Ok(Ok(Some(found))) => found,
            Ok(Ok(None)) => return self.missing(),
            Ok(Err(e)) => return self.fault(Fault::Unreadable(e.to_string()), None),
            Err(e) => return self.fault(Fault::Unreadable(e.to_string()), None),
        };
        self.stamp = Some(stamp);
        let Some(bytes) = bytes else {
            return Look::Unchanged;
        };
        let hash = content_hash(&bytes);
        match manifest::parse(&bytes) {
            Ok(m) => {
                if self.last != Last::Good(hash) && !m.unused_fields.is_empty() {
                    tracing::warn!(
                        path = %self.path.display(),
                        fields = %m.unused_fields.join(", "),
                        "discovery manifest sets worker fields berth accepts but does not use"
                    );
                }
                self.last = Last::Good(hash);
                self.had_good = true;
                Look::Desired(m.workers)
            }
            Err(e) => self.fault(Fault::Invalid(e), Some(hash)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "berth-discovery-{}-{}",
            std::process::id(),
            crate::rng::fresh_seed()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn urls(look: Look) -> Vec<String> {
        match look {
            Look::Desired(w) => w.into_iter().map(|w| w.url).collect(),
            other => panic!("expected a set, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn appears_changes_breaks_once_and_recovers() {
        let path = temp_path("workers.json");
        let mut d = FileDiscovery::new(path.clone());
        assert_eq!(d.look(false).await, Look::NotYet, "no file yet");
        assert_eq!(d.look(true).await, Look::NotYet);

        std::fs::write(&path, r#"{"version":1,"workers":[{"url":"http://a:1"}]}"#).unwrap();
        assert_eq!(urls(d.look(false).await), ["http://a:1"]);
        assert_eq!(d.look(false).await, Look::Unchanged, "same metadata");
        assert_eq!(
            urls(d.look(true).await),
            ["http://a:1"],
            "a full look rereads"
        );

        std::fs::write(
            &path,
            r#"{"version":1,"workers":[{"url":"http://a:1"},{"url":"http://b:2"}]}"#,
        )
        .unwrap();
        assert_eq!(urls(d.look(false).await), ["http://a:1", "http://b:2"]);

        std::fs::write(&path, r#"{"version":1,"workers":[{"url":"#).unwrap();
        assert!(matches!(
            d.look(false).await,
            Look::Fault(Fault::Invalid(_))
        ));
        assert_eq!(d.look(true).await, Look::Unchanged, "reported once");
        assert_eq!(d.look(true).await, Look::Unchanged);

        std::fs::remove_file(&path).unwrap();
        assert_eq!(d.look(false).await, Look::Fault(Fault::Missing));
        assert_eq!(d.look(true).await, Look::Unchanged, "reported once");

        std::fs::write(&path, r#"{"version":1,"workers":[]}"#).unwrap();
        assert!(urls(d.look(false).await).is_empty());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
