//! The session ledger's rules as scripted sequences (times in ms, no clock).

use super::*;

const A: WorkerId = WorkerId(0);
const B: WorkerId = WorkerId(1);

#[test]
fn a_session_counts_its_last_prompt_on_its_worker() {
    let mut l = Ledger::default();
    l.record(1, A, Some(1000), 0, 0);
    l.record(2, A, Some(500), 0, 1);
    l.record(3, B, Some(700), 0, 1);
    assert_eq!((l.working_set(A), l.working_set(B)), (1500, 700));
    // the next turn replaces the last size, it does not add to it
    l.record(1, A, Some(1200), 0, 2);
    assert_eq!(l.working_set(A), 1700);
    // an unread turn keeps the size
    l.record(1, A, None, 0, 3);
    assert_eq!(l.working_set(A), 1700);
    assert_eq!((l.sessions_on(A), l.sessions_on(B)), (2, 1));
    // a move takes the session's tokens along, and the session itself
    l.record(1, B, Some(1300), 0, 4);
    assert_eq!((l.working_set(A), l.working_set(B)), (500, 2000));
    assert_eq!((l.sessions_on(A), l.sessions_on(B)), (1, 2));
    assert_eq!(l.stats().sessions, 3);
}

#[test]
fn a_prefix_its_worker_held_is_counted_once() {
    let mut l = Ledger::default();
    // the first session brings a 2000-token system prompt; two more reuse it
    l.record(1, A, Some(2500), 0, 0);
    l.record(2, A, Some(2300), 2000, 0);
    l.record(3, A, Some(2800), 2000, 0);
    assert_eq!(l.working_set(A), 2500 + 300 + 800);
    // later turns count what they add past the base; `held` only sets the base once
    l.record(2, A, Some(2600), 2600, 1);
    assert_eq!(l.working_set(A), 2500 + 600 + 800);
    // a move carries the counted tokens to the new worker
    l.record(3, B, Some(2900), 0, 2);
    assert_eq!((l.working_set(A), l.working_set(B)), (3100, 900));
}

#[test]
fn idle_sessions_stop_counting() {
    let mut l = Ledger::default();
    assert_eq!(l.live_window_ms(), MAX_LIVE_MS, "no gap seen yet");
    l.record(1, A, Some(1000), 0, 0);
    l.record(2, A, Some(400), 0, 0);
    // session 2 takes a turn every 500 ms: 4 gaps make a 2 s window; session 1 went quiet
    for t in (500..=5000).step_by(500) {
        l.record(2, A, Some(400), 0, t);
    }
    assert_eq!(l.live_window_ms(), 2000);
    assert_eq!(l.working_set(A), 400);
    assert_eq!(l.stats().sessions, 1);
    assert_eq!(l.sessions_on(A), 1);
    l.expire(7000);
    assert_eq!(l.working_set(A), 0);
    assert_eq!(l.stats().sessions, 0);
    assert_eq!(l.sessions_on(A), 0);
    assert!(l.expiry.is_empty());
    // a session used just after it was queued is still due from its last use
    l.record(3, B, Some(10), 0, 10_000);
    l.record(3, B, Some(20), 0, 10_400);
    let w = l.live_window_ms();
    l.expire(10_000 + w);
    assert_eq!(l.working_set(B), 20, "used at 10,400: live for {w} ms more");
    l.expire(10_400 + w);
    assert_eq!(l.working_set(B), 0);
    assert!(l.expiry.is_empty());
    // the window stays within its bounds
    for t in 0..200 {
        l.record(4, A, Some(1), 0, 20_000 + t);
    }
    assert_eq!(l.live_window_ms(), MIN_LIVE_MS);
}

