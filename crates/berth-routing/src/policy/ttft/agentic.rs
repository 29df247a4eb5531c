//! `agentic` (berth's own, issue #21): `ttft_aware`'s cost model and pins, with placement and
//! moves priced by what a session costs the fleet, for long agentic sessions near saturation.
//!
//! Per candidate `w`, for a prompt of `P` tokens of which `own(w)` are not cached on `w`:
//!
//! ```text
//! overflow(w) = max(0, working_set(w) + own(w) - kv_capacity(w))
//! cost(w)     = TTFT(w) + per_token(w) x overflow(w)
//! ```
//!
//! `TTFT(w)` is `ttft_aware`'s prediction (its queued prefill, the prompt's uncached tokens,
//! the requests decoding); `working_set(w)` is the tokens `w`'s live sessions hold (the session
//! ledger, `ledger.rs`: each live keyed session's last prompt less the prefix its worker
//! already held from other sessions); the overflow is what the prompt would evict there,
//! priced as the prefill that sending those tokens again will cost. A prefix every candidate
//! holds is the same on every worker, so it decides nothing and is not counted in working sets.
//!
//! **A copy is priced by the fleet's load** (session 5). Prefilling on `w` what another
//! candidate already holds (a group's shared prefix, a session's history on a move) costs
//! this request its prefill, and on a busy fleet it also delays every request that queues
//! behind it until the backlog drains: about `load / (1 - load)` requests' worth. So placement
//! and moves compare
//!
//! ```text
//! fleet_cost(w) = cost(w) + load / (1 - load) x per_token(w) x (own(w) - floor)
//! ```
//!
//! with `floor` the least `own` of the candidates (on a move: the pinned worker's) and `load`
//! ([`load`]) the larger of what the live sessions send (their turn rates times what one
//! typical turn costs the workers' prefill, per candidate) and the backlog every candidate has
//! now (the least queue, `q` such turns: `q / (q + 1)`), at most [`LOAD_MAX`]. An idle worker takes a copy for
//! nothing (nobody waits behind it); once every worker is busy a group's sessions stay with the
//! workers holding its prefix unless those fall clearly behind, and a pinned session stops
//! moving for a queue that its own re-prefill would only shift.
//!
//! - **New sessions and keyless requests** are priced over the session's life (session 7):
//!
//!   ```text
//!   life(w)  = future_turns x turn_ms x rho(w) / (1 - min(rho(w), LOAD_MAX))
//!   rho(w)   = load x share(w)
//!   price(w) = fleet_cost(w) + life(w)
//!   ```
//!
//!   with `future_turns` the turns a session is expected to send after this one (the ledger's
//!   expected turns less one; 0 for a keyless request), `turn_ms` one typical turn's prefill
//!   (below) and `share(w)` `w`'s share of the fleet's coming turns (its live sessions' turn
//!   rate over the candidates' mean; its live sessions over their mean until a rate is known).
//!   Each coming turn of the session waits behind the turns `w`'s live sessions send, so a
//!   holder of the prompt that carries most of the fleet's sessions loses a long session to a
//!   worker with few, once the waits outweigh the copy; a short one, or a keyless request,
//!   stays with the holder. Then, among the candidates within one typical turn's prefill of
//!   the least price (`Evaluation::turn_ms`; at least 1 ms or 1%) that hold as much of the
//!   prompt as a cheapest one does (the band buys balance, not copies: a copy must pay for
//!   itself in the price), to the one whose live sessions send the fewest turns per second
//!   (the ledger's turn rates, within [`RATE_TIE`]), of those to the one carrying the fewest
//!   live sessions, and of those to the least price; near-ties (1 ms or 1%) to the least
//!   working set (the most free KV), then at random. The queue a worker shows now says little
//!   about the next second when its sessions are in a pause between turns; their turn rate
//!   says what they will send.
//! - **Under KV pressure** (#17 session 15): when the engines report that the fleet's
//!   continuing turns re-prefill more than [`PRESSURE_RATIO`] times what they add (the ledger's
//!   reported uncached tokens per continuing turn against its growth: most of what they
//!   prefill is history their workers evicted; read under `--cache-feedback` `measure` and
//!   `on`, never under `off`, which routes as before), a new session whose prompt's prefix
//!   some candidates hold (within one typical turn's prefill of the most any holds) goes to
//!   the cheapest of those holders by the price above unless staying there is clearly worse
//!   by the move rule below, as a pinned turn of its group would. A copy of a group's prompt onto another worker evicts
//!   what the sessions there use (its KV cannot hold both), and the life price, which sends a
//!   session away from a holder carrying most of the fleet's turns, made such copies during
//!   a burst of one group's sessions; each evicted the other group's prompt, whose next
//!   sessions copied it elsewhere in turn, and `kvpressure` runs tipped from 0.78 to
//!   0.45-0.65 cached (docs/benchmarks.md). A prompt nobody holds is placed by price as before.
//! - **A new session that continues a live session's conversation** (a sub-agent started with
//!   its parent's conversation: its prompt's chunk chain passes through the parent's tip, the
//!   session ledger's `parent_of`) is a turn of that conversation: it goes to the parent's
//!   worker, which holds the conversation, unless staying there is clearly worse than the copy
//!   elsewhere by the move rule below, as the parent's own next turn would; a parent's worker
//!   over the overload threshold still takes it as it takes the parent's pinned turns (the
//!   router keeps it among the candidates, `sticky.rs`), one out of the candidates (down,
//!   excluded after a failure) leaves it to placement. The
//!   life pricing does not apply: the coming turns' waits of one conversation are what its
//!   pinned turns pay wherever the parent is, and a child sent elsewhere copies the system
//!   prompt and the parent's conversation there (session 10: 2-4 such copies a run on the
//!   demo's agentic set, 2,500 tokens each, from the life price and the band).
//! - **The typical turn** is a continuing turn's (most of an agentic fleet's turns): what the
//!   pinned turns that streamed unread added to their sessions' prompts, by the engines'
//!   reports (the ledger's typical continuing turn), not what they cost: a turn whose worker
//!   evicted its history re-prefills it, a cost of KV pressure that the overflow prices, and
//!   counted here too it made copies look cheaper the more they evicted (#17 session 9). What
//!   they cost, their reported uncached tokens, is what an unread turn counts for in a queue
//!   and the unit of the fleet's load (`Evaluation::turn_cost_ms`): the workers are busy with
//!   what the turns cost, re-prefilled histories included (priced by what they added, the load
//!   read 0.53-0.64 where the turns' cost read 0.71-0.75, and copies were priced too cheaply:
//!   #17 session 14).
//!   Until a report came (or with `--cache-feedback off`), the candidates' mean uncached
//!   tokens of placements with text, unbiased from its first sample.
//! - **A pinned session moves** only when staying is clearly worse than re-prefilling its whole
//!   history on the best other worker *and* the eviction that copy causes there:
//!   `TTFT(pinned) > factor x fleet_cost(other) + move_margin_ms` (`fleet_cost(other)` holds
//!   the history's recompute in `own(other)`, priced by the load past what the pinned worker
//!   must recompute too, and the eviction in `overflow(other)`), at most once per
//!   `move_interval_secs`. The factor is `move_factor` when the pinned worker still holds the
//!   whole history and falls towards 1 with the share of it the worker has evicted (the prefix
//!   index, bounded by the worker's KV capacity, tells): a history that must be prefilled
//!   again anyway loses nothing by moving, so only the costs decide.
//! - **Turn-boundary rebalance.** Sessions are placed when they start, but how many turns each
//!   will send is unknown then (3 to 60 on a coding-agent trace), so a worker can end up with
//!   the chatty ones. The ledger keeps each session's turn rate and each worker's sum
//!   (`ledger.rs`). When a session's worker sends more than [`REBALANCE_OVER`] times the
//!   candidates' mean rate, its turn moves to another worker if that is cheap: the copy evicts
//!   nothing there (the worker's working set has room for it), the history the other worker
//!   lacks beyond what this one lacks costs no more than `move_margin_ms` of prefill priced by
//!   the load as every copy is (`1 + load / (1 - load)` times its prefill), the move costs the
//!   fleet no more than staying costs this turn (`fleet_cost(other) <= TTFT(pinned)`: this
//!   worker is behind by more than the copy), and after the move the other worker still sends
//!   no more turns than the worker left behind (no ping-pong), and only a session that has
//!   already taken
//!   [`REBALANCE_MIN_TURNS`] turns (likely to send many more; moving a short one gains
//!   nothing). A session whose history is still short, or whose worker already lost it, is
//!   cheap; a long history stays. A turn pinned to such a worker is read (not streamed unread)
//!   so the rule can see it.
//! - **Imbalance** is read in prefill work (the queued tokens in `TTFT`), KV occupancy (the
//!   overflow) and the sessions' turn rates, not in requests in flight; workers over SMG's
//!   waiting-queue overload threshold (polled from the engine) are left out of placement and moves
//!   (`worker/load.rs`).

