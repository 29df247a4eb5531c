use super::*;

const PRIOR: CostModel = CostModel {
    base_ms: 10.0,
    per_token_ms: 0.1,
    per_decode_ms: 0.5,
};

#[test]
fn an_empty_worker_predicts_with_the_prior() {
    let s = TtftStats::default();
    let p = s.predict(0.0, 0, 1000.0, PRIOR);
    assert_eq!(p.ttft_ms, 10.0 + 100.0);
    assert_eq!((p.ahead_tokens, p.decoding), (0.0, 0.0));
    // requests in flight that are not pending are decoding
    let p = s.predict(0.0, 4, 0.0, PRIOR);
    assert_eq!((p.ttft_ms, p.decoding), (10.0 + 4.0 * 0.5, 4.0));
}

#[test]
fn streamed_requests_queue_until_their_first_byte() {
    let s = TtftStats::default();
    let idle = s.predict(0.0, 0, 0.0, PRIOR);
    let a = s.dispatch(0.0, 1000.0, true, idle, Streaming::Yes);
    let b = s.dispatch(0.0, 1000.0, true, idle, Streaming::Yes);
    // 2000 tokens ahead at 0.1 ms each
    let p = s.predict(0.0, 2, 0.0, PRIOR);
    assert_eq!((p.ahead_tokens, p.decoding), (2000.0, 0.0));
    // the worker has had 50 ms since the oldest was sent: 150 ms of prefill left
    let p = s.predict(50.0, 2, 0.0, PRIOR);
    assert!((p.ahead_tokens - 1500.0).abs() < 1e-9, "{p:?}");
    // at most the head's own work is done until a first byte shows: a worker that answers
    // nothing for 10 s still has the second request waiting
    assert_eq!(s.predict(10_000.0, 2, 0.0, PRIOR).ahead_tokens, 1000.0);
    // a first byte takes one out; it now decodes, and the next one starts then
    s.first_byte(a, 60.0, false, &FleetCost::new(PRIOR));
    let p = s.predict(60.0, 2, 0.0, PRIOR);
    assert_eq!((p.ahead_tokens, p.decoding), (1000.0, 1.0));
    let p = s.predict(90.0, 2, 0.0, PRIOR);
    assert!((p.ahead_tokens - 700.0).abs() < 1e-6, "{p:?}");
    assert_eq!(s.pending(), 1);
    // a request that ends without a first byte leaves too, and teaches nothing
    s.end(b);
    assert_eq!(s.pending(), 0);
    assert_eq!(s.model(PRIOR), PRIOR);
}

#[test]
fn responses_that_are_not_streams_count_until_their_predicted_first_byte() {
    let s = TtftStats::default();
    let predicted = Prediction {
        ttft_ms: 100.0,
        ahead_tokens: 0.0,
        decoding: 0.0,
    };
    s.dispatch(0.0, 1000.0, true, predicted, Streaming::No);
    s.dispatch(0.0, 5000.0, true, predicted, Streaming::Unknown);
    assert_eq!(s.predict(0.0, 2, 0.0, PRIOR).ahead_tokens, 6000.0);
    // past 100 ms the known non-stream decodes; the unknown one counts until 200 ms
    let p = s.predict(150.0, 2, 0.0, PRIOR);
    assert_eq!(p.decoding, 1.0);
    assert!(
        (p.ahead_tokens - (5000.0 - 150.0 / 0.1)).abs() < 1e-6,
        "{p:?}"
    );
    let p = s.predict(250.0, 2, 0.0, PRIOR);
    assert_eq!((p.ahead_tokens, p.decoding), (0.0, 2.0));
}

/// `samples` first bytes on `s` from a worker whose true costs are `truth`; `ahead` and
/// `decoding` vary.
fn teach(s: &TtftStats, fleet: &FleetCost, truth: CostModel, samples: u32) {
    let mut t = 0.0;
    for i in 0..samples {
        let own = f64::from(200 + (i * 37) % 3000);
        let decoding = f64::from((i * 7) % 12);
        let p = Prediction {
            ttft_ms: 0.0,
            ahead_tokens: f64::from((i * 53) % 2000),
            decoding,
        };
        let id = s.dispatch(t, own, true, p, Streaming::Yes);
        let y = truth.base_ms
            + truth.per_token_ms * (p.ahead_tokens + own)
            + truth.per_decode_ms * decoding;
        s.first_byte(id, t + y, true, fleet);
        t += 1000.0;
    }
}

const SLOWER: CostModel = CostModel {
    base_ms: 25.0,
    per_token_ms: 0.3,
    per_decode_ms: 2.0,
};

