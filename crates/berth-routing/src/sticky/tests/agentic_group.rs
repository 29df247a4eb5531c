//! `agentic`'s pricing of a shared prefix's copy over the sessions of its group (issue #21,
//! session 8), as scripted sequences on the pure router: no clock, no IO. Prompts are text at
//! 4 characters per token; the prior is 10 ms + 0.1 ms per token.

use super::ttft::{all_but, fresh, route};
use super::*;

fn agentic() -> Router {
    router(PolicyKind::Agentic, false, None)
}

/// A fleet of `n` workers with room for everything (no eviction decides).
fn roomy(n: usize) -> Fleet {
    let f = Fleet::new(n);
    for s in &f.stats {
        s.set_kv_capacity_tokens(1_000_000);
    }
    f
}

/// Two workers. `group` sessions open with a 2000-token prefix (a repository's instructions
/// their group shares) on worker 0, the first bringing it, and take three turns a second
/// apart, each adding 1000 tokens (every first byte arrives at once: the queues are empty
/// between turns); worker 1 carries nothing. Then a request opening with `opening` arrives
/// under `key`. Returns where it goes and the sessions' texts.
fn after_group(group: usize, opening: impl Fn(&[String]) -> String, key: Option<&str>) -> WorkerId {
    let f = roomy(2);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(3);
    let prefix = fresh("repository instructions", 2000);
    let mut texts: Vec<String> = vec![prefix.clone(); group];
    for secs in 0..3 {
        let now = Duration::from_secs(secs);
        for (i, text) in texts.iter_mut().enumerate() {
            text.push_str(&fresh(&format!("g{i} turn {secs}"), 1000));
            let ex = all_but(WorkerId(0), 2);
            let mut d = route(&r, &snap, Some(&format!("g{i}")), text, &ex, now, &mut rng);
            d.lease.first_byte(now, false);
        }
    }
    let t = opening(&texts);
    route(&r, &snap, key, &t, &[], Duration::from_secs(3), &mut rng).worker
}

/// The group's next session opens with the prefix and 500 tokens of its own.
fn next_of_group(texts: &[String]) -> String {
    let prefix = &texts[0][..2000 * 4];
    format!("{prefix}{}", fresh("a new session of the group", 500))
}

/// A copy of a group's prefix is priced over the group's sessions. Worker 0 holds the prefix
/// and every session of the group; each takes three turns (a new one is expected to send two
/// more after its first), so its life on worker 0 waits behind the group's turns: about 2 x
/// 120 ms x rho / (1 - rho), rho = 0.12 per session of the group. The copy to worker 1 costs
/// 200 ms of prefill, times 1 + load / (1 - load) for the requests queueing behind it.
///
/// - Two sessions: the life costs about 75 ms on worker 0, the copy about 230 ms, of which the
///   new session carries half (113 ms): it stays with the holder.
/// - Four: the life costs about 220 ms, the copy about 265 ms, of which the new session carries
///   a quarter (the group's three live sessions that opened with the prefix carry the rest: the
///   first brought it): it goes to worker 1, which becomes the group's second holder. Before
///   the rule the whole copy was charged to it and it stayed (220 < 265 ms).
/// - A keyless request sends no more turns: the holder wins either way.
#[test]
fn a_group_gets_a_second_holder_once_its_sessions_pay_for_the_copy() {
    assert_eq!(
        after_group(2, next_of_group, Some("new")),
        WorkerId(0),
        "two sessions"
    );
    assert_eq!(
        after_group(4, next_of_group, Some("new")),
        WorkerId(1),
        "four sessions"
    );
    assert_eq!(after_group(4, next_of_group, None), WorkerId(0), "keyless");
}

/// A prefix only one session holds is never copied for balance: a sub-agent whose prompt
/// extends the conversation of the group's second session (its whole history, 5000 tokens,
/// on worker 0 only) opens with a prefix no live session opened with, so the copy's 500 ms
/// (and its load weight) is its own, against a life of about 220 ms on worker 0. (Priced over
/// worker 0's four sessions, as a count per worker rather than per prefix would, the copy
/// would cost it about 130 ms and it would move.)
#[test]
fn a_prefix_one_session_holds_is_never_copied_for_balance() {
    let sub_agent = |texts: &[String]| format!("{}{}", texts[1], fresh("a sub-agent", 500));
    assert_eq!(after_group(4, sub_agent, Some("sub")), WorkerId(0));
    assert_eq!(
        after_group(4, next_of_group, Some("sub")),
        WorkerId(1),
        "the group's prefix"
    );
}

/// A prefix every worker holds is worth nothing, however many sessions opened with it: four
/// workers hold a coding agent's 2000-token system prompt and twelve live sessions opened with
/// it (the ledger counts them: one prefix); no copy is needed anywhere, so the count prices
/// nothing and the worker with the least working set (worker 2: its sessions added the fewest
/// tokens) takes the next session.
#[test]
fn a_universal_prefix_is_worth_nothing_whatever_its_sessions() {
    for seed in 0..10 {
        let f = roomy(4);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(seed);
        let shared = fresh("system prompt and tools", 2000);
        for w in 0..4 {
            let ex = all_but(WorkerId(w), 4);
            let mut d = route(&r, &snap, None, &shared, &ex, T0, &mut rng);
            d.lease.first_byte(T0, false);
        }
        for i in 0..12u32 {
            let (w, own) = (i % 4, if i % 4 == 2 { 200 } else { 1000 });
            let t = format!("{shared}{}", fresh(&format!("s{i}"), own as usize));
            let ex = all_but(WorkerId(w), 4);
            let mut d = route(&r, &snap, Some(&format!("s{i}")), &t, &ex, T0, &mut rng);
            d.lease.first_byte(T0, false);
        }
        let stats = r.stats().agentic_ledger.unwrap();
        assert_eq!((stats.sessions, stats.prefixes), (12, 1));
        let t = format!("{shared}{}", fresh("new session", 500));
        let d = route(&r, &snap, Some("new"), &t, &[], T0, &mut rng);
        assert_eq!(d.worker, WorkerId(2), "seed {seed}");
    }
}

