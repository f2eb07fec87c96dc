//! The six workloads: layout, one operation, and the invariant recovery must
//! restore. Lock ids: 0 the antagonists' lock; 1–9 volatile-annotated locks
//! (DRAM indexes, LRU, statistics, tickets); 100 and up locks that protect
//! persistent data.

use super::record::{set_word, word};
use super::{Bench, Params, Worker, DATA};

/// The antagonists' lock.
pub const ANTAGONIST_LOCK: u64 = 0;

const SPS_N: u64 = 256;
const CQ_CAP: u64 = 64;
const PC_BUCKETS: u64 = 32;
const TATP_SUBS: u64 = 128;
const TPCC_DISTRICTS: u64 = 4;
const TPCC_ITEMS: u64 = 64;
const YCSB_RECORDS: u64 = 128;

fn mix(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    x ^= x >> 29;
    x.wrapping_mul(0x1656_67b1_9e37_79f9) | 1
}

fn tpcc_orders(p: &Params) -> u64 {
    (p.workers * p.ops) as u64 + 1
}
fn tpcc_district(d: u64) -> u64 {
    DATA + 64 * d
}
fn tpcc_stock(i: u64) -> u64 {
    DATA + 64 * TPCC_DISTRICTS + 8 * i
}
fn tpcc_order(p: &Params, d: u64, o: u64) -> u64 {
    tpcc_stock(TPCC_ITEMS) + 128 * (d * tpcc_orders(p) + o)
}

/// The region's initial content.
pub fn initial(bench: Bench, p: &Params) -> Vec<u8> {
    let size = match bench {
        Bench::Sps => 8 * SPS_N,
        Bench::Cq => 8 * CQ_CAP + 128,
        Bench::Pc => 128 * PC_BUCKETS,
        Bench::Tatp => 16 * TATP_SUBS,
        Bench::Tpcc => tpcc_order(p, TPCC_DISTRICTS, 0) - DATA,
        Bench::YcsbA => 64 * YCSB_RECORDS,
    };
    let mut m = vec![0u8; (DATA + size) as usize];
    match bench {
        Bench::Sps => (0..SPS_N).for_each(|i| set_word(&mut m, DATA + 8 * i, i + 1)),
        Bench::Tatp => (0..TATP_SUBS).for_each(|s| set_word(&mut m, DATA + 16 * s + 8, mix(s, 0))),
        Bench::Tpcc => (0..TPCC_ITEMS).for_each(|i| set_word(&mut m, tpcc_stock(i), 100)),
        Bench::YcsbA => {
            for r in 0..YCSB_RECORDS {
                (0..4).for_each(|f| set_word(&mut m, DATA + 64 * r + 8 + 8 * f, mix(r, f)));
            }
        }
        Bench::Cq | Bench::Pc => {}
    }
    m
}

/// Operation number `i` of worker `w`.
pub fn op(bench: Bench, w: &mut Worker<'_>, p: &Params, i: usize) {
    match bench {
        Bench::Sps => sps(w),
        Bench::Cq => cq(w, i),
        Bench::Pc => pc(w),
        Bench::Tatp => tatp(w),
        Bench::Tpcc => tpcc(w, p),
        Bench::YcsbA => ycsb(w),
    }
}

/// Swap two random elements under their stripes' locks (16 elements a
/// stripe), then count the swap in volatile statistics.
fn sps(w: &mut Worker<'_>) {
    let i = w.rand(SPS_N);
    let j = (i + 1 + w.rand(SPS_N - 1)) % SPS_N;
    let (ai, aj) = (DATA + 8 * i, DATA + 8 * j);
    let (lo, hi) = if i < j { (ai, aj) } else { (aj, ai) };
    let (s1, s2) = (i.min(j) / 16, i.max(j) / 16);
    w.begin();
    w.lock(100 + s1, false);
    w.log(lo);
    if s2 != s1 {
        w.lock(100 + s2, false);
    }
    w.log(hi);
    let (vi, vj) = (w.load(ai), w.load(aj));
    w.commit(&[(ai, vj), (aj, vi)]);
    if s2 != s1 {
        w.unlock(100 + s2, false);
    }
    w.unlock(100 + s1, false);
    w.volatile_section(1);
}

