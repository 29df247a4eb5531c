//! A counter family whose most common series is counted without the family's lookup.

use std::hash::Hash;
use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// A counter family that keeps the first series counted beside it: a count with the same
/// labels (a gateway's requests nearly all take one body path and name one model) is a
/// comparison of the labels and an atomic add instead of the family's lock, SipHash of the
/// labels and table probe (about 550 instructions). The comparison ([`HotLabels::same`]) takes
/// label values that share the kept ones' storage (the same `&'static str`, the registry's
/// `Arc` of a model) as equal without reading their bytes, and compares the bytes otherwise.
/// Other labels take the family's lookup as before; the series appears in the family once
/// counted either way. Bounded: one entry.
#[derive(Debug)]
pub(crate) struct HotFamily<L> {
    family: Family<L, Counter>,
    first: OnceLock<(L, Counter)>,
}

/// A label set a [`HotFamily`] compares with its kept one.
pub(crate) trait HotLabels: Clone + Hash + Eq {
    /// Whether `self` and `other` are the same labels: the same answer as `==`, found without
    /// reading the bytes of values that lie at the same place ([`same_str`]).
    fn same(&self, other: &Self) -> bool;
}

/// Whether `a` and `b` are equal: at once when they are the same string (same address and
/// length, as a label's `&'static str` or shared `Arc<str>` is each time it is counted), else
/// by their bytes.
#[inline]
pub(crate) fn same_str(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl<L> Default for HotFamily<L>
where
    L: HotLabels,
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
    L: HotLabels,
{
    /// The family, to register (a clone shares its series).
    pub(crate) fn family(&self) -> &Family<L, Counter> {
        &self.family
    }

    /// Adds one to the series of `labels`.
    pub(crate) fn inc(&self, labels: L) {
        if let Some((first, counter)) = self.first.get() {
            let same = first.same(&labels);
            // (every test that counts checks that the shortcut answers as `==` does)
            debug_assert_eq!(same, *first == labels, "HotLabels::same disagrees with ==");
            if same {
                counter.inc();
                return;
            }
        }
        let counter = self.family.get_or_create(&labels).clone();
        counter.inc();
        // the first series counted stays the one kept
        let _ = self.first.set((labels, counter));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct L {
        a: &'static str,
    }

    impl HotLabels for L {
        fn same(&self, other: &Self) -> bool {
            same_str(self.a, other.a)
        }
    }

    /// A string with `s`'s bytes at an address of its own.
    fn elsewhere(s: &str) -> &'static str {
        Box::leak(s.to_owned().into_boxed_str())
    }

    #[test]
    fn same_str_is_equality_wherever_the_bytes_lie() {
        let (a, b) = (elsewhere("model-a"), elsewhere("model-a"));
        assert!(!std::ptr::eq(a, b));
        assert!(same_str(a, a) && same_str(a, b));
        assert!(!same_str(a, elsewhere("model-b")) && !same_str(a, "model"));
        // the same address, a shorter length: not the same string
        assert!(!same_str(a, &a[..5]));
        let (x, y): (Arc<str>, Arc<str>) = (Arc::from("m"), Arc::from("m"));
        assert!(same_str(&x, &y) && same_str(&x, &x.clone()));
    }

    #[test]
    fn equal_labels_stored_elsewhere_count_in_the_kept_series() {
        let hot = HotFamily::<L>::default();
        let shared = hot.family().clone();
        hot.inc(L { a: elsewhere("x") });
        hot.inc(L { a: elsewhere("x") });
        hot.inc(L { a: elsewhere("y") });
        let got = |a| shared.get_or_create(&L { a }).get();
        assert_eq!((got("x"), got("y")), (2, 1));
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