#[test]
fn each_worker_carries_the_turn_rate_of_its_live_sessions() {
    let mut l = Ledger::default();
    // no gap seen yet: rates unknown
    l.record(1, A, Some(100), 0, 0);
    l.record(2, B, Some(100), 0, 0);
    assert_eq!((l.turn_rate(A), l.turn_rate(B)), (0.0, 0.0));
    // session 1 takes a turn every 250 ms (4 per second), session 2 every 500 ms
    for t in 1..=8 {
        l.record(1, A, Some(100), 0, t * 250);
        if t % 2 == 0 {
            l.record(2, B, Some(100), 0, t * 250);
        }
    }
    assert!((l.turn_rate(A) - 4.0).abs() < 1e-9, "{}", l.turn_rate(A));
    assert!((l.turn_rate(B) - 2.0).abs() < 1e-9, "{}", l.turn_rate(B));
    assert!((l.session_rate(1).0 - 4.0).abs() < 1e-9);
    assert_eq!(
        (l.session_rate(1).1, l.session_rate(2).1, l.session_rate(9)),
        (9, 5, (0.0, 0))
    );
    // a new session counts at the fleet's typical gap until it has its own
    l.record(3, B, Some(100), 0, 2000);
    assert!(l.turn_rate(B) > 2.0);
    // a move takes the rate along; expiry drops it
    l.record(1, B, Some(100), 0, 2250);
    assert_eq!(l.turn_rate(A), 0.0);
    assert!(l.turn_rate(B) > 5.0);
    l.expire(1_000_000);
    assert_eq!((l.turn_rate(A), l.turn_rate(B)), (0.0, 0.0));
}

#[test]
fn sessions_are_keyed_by_key_within_model() {
    assert_eq!(session_key("k", Some("m")), session_key("k", Some("m")));
    assert_ne!(session_key("k", Some("m")), session_key("k", Some("n")));
    assert_ne!(session_key("k", None), session_key("j", None));
    assert_ne!(session_key("mk", Some("")), session_key("k", Some("m")));
}

#[test]
fn the_ledger_is_bounded() {
    let mut l = Ledger::default();
    for k in 0..(MAX_SESSIONS as u128 + 10) {
        l.record(k, A, Some(1), 0, 0);
    }
    assert_eq!(l.stats().sessions, MAX_SESSIONS);
    assert_eq!(l.stats().dropped_full, 10);
    assert_eq!(l.working_set(A), MAX_SESSIONS as u64);
    // the oldest went first
    assert!(!l.sessions.contains_key(&0) && l.sessions.contains_key(&10));
}

#[test]
fn a_session_is_expected_to_take_as_many_turns_as_the_ended_ones_took_or_the_live_ones_so_far() {
    let mut l = Ledger::default();
    assert_eq!(l.expected_turns(), 1.0, "nothing seen: one turn");
    // two live sessions: 3 and 1 turns so far (at 0, 1000, 2000 ms and at 0)
    for t in [0, 1000, 2000] {
        l.record(1, A, Some(100), 0, t);
    }
    l.record(2, B, Some(100), 0, 0);
    assert_eq!(l.expected_turns(), 2.0, "the live sessions' mean so far");
    // session 3 takes ten turns 1 s apart, then every session goes quiet and ends
    for t in (0..10).map(|i| 3000 + 1000 * i) {
        l.record(3, A, Some(100), 0, t);
    }
    l.expire(100_000);
    assert_eq!(l.stats().sessions, 0);
    // ended (in expiry order): 1 (3 turns), 2 (1 turn), 3 (10 turns), weighted 5% each after
    // the first: 3 -> 2.9 -> 3.255
    let ended = 3.0 + 0.05 * (1.0 - 3.0);
    let ended = ended + 0.05 * (10.0 - ended);
    assert!(
        (l.expected_turns() - ended).abs() < 1e-9,
        "{}",
        l.expected_turns()
    );
    // a live session with more turns so far than that: its count is the better guess
    for t in 0..5 {
        l.record(4, A, Some(100), 0, 200_000 + t);
    }
    assert_eq!(l.expected_turns(), 5.0);
}

#[test]
fn the_typical_continuing_turn_is_the_mean_of_the_reported_ones() {
    let mut l = Ledger::default();
    assert_eq!(l.turn_tokens(), None);
    l.observe_turn(400.0, None);
    assert_eq!(l.turn_tokens(), Some(400.0), "the first report sets it");
    l.observe_turn(200.0, None);
    assert_eq!(l.turn_tokens(), Some(390.0));
    l.observe_turn(f64::NAN, None);
    assert_eq!(l.turn_tokens(), Some(390.0), "nonsense is ignored");
}