use super::{Estimate, Evaluation, TIE_MS, TIE_REL, TtftConfig};
use crate::{Rng, WorkerId};

/// A worker whose live sessions send more than this multiple of the candidates' mean turn
/// rate sheds sessions that are cheap to move.
pub(crate) const REBALANCE_OVER: f64 = 1.1;

/// Only a session that has taken at least this many turns is moved by the rebalance: one
/// that has sent a few is likely to send many more (the imbalance comes from long sessions),
/// while moving a short one gains nothing and costs its cache.
pub(crate) const REBALANCE_MIN_TURNS: u32 = 8;

/// Turn rates within this share of the least count as equal at placement (then cost decides).
pub(crate) const RATE_TIE: f64 = 0.05;

/// The fleet load the copy pricing assumes at most (a copy then costs the requests behind it
/// four times its own prefill): an estimate from turn rates and queues is rough, and past this
/// a copy that would even out a queue many turns long is still allowed.
pub(crate) const LOAD_MAX: f64 = 0.8;

/// The fleet is under KV pressure when the engines report that a continuing turn re-prefills
/// more than this many times what it adds to its prompt: most of what the continuing turns
/// prefill is history their workers had computed and evicted (module docs, "Under KV
/// pressure").
pub(crate) const PRESSURE_RATIO: f64 = 2.0;