const CQ_LOCK: u64 = 200;
fn cq_head() -> u64 {
    DATA + 8 * CQ_CAP
}
fn cq_tail() -> u64 {
    cq_head() + 64
}

/// Alternate enqueues (a volatile ticket lock hands out the value) and dequeues.
fn cq(w: &mut Worker<'_>, i: usize) {
    let enqueue = (w.rand(2) + i as u64) & 1 == 0;
    if enqueue {
        w.volatile_section(2);
    }
    w.lock(CQ_LOCK, false);
    let (h, t) = (w.load(cq_head()), w.load(cq_tail()));
    if enqueue && t - h < CQ_CAP {
        let v = mix(w.rand(u64::MAX), t);
        w.tx(&[(DATA + 8 * (t % CQ_CAP), v), (cq_tail(), t + 1)]);
    } else if !enqueue && h < t {
        w.tx(&[(DATA + 8 * (h % CQ_CAP), 0), (cq_head(), h + 1)]);
    }
    w.unlock(CQ_LOCK, false);
}

/// Get or put a random key; the bucket's lock protects it; the LRU list is volatile.
fn pc(w: &mut Worker<'_>) {
    let key = 1 + w.rand(256);
    let b = key % PC_BUCKETS;
    let bucket = DATA + 128 * b;
    w.lock(300 + b, false);
    if w.rand(2) == 1 {
        let slot = (0..4).map(|s| bucket + 32 * s);
        let found = slot.clone().find(|&s| w.load(s) == key);
        let s = found.or_else(|| slot.clone().find(|&s| w.load(s) == 0)).unwrap_or(bucket + 32 * ((key / PC_BUCKETS) % 4));
        let ver = if w.load(s) == key { w.load(s + 8) + 1 } else { 1 };
        w.tx(&[(s, key), (s + 8, ver), (s + 16, mix(key, ver))]);
    }
    w.unlock(300 + b, false);
    w.volatile_section(3);
}

/// Update one subscriber's location (found through a volatile index).
fn tatp(w: &mut Worker<'_>) {
    let s = w.rand(TATP_SUBS);
    w.volatile_section(4);
    w.lock(400 + s, false);
    let loc = 1 + w.rand(1 << 30);
    w.tx(&[(DATA + 16 * s, loc), (DATA + 16 * s + 8, mix(s, loc))]);
    w.unlock(400 + s, false);
}

/// New order: the district's counter, the order and its lines, the stock of
/// 3-6 distinct items (each looked up in a volatile item index).
fn tpcc(w: &mut Worker<'_>, p: &Params) {
    let d = w.rand(TPCC_DISTRICTS);
    let n = 3 + w.rand(4);
    let mut items: Vec<u64> = Vec::new();
    while (items.len() as u64) < n {
        let it = w.rand(TPCC_ITEMS);
        if !items.contains(&it) {
            items.push(it);
        }
    }
    items.sort_unstable();
    w.begin();
    w.lock(500 + d, false);
    let o = w.load(tpcc_district(d));
    let room = o + 1 < tpcc_orders(p);
    let rec = tpcc_order(p, d, o.min(tpcc_orders(p) - 1));
    let mut writes = vec![(tpcc_district(d), o + 1), (rec, o + 1), (rec + 8, n)];
    if room {
        writes.iter().for_each(|&(a, _)| w.log(a));
        w.log(rec + 16);
    }
    let mut delta = 0u64;
    for (k, &it) in items.iter().enumerate() {
        w.volatile_section(5);
        w.lock(600 + it, false);
        let q = 1 + w.rand(5);
        let s = w.load(tpcc_stock(it));
        let new = if s < q + 10 { s - q + 91 } else { s - q };
        delta = delta.wrapping_add(s.wrapping_sub(new));
        let line = [(tpcc_stock(it), new), (rec + 32 + 16 * k as u64, it + 1), (rec + 40 + 16 * k as u64, q)];
        if room {
            line.iter().for_each(|&(a, _)| w.log(a));
        }
        writes.extend(line);
    }
    writes.push((rec + 16, delta));
    if room {
        w.commit(&writes);
    }
    for &it in items.iter().rev() {
        w.unlock(600 + it, false);
    }
    w.unlock(500 + d, false);
}

