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
    // long past what the queue should take, it is empty (the model learns the rest)
    assert_eq!(s.predict(10_000.0, 2, 0.0, PRIOR).ahead_tokens, 0.0);
    // a first byte takes one out; it now decodes
    s.first_byte(a, 60.0, false, &FleetCost::new(PRIOR));
    let p = s.predict(60.0, 2, 0.0, PRIOR);
    assert!((p.ahead_tokens - 1000.0 + 60.0 / 0.1 * 0.0).abs() <= 1000.0);
    assert_eq!(p.decoding, 1.0);
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

/// First-byte times from a worker slower than the prior; `ahead` and `decoding` vary.
fn teach(s: &TtftStats, truth: CostModel, samples: u32) {
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
        s.first_byte(id, t + y, true, &FleetCost::new(PRIOR));
        t += 1000.0;
    }
}

#[test]
fn the_model_learns_a_workers_measured_costs() {
    let s = TtftStats::default();
    let truth = CostModel {
        base_ms: 25.0,
        per_token_ms: 0.3,
        per_decode_ms: 2.0,
    };
    teach(&s, truth, 400);
    let m = s.model(PRIOR);
    assert!((m.per_token_ms - 0.3).abs() < 0.03, "{m:?}");
    assert!((m.per_decode_ms - 2.0).abs() < 0.5, "{m:?}");
    // what matters is the prediction: within 5% over the range it saw (the prior's pull
    // trades a little per-token cost for base time)
    for (tokens, decoding) in [(300.0, 0.0), (1500.0, 4.0), (4000.0, 10.0)] {
        let want = 25.0 + 0.3 * tokens + 2.0 * decoding;
        let got = m.base_ms + m.per_token_ms * tokens + m.per_decode_ms * decoding;
        assert!(
            (got - want).abs() < 0.05 * want,
            "{tokens} {decoding}: {got} vs {want}"
        );
    }
    // and predicts with it
    let p = s.predict(1e9, 0, 1000.0, PRIOR);
    assert!((p.ttft_ms - (m.base_ms + 1000.0 * m.per_token_ms)).abs() < 1e-6);
}

#[test]
fn what_the_samples_cannot_tell_stays_at_the_prior() {
    // no request ever decodes beside a prefill: the decode cost keeps its starting value
    let s = TtftStats::default();
    for i in 0..200u32 {
        let own = f64::from(500 + (i * 91) % 2500);
        let p = Prediction {
            ttft_ms: 0.0,
            ahead_tokens: 0.0,
            decoding: 0.0,
        };
        let id = s.dispatch(0.0, own, true, p, Streaming::Yes);
        s.first_byte(id, 10.0 + 0.2 * own, true, &FleetCost::new(PRIOR));
    }
    let m = s.model(PRIOR);
    assert!((m.per_token_ms - 0.2).abs() < 0.02, "{m:?}");
    assert!(
        (m.per_decode_ms - PRIOR.per_decode_ms).abs() < 1e-6,
        "{m:?}"
    );
}

#[test]
fn coefficients_never_go_negative() {
    let s = TtftStats::default();
    // first bytes faster than any positive model explains
    for i in 0..50u32 {
        let p = Prediction {
            ttft_ms: 0.0,
            ahead_tokens: 0.0,
            decoding: f64::from(i % 5),
        };
        let id = s.dispatch(0.0, f64::from(100 + i * 100), true, p, Streaming::Yes);
        s.first_byte(id, 0.0, true, &FleetCost::new(PRIOR));
    }
    let m = s.model(PRIOR);
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