/// Whether the engines' reports show the fleet under KV pressure: a continuing turn's reported
/// uncached tokens (`cost`, the ledger's) exceed [`PRESSURE_RATIO`] times the tokens it adds
/// (`growth`). False until both were reported (`--cache-feedback off`: never).
pub(crate) fn kv_pressure(cost: Option<f64>, growth: Option<f64>) -> bool {
    match (cost, growth) {
        (Some(c), Some(g)) => c > PRESSURE_RATIO * g.max(0.0),
        _ => false,
    }
}

/// Whether a worker sending `rate` turns per second is over its share of `rates` (every
/// candidate's, itself included). Takes the rates as they are read (no collection: the pinned
/// path asks this on every turn of a long session).
pub(crate) fn over_share(rate: f64, rates: impl IntoIterator<Item = f64>) -> bool {
    let (sum, n) = rates
        .into_iter()
        .fold((0.0, 0usize), |(sum, n), r| (sum + r, n + 1));
    if n < 2 {
        return false;
    }
    let mean = sum / n as f64;
    mean > 0.0 && rate > REBALANCE_OVER * mean
}

/// Tokens the prompt would evict on `e`'s worker.
fn overflow(e: &Estimate) -> f64 {
    (e.kv_set + e.own_tokens - e.kv_cap).max(0.0)
}

/// What sending the request to `e`'s worker costs, ms.
pub(crate) fn cost(e: &Estimate) -> f64 {
    e.prediction.ttft_ms + e.per_token_ms * overflow(e)
}

/// The estimate `price` finds least; near-ties to the least working set, then at random.
fn cheapest<'a>(
    estimates: impl Iterator<Item = &'a Estimate> + Clone,
    price: impl Fn(&Estimate) -> f64 + Copy,
    rng: &mut Rng,
) -> Option<&'a Estimate> {
    let best = estimates.clone().map(price).min_by(f64::total_cmp)?;
    let near = move |e: &&Estimate| {
        let c = price(e);
        c <= best + TIE_MS.max(best * TIE_REL) || c == best
    };
    let least = estimates
        .clone()
        .filter(near)
        .map(|e| e.kv_set)
        .min_by(f64::total_cmp)?;
    let pool = || {
        estimates
            .clone()
            .filter(near)
            .filter(move |e| e.kv_set <= least)
    };
    let n = pool().count();
    pool().nth(rng.below(n))
}

/// How busy the fleet's prefill is, in `0..=`[`LOAD_MAX`]: the larger of what its live
/// sessions send (their turns per second times what one typical turn costs the workers'
/// prefill, `Evaluation::turn_cost_ms`, per candidate) and the backlog every candidate has now
/// (the least queue, `q` such turns long: `q / (q + 1)`; a burst of new sessions shows there
/// before any turn rate is known). A turn whose worker evicted its history re-prefills it, so
/// the workers are busy with what the turns cost, not with what they add (module docs, "The
/// typical turn"). 0 while a typical turn's cost is unknown.
pub(crate) fn load(eval: &Evaluation) -> f64 {
    let n = eval.estimates.len();
    let turn_ms = eval.turn_cost_ms;
    if n == 0 || turn_ms <= 0.0 {
        return 0.0;
    }
    let rates: f64 = eval.estimates.iter().map(|e| e.turn_rate).sum();
    let sent = rates * turn_ms / 1000.0 / n as f64;
    let backlog = eval
        .estimates
        .iter()
        .map(|e| e.prediction.ahead_tokens * e.per_token_ms)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    let q = backlog.max(0.0) / turn_ms;
    sent.max(q / (q + 1.0)).clamp(0.0, LOAD_MAX)
}