#[test]
fn the_fleet_model_learns_the_measured_costs() {
    let fleet = FleetCost::new(PRIOR);
    let s = TtftStats::default();
    teach(&s, &fleet, SLOWER, 400);
    let m = fleet.model();
    assert!((m.per_token_ms - 0.3).abs() < 0.03, "{m:?}");
    assert!((m.per_decode_ms - 2.0).abs() < 0.5, "{m:?}");
    // what matters is the prediction: within 5% over the range it saw
    for (tokens, decoding) in [(300.0, 0.0), (1500.0, 4.0), (4000.0, 10.0)] {
        let want = 25.0 + 0.3 * tokens + 2.0 * decoding;
        let got = m.at([1.0, tokens / 1000.0, decoding]);
        assert!(
            (got - want).abs() < 0.05 * want,
            "{tokens} {decoding}: {got} vs {want}"
        );
    }
    // the worker that taught it runs at the fleet's speed, and predicts with its model
    assert_eq!(s.model(m), m);
    let p = s.predict(1e9, 0, 1000.0, m);
    assert!((p.ttft_ms - m.at([1.0, 1.0, 0.0])).abs() < 1e-6);
}

#[test]
fn a_clearly_slower_worker_gets_its_own_speed_and_small_differences_do_not_count() {
    let fleet = FleetCost::new(PRIOR);
    let (a, b) = (TtftStats::default(), TtftStats::default());
    // a and b serve alike, b at three times the cost: the fleet's model is their mix
    for round in 0..20 {
        teach(&a, &fleet, PRIOR, 1);
        teach(&b, &fleet, PRIOR.scaled(3.0), 1);
        if round == 8 {
            assert_eq!(b.model(fleet.model()), fleet.model(), "too few samples yet");
        }
    }
    for _ in 0..100 {
        teach(&a, &fleet, PRIOR, 1);
        teach(&b, &fleet, PRIOR.scaled(3.0), 1);
    }
    let f = fleet.model();
    let (ma, mb) = (a.model(f), b.model(f));
    let ratio = mb.at([1.0, 1.0, 0.0]) / ma.at([1.0, 1.0, 0.0]);
    assert!((2.4..3.6).contains(&ratio), "{ratio} {ma:?} {mb:?}");
    // c is 10% slower than a fleet of its own kind: noise-sized, it keeps the fleet's model
    let fleet = FleetCost::new(PRIOR);
    let (d, c) = (TtftStats::default(), TtftStats::default());
    for _ in 0..100 {
        teach(&d, &fleet, PRIOR, 1);
        teach(&c, &fleet, PRIOR.scaled(1.1), 1);
    }
    assert_eq!(c.model(fleet.model()), fleet.model());
    assert_eq!(d.model(fleet.model()), fleet.model());
    // a worker never measured predicts with the fleet's model
    assert_eq!(TtftStats::default().model(fleet.model()), fleet.model());
}

#[test]
fn what_the_samples_cannot_tell_stays_at_the_prior() {
    // no request ever decodes beside a prefill: the decode cost keeps its starting value
    let fleet = FleetCost::new(PRIOR);
    let s = TtftStats::default();
    for i in 0..200u32 {
        let own = f64::from(500 + (i * 91) % 2500);
        let p = Prediction {
            ttft_ms: 0.0,
            ahead_tokens: 0.0,
            decoding: 0.0,
        };
        let id = s.dispatch(0.0, own, true, p, Streaming::Yes);
        s.first_byte(id, 10.0 + 0.2 * own, true, &fleet);
    }
    let m = fleet.model();
    assert!((m.per_token_ms - 0.2).abs() < 0.02, "{m:?}");
    assert!(
        (m.per_decode_ms - PRIOR.per_decode_ms).abs() < 1e-6,
        "{m:?}"
    );
}

#[test]
fn coefficients_never_go_negative() {
    let fleet = FleetCost::new(PRIOR);
    let s = TtftStats::default();
    // first bytes faster than any positive model explains
    for i in 0..50u32 {
        let p = Prediction {
            ttft_ms: 0.0,
            ahead_tokens: 0.0,
            decoding: f64::from(i % 5),
        };
        let id = s.dispatch(0.0, f64::from(100 + i * 100), true, p, Streaming::Yes);
        s.first_byte(id, 0.0, true, &fleet);
    }
    let m = fleet.model();
    assert!(
        m.base_ms >= 0.0 && m.per_token_ms > 0.0 && m.per_decode_ms >= 0.0,
        "{m:?}"
    );
}

#[test]
fn mean_own_tokens_follows_placements_with_text() {
    let s = TtftStats::default();
    let p = s.predict(0.0, 0, 0.0, PRIOR);
    for _ in 0..200 {
        let id = s.dispatch(0.0, 120.0, true, p, Streaming::Yes);
        s.end(id);
    }
    assert!((s.mean_own_tokens() - 120.0).abs() < 1.0);
    // placements without text do not move it
    let id = s.dispatch(0.0, 99_999.0, false, p, Streaming::Unknown);
    s.end(id);
    assert!((s.mean_own_tokens() - 120.0).abs() < 1.0);
}

#[test]
fn solve3_solves_and_refuses_singular_systems() {
    let x = solve3(
        [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]],
        [3.0, 5.0, 5.0],
    );
    let x = x.unwrap();
    for (got, want) in x.iter().zip([1.0, 1.0, 1.0]) {
        assert!((got - want).abs() < 1e-9, "{x:?}");
    }
    assert!(
        solve3(
            [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]],
            [1.0, 2.0, 3.0]
        )
        .is_none()
    );
}