/// A copy is priced over the group only while one candidate holds its prefix: it buys the
/// group a second holder, and among two holders placement balances as before. Three workers:
/// workers 0 and 1 hold the group's prefix and four of its sessions each (as in the test
/// above: a life of about 220 ms on either), worker 2 holds nothing. A third copy would cost
/// about 290 ms with its load weight: the next session of the group stays with a holder.
/// (Priced over the group's seven counted sessions, as it was before the rule, the copy would
/// cost it about 40 ms and worker 2 would take it.)
#[test]
fn a_second_holder_ends_the_group_pricing() {
    for seed in 0..5 {
        let f = roomy(3);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(seed);
        let prefix = fresh("repository instructions", 2000);
        let homes = [0, 0, 0, 0, 1, 1, 1, 1];
        let mut texts: Vec<String> = vec![prefix.clone(); homes.len()];
        for secs in 0..3 {
            let now = Duration::from_secs(secs);
            for (i, text) in texts.iter_mut().enumerate() {
                text.push_str(&fresh(&format!("g{i} turn {secs}"), 1000));
                let ex = all_but(WorkerId(homes[i]), 3);
                let mut d = route(&r, &snap, Some(&format!("g{i}")), text, &ex, now, &mut rng);
                d.lease.first_byte(now, false);
            }
        }
        let t = next_of_group(&texts);
        let d = route(
            &r,
            &snap,
            Some("new"),
            &t,
            &[],
            Duration::from_secs(3),
            &mut rng,
        );
        assert_ne!(d.worker, WorkerId(2), "seed {seed}");
    }
}

/// `after_group` with `group` sessions on worker 0 (roomy) beside a worker 1 of `cap` KV tokens
/// that holds another group's 2000-token prefix (brought by a keyless request) for `others`
/// live sessions of that group, each adding 300 tokens a turn. Returns where the group's next
/// session goes.
fn beside_another_group(group: usize, cap: u64, others: usize) -> WorkerId {
    let f = roomy(2);
    f.stats[1].set_kv_capacity_tokens(cap);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(3);
    let prefix = fresh("repository instructions", 2000);
    let theirs = fresh("another repository", 2000);
    let ex1 = all_but(WorkerId(1), 2);
    let mut d = route(&r, &snap, None, &theirs, &ex1, T0, &mut rng);
    d.lease.first_byte(T0, false);
    let mut texts: Vec<String> = vec![prefix.clone(); group];
    let mut their_texts: Vec<String> = vec![theirs.clone(); others];
    for secs in 0..3 {
        let now = Duration::from_secs(secs);
        for (i, text) in texts.iter_mut().enumerate() {
            text.push_str(&fresh(&format!("g{i} turn {secs}"), 1000));
            let ex = all_but(WorkerId(0), 2);
            let mut d = route(&r, &snap, Some(&format!("g{i}")), text, &ex, now, &mut rng);
            d.lease.first_byte(now, false);
        }
        for (i, text) in their_texts.iter_mut().enumerate() {
            text.push_str(&fresh(&format!("h{i} turn {secs}"), 300));
            let mut d = route(&r, &snap, Some(&format!("h{i}")), text, &ex1, now, &mut rng);
            d.lease.first_byte(now, false);
        }
    }
    let t = next_of_group(&texts);
    route(
        &r,
        &snap,
        Some("new"),
        &t,
        &[],
        Duration::from_secs(3),
        &mut rng,
    )
    .worker
}

/// A copy is charged the live histories it evicts (session 9). Worker 0 holds the group's
/// prefix and its eight sessions; worker 1 holds another group's 2000-token prefix and two of
/// its sessions (900 tokens of history each): a resident set of 3800 tokens. With room for
/// them and the copy (the prefix and the new session's 500 tokens), worker 1 takes the new
/// session and becomes the group's second holder. With 5300 tokens of KV the copy would
/// evict 1000 tokens of the other group's live histories (the ledger's working set, 1800,
/// and the held prefix, 2000, counted once), which those sessions must prefill again: the
/// session stays with the holder. (Without the charge the 1000 tokens of the copy that fit,
/// priced over the group, pay for it and worker 1 takes it; without the held prefix the copy
/// seems to fit.) A group of ten crowds its holder enough that the balance outweighs the
/// evictions: the copy is made.
#[test]
fn a_copy_that_evicts_live_histories_is_charged_their_re_prefill() {
    assert_eq!(beside_another_group(8, 1_000_000, 2), WorkerId(1), "room");
    assert_eq!(beside_another_group(8, 5_300, 2), WorkerId(0), "tight");
    assert_eq!(beside_another_group(10, 5_300, 2), WorkerId(1), "crowded");
}