/// What sending the request to `e`'s worker costs the fleet, ms: [`cost`], plus the delay the
/// prefill it adds beyond `floor` tokens (what the best-placed candidate must prefill: a copy
/// of a prefix or history another worker holds) causes the requests that queue behind it:
/// `extra` (`load / (1 - load)`, [`copy_weight`]) times that prefill. On an idle fleet a copy
/// delays nobody else; on a saturated one it delays every request behind it until the backlog
/// drains.
fn fleet_cost(e: &Estimate, floor: f64, extra: f64) -> f64 {
    cost(e) + extra * e.per_token_ms * (e.own_tokens - floor).max(0.0)
}

/// `load / (1 - load)` of [`load`]: how many times its own prefill a copy costs the requests
/// behind it.
pub(crate) fn copy_weight(eval: &Evaluation) -> f64 {
    let rho = load(eval);
    rho / (1.0 - rho)
}

/// A candidate's share of the fleet's coming turns: its live sessions' turn rate over the
/// candidates' mean, or, while no rate is known (a burst of first turns), its live sessions
/// over their mean; 0 on an empty fleet. The fleet's sums are taken once.
fn traffic_share(eval: &Evaluation) -> impl Fn(&Estimate) -> f64 + Copy {
    let n = eval.estimates.len().max(1) as f64;
    let rates: f64 = eval.estimates.iter().map(|e| e.turn_rate).sum();
    let sessions: f64 = eval.estimates.iter().map(|e| f64::from(e.sessions)).sum();
    move |e: &Estimate| {
        if rates > 0.0 {
            e.turn_rate / (rates / n)
        } else if sessions > 0.0 {
            f64::from(e.sessions) / (sessions / n)
        } else {
            0.0
        }
    }
}

/// What a new session's life costs it on a candidate beyond this turn, ms (module docs,
/// "Placement"): its `future_turns` turns each wait behind the turns the worker's live
/// sessions send, `turn_ms x rho / (1 - rho)` with `rho` the fleet's [`load`] times the
/// worker's share of the fleet's turns ([`traffic_share`]), at most [`LOAD_MAX`] in the
/// denominator. 0 for a request without a session.
pub(crate) fn life_cost(eval: &Evaluation) -> impl Fn(&Estimate) -> f64 + Copy {
    let rho = load(eval);
    let turns = eval.future_turns.max(0.0);
    let turn_ms = eval.turn_ms;
    let share = traffic_share(eval);
    move |e: &Estimate| {
        let r = rho * share(e);
        turns * turn_ms * r / (1.0 - r.min(LOAD_MAX))
    }
}

/// Where a request without a pin goes (module docs, "Placement"): a new session continuing a
/// live one's conversation (a sub-agent) to that session's worker unless staying there is
/// clearly worse (the move rule); otherwise among the candidates within one typical turn's
/// prefill of the least cost over the session's life that hold as much of the prompt as the
/// cheapest one, to the one whose live sessions send the fewest turns; the cheapest of those.
pub(crate) fn place(cfg: &TtftConfig, eval: &Evaluation, rng: &mut Rng) -> Option<WorkerId> {
    if let Some(parent) = eval.parent.filter(|w| eval.of(*w).is_some()) {
        return Some(clearly_better(cfg, eval, parent, rng).unwrap_or(parent));
    }
    let extra = copy_weight(eval);
    let floor = eval
        .estimates
        .iter()
        .map(|e| e.own_tokens)
        .min_by(f64::total_cmp)?;
    let life = life_cost(eval);
    let price = move |e: &Estimate| fleet_cost(e, floor, extra) + life(e);
    let best = eval.estimates.iter().map(price).min_by(f64::total_cmp)?;
    let tie = TIE_MS.max(best * TIE_REL);
    // the band buys balance, not copies: only a candidate holding as much of the prompt as a
    // cheapest one does may win by its turn rate (a copy must pay for itself in the price)
    let held = eval
        .estimates
        .iter()
        .filter(|e| price(e) <= best + tie)
        .map(|e| e.own_tokens)
        .min_by(f64::total_cmp)?;
    let holds = move |e: &Estimate| e.per_token_ms * (e.own_tokens - held) <= tie;
    let band = tie.max(eval.turn_ms);
    let close = || {
        eval.estimates
            .iter()
            .filter(move |e| price(e) <= best + band && holds(e))
    };
    let least = close().map(|e| e.turn_rate).min_by(f64::total_cmp)?;
    let calm = move |e: &&Estimate| e.turn_rate <= least * (1.0 + RATE_TIE) + f64::EPSILON;
    let fewest = close().filter(calm).map(|e| e.sessions).min()?;
    let few = move |e: &&Estimate| e.sessions <= fewest;
    let chosen = cheapest(close().filter(calm).filter(few), price, rng)?;
    if !eval.kv_pressure {
        return Some(chosen.worker);
    }
    // under KV pressure a copy evicts what the sessions there use: a new session stays with
    // the workers holding its prompt (within one typical turn's prefill of the most any
    // candidate holds) unless staying there is clearly worse (the move rule)
    let band_tokens = move |e: &Estimate| e.per_token_ms * (e.own_tokens - floor) <= band;
    if band_tokens(chosen) {
        return Some(chosen.worker);
    }
    let holder = cheapest(eval.estimates.iter().filter(|e| band_tokens(e)), price, rng)?;
    Some(clearly_better(cfg, eval, holder.worker, rng).unwrap_or(holder.worker))
}

