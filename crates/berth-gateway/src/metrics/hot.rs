//! A counter family whose most common series is counted without the family's lookup.

use std::hash::Hash;
use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// A counter family that keeps the first series counted beside it: a count with the same
/// labels (a gateway's requests nearly all take one body path and name one model) is a
/// comparison of the labels and an atomic add instead of the family's lock, SipHash of the
/// labels and table probe (about 550 instructions). Other labels take the family's lookup as
/// before; the series appears in the family once counted either way. Bounded: one entry.
#[derive(Debug)]
pub(crate) struct HotFamily<L> {
    family: Family<L, Counter>,
    first: OnceLock<(L, Counter)>,
}

impl<L> Default for HotFamily<L>
where
    L: Clone + Hash + Eq,
{
    fn default() -> Self {
        Self {
            family: Family::default(),
            first: OnceLock::new(),
        }
    }
}

impl<L> HotFamily<L>
where
    L: Clone + Hash + Eq,
{
    /// The family, to register (a clone shares its series).
    pub(crate) fn family(&self) -> &Family<L, Counter> {
        &self.family
    }

    /// Adds one to the series of `labels`.
    pub(crate) fn inc(&self, labels: L) {
        if let Some((first, counter)) = self.first.get()
            && *first == labels
        {
            counter.inc();
            return;
        }
        let counter = self.family.get_or_create(&labels).clone();
        counter.inc();
        // the first series counted stays the one kept
        let _ = self.first.set((labels, counter));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct L {
        a: &'static str,
    }

    #[test]
    fn every_series_counts_in_the_family() {
        let hot = HotFamily::<L>::default();
        let shared = hot.family().clone();
        for a in ["x", "x", "y", "x", "y", "z"] {
            hot.inc(L { a });
        }
        let got = |a| shared.get_or_create(&L { a }).get();
        assert_eq!((got("x"), got("y"), got("z")), (3, 2, 1));
        assert_eq!(hot.first.get().map(|(l, _)| l.a), Some("x"));
    }
}