#[test]
fn the_typical_continuing_turn_is_what_the_turns_added_not_what_their_worker_lost() {
    let mut l = Ledger::default();
    l.observe_turn(400.0, None);
    assert_eq!(l.turn_growth(), None, "growth unknown: no sample");
    // a turn that added 100 tokens but found only its system prompt cached re-prefilled its
    // whole history: it cost 2,000 tokens, it added 100
    l.observe_turn(2_000.0, Some(100.0));
    assert_eq!(l.turn_growth(), Some(100.0));
    assert_eq!(l.turn_tokens(), Some(480.0));
    // never more than it cost (a turn the engine had partly cached ahead, e.g. its answer)
    l.observe_turn(50.0, Some(300.0));
    assert_eq!(l.turn_growth(), Some(97.5));
}

#[test]
fn a_new_prompt_through_a_live_sessions_tip_continues_its_conversation() {
    let mut l = Ledger::default();
    l.record(1, A, Some(100), 0, 0);
    l.set_tip(1, 13);
    l.record(2, B, Some(200), 0, 0);
    l.set_tip(2, 23);
    // chains are chunk hashes; session 2's conversation continues session 1's
    assert_eq!(l.parent_of(&[11, 12, 13, 14]), Some((1, A)));
    assert_eq!(
        l.parent_of(&[11, 12, 13, 14, 23, 24]),
        Some((2, B)),
        "the deeper one"
    );
    assert_eq!(l.parent_of(&[11, 12, 15]), None, "another branch");
    assert_eq!(
        l.parent_of(&[11, 12, 13]),
        None,
        "the same prompt, not a continuation"
    );
    // a later read turn moves the tip on; the old one names nobody
    l.record(1, A, Some(150), 0, 10);
    l.set_tip(1, 16);
    assert_eq!(l.parent_of(&[11, 12, 13, 14]), None);
    assert_eq!(l.parent_of(&[11, 12, 13, 14, 15, 16, 17]), Some((1, A)));
    // a session that moved takes its conversation along
    l.record(1, B, Some(160), 0, 20);
    assert_eq!(l.parent_of(&[11, 12, 13, 14, 15, 16, 17]), Some((1, B)));
    // a forgotten session's tip goes with it (the ledger full: session 1 the oldest)
    for k in 3..3 + MAX_SESSIONS as u128 - 1 {
        l.record(k, A, Some(1), 0, 30);
    }
    assert_eq!(l.parent_of(&[11, 12, 13, 14, 15, 16, 17]), None);
    assert!(l.tips.len() <= 1, "{}", l.tips.len());
}

#[test]
fn a_tip_new_prompts_go_on_from_differently_or_two_sessions_share_names_no_parent() {
    let mut l = Ledger::default();
    l.record(1, A, Some(100), 0, 0);
    l.set_tip(1, 13);
    // the first prompt through it sets how the conversation goes on; the same way again is
    // a sibling, another way splits it
    assert_eq!(l.parent_of(&[12, 13, 14, 15]), Some((1, A)));
    assert_eq!(l.parent_of(&[12, 13, 14, 16]), Some((1, A)));
    assert_eq!(l.parent_of(&[12, 13, 24]), None);
    assert_eq!(l.parent_of(&[12, 13, 14, 15]), None, "split for good");
    // two live sessions at one tip: neither; one of them gone, the other
    l.record(2, A, Some(100), 0, 0);
    l.set_tip(2, 33);
    l.record(3, B, Some(100), 0, 0);
    l.set_tip(3, 33);
    assert_eq!(l.parent_of(&[32, 33, 34]), None);
    l.record(3, B, Some(120), 0, 1);
    l.set_tip(3, 35);
    assert_eq!(l.parent_of(&[32, 33, 34]), Some((2, A)));
}