/// Where a session pinned to `pinned` moves, if staying is clearly worse than the move's whole
/// cost elsewhere.
pub(crate) fn move_target(
    cfg: &TtftConfig,
    eval: &Evaluation,
    pinned: WorkerId,
    rng: &mut Rng,
) -> Option<WorkerId> {
    let here = eval.of(pinned)?;
    clearly_better(cfg, eval, pinned, rng).or_else(|| rebalance(cfg, eval, here, rng))
}

/// The move rule (module docs, "A pinned session moves"): the best other worker than `pinned`
/// when staying on `pinned` is clearly worse than the move's whole cost there.
fn clearly_better(
    cfg: &TtftConfig,
    eval: &Evaluation,
    pinned: WorkerId,
    rng: &mut Rng,
) -> Option<WorkerId> {
    let here = eval.of(pinned)?;
    let extra = copy_weight(eval);
    let price = move |e: &Estimate| fleet_cost(e, here.own_tokens, extra);
    let to = cheapest(
        eval.estimates.iter().filter(|e| e.worker != pinned),
        price,
        rng,
    )?;
    let factor = 1.0 + (cfg.move_factor - 1.0) * held_share(eval, here);
    (here.prediction.ttft_ms > factor * price(to) + cfg.move_margin_ms).then_some(to.worker)
}

/// The turn-boundary rebalance (module docs): where a cheap session of an over-share worker
/// goes, if anywhere.
fn rebalance(
    cfg: &TtftConfig,
    eval: &Evaluation,
    here: &Estimate,
    rng: &mut Rng,
) -> Option<WorkerId> {
    let (s, turns) = eval.session_rate;
    if s <= 0.0 || turns < REBALANCE_MIN_TURNS || !eval.with_text {
        return None;
    }
    if !over_share(here.turn_rate, eval.estimates.iter().map(|e| e.turn_rate)) {
        return None;
    }
    // the copy is priced as placement prices one: its prefill, times what it delays the
    // requests that queue behind it on a busy fleet (`fleet_cost`); and the move must cost the
    // fleet no more than staying costs this turn (no margin: a move within a margin of staying
    // still costs a history's re-prefill, and on open arrivals such moves were the tail)
    let extra = copy_weight(eval);
    let price = move |e: &Estimate| fleet_cost(e, here.own_tokens, extra);
    let fits = |e: &&Estimate| {
        let copy = (e.own_tokens - here.own_tokens).max(0.0);
        e.worker != here.worker
            && e.turn_rate + s <= here.turn_rate - s
            && overflow(e) <= 0.0
            && (1.0 + extra) * copy * e.per_token_ms <= cfg.move_margin_ms
            && price(e) <= here.prediction.ttft_ms
    };
    cheapest(eval.estimates.iter().filter(fits), price, rng).map(|e| e.worker)
}

/// The share of the prompt `e`'s worker still holds (1 when the prompt is unknown).
fn held_share(eval: &Evaluation, e: &Estimate) -> f64 {
    if eval.prompt_tokens > 0.0 {
        (1.0 - e.own_tokens / eval.prompt_tokens).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

// Tests: `sticky/tests/agentic.rs` and `agentic_load.rs` (scripted sequences on the router).
