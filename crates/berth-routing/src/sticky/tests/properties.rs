use proptest::prelude::*;

use super::*;
use crate::Rng;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn never_an_unavailable_worker(
        down in proptest::collection::vec(0u32..6, 0..6),
        keys in proptest::collection::vec(0u8..20, 1..60),
        policy in prop::sample::select(PolicyKind::ALL.to_vec()),
        override_on: bool,
        seed: u64,
    ) {
        let f = Fleet::new(6);
        let r = router(policy, override_on, None);
        let mut rng = Rng::seeded(seed);
        let mut held = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            // availability changes over time
            let d: Vec<u32> = if i % 2 == 0 { down.clone() } else { vec![] };
            let s = f.snap(&d);
            let key = format!("k{k}");
            let pairs = [("x-smg-routing-key", key.as_bytes())];
            let h = HeaderList(&pairs);
            match r.route(&keyed(&h), &s, T0, &mut rng) {
                Ok(dec) => {
                    prop_assert!(!d.contains(&dec.worker.0));
                    held.push(dec);
                }
                Err(e) => {
                    prop_assert_eq!(e, Error::NoAvailableWorkers);
                    prop_assert!((0..6).all(|w| d.contains(&w)));
                }
            }
        }
    }

    #[test]
    fn adding_workers_never_moves_a_pin(
        keys in proptest::collection::vec("[a-z]{1,8}", 1..40),
        sticky_override: bool,
        seed: u64,
    ) {
        let f = Fleet::new(8);
        let r = if sticky_override { sticky_rr() } else { manual() };
        let mut rng = Rng::seeded(seed);
        let small = f.snap_of(&[0, 1, 2], &[]);
        let before: Vec<WorkerId> = keys.iter().map(|k| route_key(&r, &small, k, &mut rng).worker).collect();
        let big = f.snap(&[]);
        for (k, w) in keys.iter().zip(before) {
            prop_assert_eq!(route_key(&r, &big, k, &mut rng).worker, w);
        }
    }
}
