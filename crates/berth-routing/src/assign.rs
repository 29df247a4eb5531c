//! Assignment modes: where a new key goes, and where it moves when none of its remembered
//! workers is available (SPEC.md section 2).

use std::fmt;
use std::str::FromStr;

use crate::policy::simple::min_by_random_tie;
use crate::policy::{PickRequest, Policy};
use crate::{Error, Rng, WorkerId, WorkerSnapshot};

/// An assignment mode (`--assignment-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssignmentMode {
    /// Uniformly at random.
    Random,
    /// Fewest requests in flight; ties at random.
    MinLoad,
    /// Fewest pinned keys; ties at random.
    MinGroup,
    /// The configured policy decides; the result is pinned.
    Delegate,
}

impl AssignmentMode {
    /// Every mode.
    pub const ALL: [Self; 4] = [Self::Random, Self::MinLoad, Self::MinGroup, Self::Delegate];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::MinLoad => "min_load",
            Self::MinGroup => "min_group",
            Self::Delegate => "delegate",
        }
    }

    /// Picks one of `cands` (non-empty).
    pub(crate) fn pick(
        self,
        policy: &Policy,
        req: &PickRequest<'_>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        rng: &mut Rng,
    ) -> Option<WorkerId> {
        if cands.is_empty() {
            return None;
        }
        match self {
            Self::Random => Some(cands[rng.below(cands.len())]),
            Self::MinLoad => Some(min_by_random_tie(cands, |w| snap.load(w), rng)),
            Self::MinGroup => Some(min_by_random_tie(
                cands,
                |w| snap.stats(w).map_or(0, |s| s.pinned_keys()),
                rng,
            )),
            Self::Delegate => policy.pick(req, snap, cands, rng),
        }
    }
}

impl fmt::Display for AssignmentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AssignmentMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                Error::config(
                    "--assignment-mode",
                    format!("unknown mode {s:?}; expected random, min_load, min_group or delegate"),
                )
            })
    }
}