/// Read or rewrite a whole record (found through a volatile index).
fn ycsb(w: &mut Worker<'_>) {
    let r = w.rand(YCSB_RECORDS);
    let rec = DATA + 64 * r;
    w.volatile_section(6);
    w.lock(700 + r, false);
    if w.rand(2) == 1 {
        let v = w.load(rec) + 1;
        let mut writes = vec![(rec, v)];
        writes.extend((0..4).map(|f| (rec + 8 + 8 * f, mix(r, v * 8 + f))));
        w.tx(&writes);
    } else {
        (0..5).for_each(|f| {
            w.load(rec + 8 * f);
        });
    }
    w.unlock(700 + r, false);
}

/// The invariant recovery must restore.
pub fn invariant(bench: Bench, p: &Params, m: &[u8]) -> Result<(), String> {
    match bench {
        Bench::Sps => {
            let mut v: Vec<u64> = (0..SPS_N).map(|i| word(m, DATA + 8 * i)).collect();
            v.sort_unstable();
            match v.iter().enumerate().find(|(i, &x)| x != *i as u64 + 1) {
                Some((i, x)) => Err(format!("sps: the array is no longer a permutation (sorted[{i}] = {x})")),
                None => Ok(()),
            }
        }
        Bench::Cq => cq_invariant(m),
        Bench::Pc => {
            for s in (0..4 * PC_BUCKETS).map(|s| DATA + 32 * s) {
                let (k, v, x) = (word(m, s), word(m, s + 8), word(m, s + 16));
                if k != 0 && x != mix(k, v) {
                    return Err(format!("pc: slot {:#x}: key {k} version {v} has a value of another version", s));
                }
            }
            Ok(())
        }
        Bench::Tatp => match (0..TATP_SUBS).find(|&s| word(m, DATA + 16 * s + 8) != mix(s, word(m, DATA + 16 * s))) {
            Some(s) => Err(format!("TATP: subscriber {s}: location and its checksum disagree")),
            None => Ok(()),
        },
        Bench::Tpcc => tpcc_invariant(p, m),
        Bench::YcsbA => {
            for r in 0..YCSB_RECORDS {
                let rec = DATA + 64 * r;
                let v = word(m, rec);
                let want = |f: u64| if v == 0 { mix(r, f) } else { mix(r, v * 8 + f) };
                if (0..4).any(|f| word(m, rec + 8 + 8 * f) != want(f)) {
                    return Err(format!("YCSB: record {r} mixes fields of different versions (version {v})"));
                }
            }
            Ok(())
        }
    }
}

fn cq_invariant(m: &[u8]) -> Result<(), String> {
    let (h, t) = (word(m, cq_head()), word(m, cq_tail()));
    if h > t || t - h > CQ_CAP {
        return Err(format!("cq: head {h} and tail {t} are inconsistent"));
    }
    for k in 0..CQ_CAP {
        let pos = if k >= h % CQ_CAP { h - h % CQ_CAP + k } else { h - h % CQ_CAP + CQ_CAP + k };
        let live = pos < t;
        let v = word(m, DATA + 8 * k);
        if live != (v != 0) {
            return Err(format!("cq: slot {k} is {} but holds {v:#x} (head {h}, tail {t})", if live { "live" } else { "free" }));
        }
    }
    Ok(())
}

fn tpcc_invariant(p: &Params, m: &[u8]) -> Result<(), String> {
    let mut delta = 0u64;
    for d in 0..TPCC_DISTRICTS {
        let next = word(m, tpcc_district(d));
        for o in 0..tpcc_orders(p) {
            let rec = tpcc_order(p, d, o);
            let marker = word(m, rec);
            if (o < next) != (marker == o + 1) || (o >= next && marker != 0) {
                return Err(format!("TPCC: district {d} next order {next}, but order {o} has marker {marker}"));
            }
            if o < next {
                delta = delta.wrapping_add(word(m, rec + 16));
            }
        }
    }
    let stock = (0..TPCC_ITEMS).map(|i| word(m, tpcc_stock(i))).fold(0u64, u64::wrapping_add);
    if stock.wrapping_add(delta) != 100 * TPCC_ITEMS {
        return Err(format!("TPCC: stock {stock} and the committed orders' deltas do not add up to the initial stock"));
    }
    Ok(())
}
