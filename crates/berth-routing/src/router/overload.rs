//! Worker overload protection on the router: the screen's outcome as the candidates a
//! decision may place on, and its counters.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::decision::{Branch, Placement};
use crate::error::Error;
use crate::worker::{Screen, WorkerId};

/// Counters of worker overload protection.
#[derive(Debug, Default)]
pub(crate) struct OverloadCounts {
    vetoes: AtomicU64,
    all_over: AtomicU64,
    shed: AtomicU64,
}

impl OverloadCounts {
    /// Where placement may go after `screen` of `cands` (`predicts`: the policy weighs every
    /// worker's queue itself, so "all over" leaves placement to it); a shed request is
    /// counted and refused.
    pub(crate) fn place_on<'a>(
        &self,
        screen: &'a Screen,
        cands: &'a [WorkerId],
        predicts: bool,
    ) -> Result<Placement<'a>, Error> {
        Ok(match screen {
            Screen::Shed => {
                self.shed.fetch_add(1, Ordering::Relaxed);
                return Err(Error::WorkerOverloadShed);
            }
            Screen::Under(under) => Placement {
                cands: under,
                least_loaded: false,
            },
            // SMG sends a request to the least-loaded worker when all are over
            Screen::AllOver => Placement {
                cands,
                least_loaded: !predicts,
            },
            Screen::All => Placement {
                cands,
                least_loaded: false,
            },
        })
    }

    /// Counts a decision made under `screen` that went to `worker`; a pinned hit placed
    /// nothing, and a placement that reached an overloaded worker anyway (`agentic`'s
    /// sub-agent on its parent's worker) left nothing out, so neither counts as a veto.
    pub(crate) fn count(&self, screen: &Screen, branch: Option<Branch>, worker: WorkerId) {
        if branch == Some(Branch::OccupiedHit) {
            return;
        }
        let counter = match screen {
            Screen::Under(under) if under.binary_search(&worker).is_err() => return,
            Screen::Under(_) => &self.vetoes,
            Screen::AllOver => &self.all_over,
            Screen::All | Screen::Shed => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// (vetoes, all over, shed) since start.
    pub(crate) fn totals(&self) -> (u64, u64, u64) {
        (
            self.vetoes.load(Ordering::Relaxed),
            self.all_over.load(Ordering::Relaxed),
            self.shed.load(Ordering::Relaxed),
        )
    }
}
