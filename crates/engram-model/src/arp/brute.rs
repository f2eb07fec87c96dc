//! An independent, definitional persist memory order for tiny traces, used
//! to cross-check [`super::order`].
//!
//! Where `order` folds the rules into per-thread running sets, this module
//! writes every base edge of the definitions in [`super`] out explicitly
//! between events, takes the transitive closure (Warshall), restricts it to
//! persists, and enumerates every subset of persists to keep the down-closed
//! ones. Traces must be tiny (at most ~14 persists) and every persist must be
//! a single 8-byte atom, so that atoms and events coincide.

use super::order::Model;
use super::trace::ArpTrace;
use std::collections::HashSet;

/// Events `a < b` related by the definitions' base edges under `model`.
fn base_edges(t: &ArpTrace, model: Model) -> Vec<Vec<bool>> {
    let n = t.events.len();
    let ev = &t.events;
    let mut r = vec![vec![false; n]; n];
    let sw = t.synchronizes_with();
    let sb = |a: usize, b: usize| a < b && ev[a].thread == ev[b].thread;
    let counted = |rel: usize, acq: usize| model != Model::ArpVa || !(ev[rel].va || ev[acq].va);
    for b in 0..n {
        for a in 0..b {
            let (x, y) = (&ev[a], &ev[b]);
            let edge = match model {
                // program order on each thread, plus synchronization
                Model::Scp => sb(a, b),
                Model::Rcbsp => sb(a, b) && (is_sync(y) || is_sync(x)),
                Model::Arp => sb(a, b) && (y.is_barrier() || x.is_barrier() || y.is_release() || x.is_acquire()),
                Model::ArpVa => sb(a, b) && (y.is_barrier() || x.is_barrier() || (y.is_release() && !y.va) || (x.is_acquire() && !x.va)),
                Model::Epoch => false,
            };
            let sync = sw[b].contains(&a) && counted(a, b);
            let coh = same_word(t, a, b);
            r[a][b] = edge || sync || coh;
        }
    }
    if model == Model::Epoch {
        return epoch_edges(t);
    }
    r
}

fn is_sync(e: &super::trace::ArpEvent) -> bool {
    e.is_acquire() || e.is_release() || e.is_barrier()
}

fn same_word(t: &ArpTrace, a: usize, b: usize) -> bool {
    match (t.events[a].persist(), t.events[b].persist()) {
        (Some((x, _)), Some((y, _))) => x / 8 == y / 8,
        _ => false,
    }
}

/// Epoch persistency: `a ≤p b` iff `a ≤hb s ≤hb b` for a sequence point or
/// full fence `s` (hb = sequenced-before ∪ synchronizes-with, transitively),
/// plus same-word coherence, closed transitively.
#[allow(clippy::needless_range_loop)] // relation matrices read best with indices
fn epoch_edges(t: &ArpTrace) -> Vec<Vec<bool>> {
    let n = t.events.len();
    let sw = t.synchronizes_with();
    let mut hb = vec![vec![false; n]; n];
    for b in 0..n {
        for a in 0..b {
            hb[a][b] = t.events[a].thread == t.events[b].thread || sw[b].contains(&a);
        }
    }
    close(&mut hb);
    let mut r = vec![vec![false; n]; n];
    for s in (0..n).filter(|&s| t.events[s].is_barrier()) {
        for a in 0..n {
            for b in 0..n {
                if (hb[a][s] || a == s) && (hb[s][b] || b == s) && a != b {
                    r[a][b] = true;
                }
            }
        }
    }
    for b in 0..n {
        for a in 0..b {
            r[a][b] |= same_word(t, a, b);
        }
    }
    r
}

#[allow(clippy::needless_range_loop)] // Warshall over a matrix
fn close(r: &mut [Vec<bool>]) {
    let n = r.len();
    for k in 0..n {
        for i in 0..n {
            if r[i][k] {
                for j in 0..n {
                    if r[k][j] {
                        r[i][j] = true;
                    }
                }
            }
        }
    }
}

/// Every crash image of `t` under `model`, by the definitions.
pub fn images(t: &ArpTrace, model: Model) -> HashSet<Vec<u8>> {
    let mut r = base_edges(t, model);
    close(&mut r);
    let persists: Vec<usize> = (0..t.events.len()).filter(|&i| t.events[i].persist().is_some()).collect();
    let mut out = HashSet::new();
    for mask in 0u32..(1 << persists.len()) {
        let has = |k: usize| mask & (1 << k) != 0;
        let closed = (0..persists.len()).all(|k| !has(k) || (0..persists.len()).all(|j| !r[persists[j]][persists[k]] || has(j)));
        if !closed {
            continue;
        }
        let mut img = t.base.clone();
        for (k, &e) in persists.iter().enumerate() {
            if has(k) {
                if let Some((addr, data)) = t.events[e].persist() {
                    img[addr as usize..addr as usize + data.len()].copy_from_slice(data);
                }
            }
        }
        out.insert(img);
    }
    out
}
