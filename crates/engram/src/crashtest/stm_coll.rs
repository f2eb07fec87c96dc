//! Crash-consistency workloads of the STM's shipped collections:
//! `stm-rbtree` (an [`RbTree<u64, u64>`]: one cell per node, the parent
//! link and colour in one self-relative word), `stm-hash` (a
//! [`HashTable<u64, u64>`] of 3 buckets: the first entry inline in its
//! bucket's cell, overflow nodes, promotion of the first overflow node
//! when the inline entry is removed) and `stm-coll2` (a [`Treap`] and a
//! [`PMap`] HAMT side by side, each operation applied to both).
//!
//! Each commit applies one operation of a fixed sequence ([`Coll::op`])
//! and counts it in a `PTVar<u64>` in the same transaction; a plain Rust
//! map is the model. After every commit (a plain region: nothing reaches
//! the trace) the pool must hold the model's state. Every crash image must
//!
//! - open and pass `Pool::check` (the harness);
//! - read, cell by cell through [`Raw`] (no lock word still locked in the
//!   new epoch, no version at or above the durable clock reservation), as
//!   exactly the model after `count` operations, with `count` at least the
//!   operations known durable: all or nothing per commit;
//! - pass the collection's own `check` (red-black rules, parent links and
//!   order; every key in its own bucket's chain, once; the treap's order
//!   and ranks; the trie's bitmaps, paths and counts) in a transaction,
//!   which must see the same entries;
//! - accept one more insert, and check again.
//!
//! The sequences are chosen so that the commits traced at the moderate
//! settings cover every structural case (the test below proves it from
//! the trees' and chains' shapes before and after each commit).

use super::stm::{apply_model, raw, Check, Dir, Entries, Op, Raw};
use super::Harness;
use crate::error::{Error, Result};
use crate::stm::collections::{Handle, HashTable, PMap, RbTree, Shape, Treap};
use crate::stm::redo::{StmMeta, META_ROOT};
use crate::stm::{PTVar, STx, StmResult, VarCell};
use crate::{PPtr, Pool};
use engram_model::Trace;
use std::collections::BTreeMap;

/// A collection under test: a map from `u64` to `u64` in named roots.
trait Coll: Copy + 'static {
    /// What messages call it (and the prefix of its roots' names).
    const NAME: &'static str;
    /// Operations committed before tracing starts.
    const SEEDED: u64;
    /// The collection in its roots, made empty if new.
    fn make(pool: &Pool) -> Result<Self>;
    /// The collection in an image's roots `d`, read through `r`.
    fn find(d: &Dir, r: &Raw<'_, '_>) -> Result<Self>;
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>>;
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>>;
    /// The collection's own invariant check, and its entries (any order).
    fn check(&self, tx: &STx<'_>) -> StmResult<(Shape, Entries)>;
    /// The entries, read cell by cell through `r` in the documented
    /// layout, in key order.
    fn raw(&self, r: &Raw<'_, '_>) -> Result<Entries>;
    /// Operation `i` of the sequence.
    fn op(i: u64) -> Op;
}

/// Operations traced: as many as `stm-map` traces.
fn traced_ops(regions: u64) -> u64 {
    4 * regions
}

/// Root of the operation count.
const COUNT: &str = "coll.count";

/// The key the check after recovery inserts (no sequence uses it).
const AFTER_KEY: u64 = 1 << 40;

/// More cells than any workload's collection has: a walk past it loops.
const MAX_CELLS: usize = 10_000;

/// The collection handle in root `name` of an image, read through `r`.
fn handle<H: Handle>(d: &Dir, r: &Raw<'_, '_>, name: &str) -> Result<H> {
    r.var(&d.var::<H>(name)?)
}

/// The collection and the count of operations applied to it.
#[derive(Clone, Copy)]
struct Subject<C> {
    coll: C,
    count: PTVar<u64>,
}

impl<C: Coll> Subject<C> {
    fn open(pool: &Pool) -> Result<Self> {
        Ok(Subject { coll: C::make(pool)?, count: pool.root(COUNT, || 0u64)? })
    }

    /// The handles in an image, read through [`Raw`].
    fn find(pool: &Pool) -> Result<Self> {
        let d = Dir::of(pool)?;
        let coll = raw(pool, d.ptr::<StmMeta>(META_ROOT)?, |r| C::find(&d, r))?;
        Ok(Subject { coll, count: d.var::<u64>(COUNT)? })
    }

    /// Operation `op` and the count, in one commit; returns the value the
    /// operation replaced or removed, and checks the pool against the model.
    fn step(&self, pool: &Pool, op: Op, model: &mut Vec<Entries>) -> Result<()> {
        let got = pool.atomically(|tx| {
            let old = match op {
                Op::Put(k, v) => self.coll.insert(tx, k, v)?,
                Op::Del(k) => self.coll.remove(tx, k)?,
            };
            tx.write(&self.count, tx.read(&self.count)? + 1)?;
            Ok(old)
        })?;
        let mut m: BTreeMap<u64, u64> = model.last().cloned().unwrap_or_default().into_iter().collect();
        let old = apply_model(&mut m, op);
        let want: Entries = m.into_iter().collect();
        if got != old {
            return Err(Error::corrupt(format!("{op:?} returned {got:?}, the model {old:?}")));
        }
        let (count, entries) = self.read(pool)?;
        if count != model.len() as u64 || entries != want {
            return Err(Error::corrupt(format!("after {op:?} (count {count}) the {} holds {entries:?}, the model {want:?}", C::NAME)));
        }
        model.push(want);
        super::note_returned(model.len() as u64 - 1);
        Ok(())
    }

    /// The count and the entries, read cell by cell outside the STM.
    fn read(&self, pool: &Pool) -> Result<(u64, Entries)> {
        let meta = Dir::of(pool)?.ptr::<StmMeta>(META_ROOT)?;
        raw(pool, meta, |r| Ok((r.var(&self.count)?, self.coll.raw(r)?)))
    }

    /// The collection's own check in a transaction, which must see `want`.
    fn check_in_stm(&self, pool: &Pool, want: &Entries) -> Result<()> {
        let (shape, mut got) = pool.atomically(|tx| self.coll.check(tx))?;
        got.sort_unstable();
        if got != *want || shape.len != want.len() as u64 {
            return Err(Error::corrupt(format!("a transaction sees {got:?} ({} entries by the check), a plain read {want:?}", shape.len)));
        }
        Ok(())
    }
}

/// An image: the model after `k >= min` operations, the collection's own
/// check, and one more insert.
fn check_image<C: Coll>(pool: &Pool, model: &[Entries], min: usize) -> Check<()> {
    let s = Subject::<C>::find(pool).map_err(|e| e.to_string())?;
    let (k, got) = s.read(pool).map_err(|e| format!("reading the {}: {e}", C::NAME))?;
    let k = k as usize;
    if k < min {
        return Err(format!("durable commits lost: {k} operations visible, {min} were durable"));
    }
    match model.get(k) {
        Some(m) if *m == got => {}
        Some(m) => return Err(format!("partial commit: after {k} operations the {} holds {got:?}, the model {m:?}", C::NAME)),
        None => return Err(format!("{k} operations visible, only {} ran", model.len() - 1)),
    }
    s.check_in_stm(pool, &got).map_err(|e| format!("the {}'s own check: {e}", C::NAME))?;
    let mut after = model[..=k].to_vec();
    s.step(pool, Op::Put(AFTER_KEY, 1), &mut after).map_err(|e| format!("an insert after recovery: {e}"))?;
    s.check_in_stm(pool, &after[k + 1]).map_err(|e| format!("the {}'s own check after an insert: {e}", C::NAME))
}

/// The workload: `SEEDED` operations, then `traced_ops` more traced.
fn workload<C: Coll>(h: &Harness) -> Result<Trace> {
    let (pool, tracer) = h.create(0)?;
    let s = Subject::<C>::open(&pool)?;
    let mut model = vec![Entries::new()];
    for i in 0..C::SEEDED {
        s.step(&pool, C::op(i), &mut model)?;
    }
    s.check_in_stm(&pool, &model[model.len() - 1])?;
    let min = model.len() - 1;
    let n = traced_ops(h.settings.regions);
    let trace = h.traced(pool, &tracer, |pool| (C::SEEDED..C::SEEDED + n).try_for_each(|i| s.step(pool, C::op(i), &mut model)))?;
    h.expect(move |pool, returned| check_image::<C>(pool, &model, min.max(returned as usize)));
    Ok(trace)
}

/// Operation `i` of a sequence: `seed[i]`, then `cycle` over and over;
/// each put's value is its key times 1000 plus `i`, so a replacement shows.
fn sequence(i: u64, seed: &[(bool, u64)], cycle: &[(bool, u64)]) -> Op {
    let j = i as usize;
    let (put, key) = if j < seed.len() { seed[j] } else { cycle[(j - seed.len()) % cycle.len()] };
    if put {
        Op::Put(key, key * 1000 + i)
    } else {
        Op::Del(key)
    }
}

// ----- the red-black tree ---------------------------------------------------------

/// A node's cell as [`RbTree::addr`] documents it: the lock word, then
/// key, left, right, value and `up` (the parent's address minus the
/// node's, colour in bit 0, 1 red).
type RbCell = VarCell<[u64; 5]>;

/// A node as read by [`rb_nodes`] (the coverage test reads every field).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
struct RbNode {
    addr: u64,
    key: u64,
    left: u64,
    right: u64,
    value: u64,
    /// The parent's address (0: the top).
    parent: u64,
    red: bool,
}

/// The tree's nodes in key order, read cell by cell through `r`; every
/// node's `up` word must name the node that links to it.
fn rb_nodes(t: &RbTree<u64, u64>, r: &Raw<'_, '_>) -> Result<Vec<RbNode>> {
    let top = r.cell(PPtr::<VarCell<u64>>::from_addr(t.addr()), "the tree's root variable")?;
    // (the node to visit, the node whose link led to it)
    let (mut out, mut stack, mut cur, mut from) = (Vec::new(), Vec::<RbNode>::new(), top, 0);
    while cur != 0 || !stack.is_empty() {
        while cur != 0 {
            let [key, left, right, value, up] = r.cell(PPtr::<RbCell>::from_addr(cur), "a tree node")?;
            let parent = if up & !1 == 0 { 0 } else { cur.wrapping_add(up & !1) };
            if parent != from {
                return Err(Error::corrupt(format!("tree node {cur:#x}'s parent link names {parent:#x}, {from:#x} links to it")));
            }
            stack.push(RbNode { addr: cur, key, left, right, value, parent, red: up & 1 == 1 });
            if stack.len() + out.len() > MAX_CELLS {
                return Err(Error::corrupt("the tree has a cycle"));
            }
            (from, cur) = (cur, left);
        }
        let n = stack.pop().unwrap_or_else(|| unreachable!("the loop's condition"));
        (from, cur) = (n.addr, n.right);
        out.push(n);
    }
    Ok(out)
}

/// Keys put in ascending order (left rotations, the root moving right);
/// then keys below them (a right rotation), a replacement, removals of
/// the top and of nodes on both sides (the removal's fix-ups rotating
/// either way), keys put above and between: the test below shows which
/// of the traced commits rotate which way, recolour and move the top.
const RB_SEED: [(bool, u64); 10] =
    [(true, 10), (true, 20), (true, 30), (true, 40), (true, 50), (true, 60), (true, 70), (true, 80), (true, 90), (true, 100)];
const RB_CYCLE: [(bool, u64); 12] = [
    (true, 5),
    (true, 1),
    (true, 50),
    (false, 40),
    (true, 110),
    (false, 90),
    (true, 3),
    (false, 20),
    (false, 50),
    (false, 60),
    (true, 95),
    (false, 1),
];

impl Coll for RbTree<u64, u64> {
    const NAME: &'static str = "coll.rbtree";
    const SEEDED: u64 = RB_SEED.len() as u64;
    fn make(pool: &Pool) -> Result<Self> {
        RbTree::root(pool, Self::NAME)
    }
    fn find(d: &Dir, r: &Raw<'_, '_>) -> Result<Self> {
        handle(d, r, Self::NAME)
    }
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>> {
        RbTree::insert(self, tx, k, v)
    }
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
        RbTree::remove(self, tx, &k)
    }
    fn check(&self, tx: &STx<'_>) -> StmResult<(Shape, Entries)> {
        Ok((RbTree::check(self, tx)?, self.to_vec(tx)?))
    }
    fn raw(&self, r: &Raw<'_, '_>) -> Result<Entries> {
        let nodes = rb_nodes(self, r)?;
        if nodes.windows(2).any(|w| w[0].key >= w[1].key) {
            return Err(Error::corrupt("the tree's keys are out of order"));
        }
        Ok(nodes.iter().map(|n| (n.key, n.value)).collect())
    }
    fn op(i: u64) -> Op {
        sequence(i, &RB_SEED, &RB_CYCLE)
    }
}

pub(super) fn w_rbtree(h: &Harness) -> Result<Trace> {
    workload::<RbTree<u64, u64>>(h)
}

// ----- the hash table -------------------------------------------------------------

/// Buckets of the table (the fewest `HashTable::new` makes).
const BUCKETS: u64 = 3;

/// A bucket's or an overflow node's cell as [`HashTable::addr`]
/// documents it: the lock word, then key, value and next.
type HashCell = VarCell<[u64; 3]>;

/// The `nth` key (from 0) of bucket `b`, counting keys from 1 up.
fn key_in(b: u64, nth: usize) -> u64 {
    (1..)
        .filter(|k: &u64| crate::stm::collections::hashtable::key_hash(k) % BUCKETS == b)
        .nth(nth)
        .unwrap_or_else(|| unreachable!("keys never run out"))
}

/// Each bucket's chain, the inline entry first, read cell by cell.
fn hash_chains(t: &HashTable<u64, u64>, r: &Raw<'_, '_>) -> Result<Vec<Entries>> {
    let mut chains = Vec::new();
    for i in 0..BUCKETS {
        let [key, value, next] = r.cell(PPtr::<HashCell>::from_addr(t.addr() + 16 + 32 * i), "a bucket")?;
        let mut chain = Vec::new();
        if next != 0 {
            chain.push((key, value));
            let mut n = if next == t.addr() { 0 } else { next };
            while n != 0 {
                if chain.len() > MAX_CELLS {
                    return Err(Error::corrupt("a chain has a cycle"));
                }
                let [key, value, next] = r.cell(PPtr::<HashCell>::from_addr(n), "an overflow node")?;
                chain.push((key, value));
                n = next;
            }
        }
        chains.push(chain);
    }
    Ok(chains)
}

/// The operations as (put, bucket, nth key of the bucket): a, b and c
/// name buckets 0, 1 and 2. Seeded: bucket 0's chain a0, a2, a1 (a new
/// node goes right after the inline entry) and b0 inline. Then: an insert
/// into the empty bucket (c0) and into an occupied one (a3: a0 a3 a2 a1),
/// the inline and an overflow value replaced, an overflow node removed in
/// the middle (a2) and at the end (a1), the inline entry removed with an
/// overflow node (a0: a3 promoted) and without (c0: the bucket emptied),
/// the same again in bucket 1 and 2.
const HASH_SEED: [(bool, u64, usize); 4] = [(true, 0, 0), (true, 0, 1), (true, 0, 2), (true, 1, 0)];
const HASH_CYCLE: [(bool, u64, usize); 12] = [
    (true, 2, 0),
    (true, 0, 3),
    (true, 0, 0),
    (true, 0, 2),
    (false, 0, 2),
    (false, 0, 1),
    (false, 0, 0),
    (false, 2, 0),
    (true, 1, 1),
    (false, 1, 0),
    (true, 2, 1),
    (false, 1, 1),
];

impl Coll for HashTable<u64, u64> {
    const NAME: &'static str = "coll.hash";
    const SEEDED: u64 = HASH_SEED.len() as u64;
    fn make(pool: &Pool) -> Result<Self> {
        HashTable::root(pool, Self::NAME, BUCKETS)
    }
    fn find(d: &Dir, r: &Raw<'_, '_>) -> Result<Self> {
        handle(d, r, Self::NAME)
    }
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>> {
        HashTable::insert(self, tx, k, v)
    }
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
        HashTable::remove(self, tx, &k)
    }
    fn check(&self, tx: &STx<'_>) -> StmResult<(Shape, Entries)> {
        if self.buckets(tx)? != BUCKETS {
            return Err(crate::stm::StmError::Failed(Error::corrupt("the table's bucket count changed")));
        }
        Ok((HashTable::check(self, tx)?, self.to_vec(tx)?))
    }
    fn raw(&self, r: &Raw<'_, '_>) -> Result<Entries> {
        let mut all: Entries = hash_chains(self, r)?.concat();
        all.sort_unstable();
        if all.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(Error::corrupt("a key is in the table twice"));
        }
        Ok(all)
    }
    fn op(i: u64) -> Op {
        let keyed = |s: &[(bool, u64, usize)]| -> Vec<(bool, u64)> { s.iter().map(|&(p, b, n)| (p, key_in(b, n))).collect() };
        sequence(i, &keyed(&HASH_SEED), &keyed(&HASH_CYCLE))
    }
}

pub(super) fn w_hash(h: &Harness) -> Result<Trace> {
    workload::<HashTable<u64, u64>>(h)
}

// ----- the treap and the HAMT, side by side ---------------------------------------

/// `stm-coll2`'s pair: every operation applied to a [`Treap`] and a
/// [`PMap`] in one commit; both must return the same and hold the same.
#[derive(Clone, Copy)]
struct Pair {
    treap: Treap<u64, u64>,
    map: PMap<u64, u64>,
}

/// Count stripes of a [`PMap`] (its `Counts` object: one 64-byte line
/// each, a `PTField<u64>` at its start).
const STRIPES: u64 = 8;

/// The treap's entries in key order, read cell by cell: its handle's root
/// variable holds the top node; a node is four `PTField`s (lock word and
/// value, 16 bytes each): key, left, right, value.
fn treap_entries(t: &Treap<u64, u64>, r: &Raw<'_, '_>) -> Result<Entries> {
    let field = |node: u64, i: u64, what: &str| r.cell(PPtr::<VarCell<u64>>::from_addr(node + 16 * i), what);
    let (mut out, mut stack, mut cur) = (Vec::new(), Vec::new(), r.cell(PPtr::<VarCell<u64>>::from_addr(t.addr()), "the treap's root")?);
    while cur != 0 || !stack.is_empty() {
        while cur != 0 {
            stack.push(cur);
            if stack.len() + out.len() > MAX_CELLS {
                return Err(Error::corrupt("the treap has a cycle"));
            }
            cur = field(cur, 1, "a treap node's left link")?;
        }
        let n = stack.pop().unwrap_or_else(|| unreachable!("the loop's condition"));
        out.push((field(n, 0, "a treap node's key")?, field(n, 3, "a treap node's value")?));
        cur = field(n, 2, "a treap node's right link")?;
    }
    Ok(out)
}

/// The HAMT's entries (any order), read cell by cell: a node's cell holds
/// its bitmap, its slot array and (the root's) counts; a slot is hash,
/// child, key and value, a leaf when its child is null. The count stripes
/// must sum to the leaves.
fn hamt_entries(m: &PMap<u64, u64>, r: &Raw<'_, '_>) -> Result<Entries> {
    let (mut out, mut todo, mut counts) = (Vec::new(), vec![m.addr()], None);
    while let Some(cell) = todo.pop() {
        let [_bitmap, slots, c] = r.cell(PPtr::<VarCell<[u64; 3]>>::from_addr(cell), "a trie node")?;
        counts = counts.or((c != 0).then_some(c));
        if slots != 0 {
            for [_hash, child, key, value] in r.slice(crate::PArray::<[u64; 4]>::from_addr(slots))? {
                match child {
                    0 => out.push((key, value)),
                    c => todo.push(c),
                }
            }
        }
        if out.len() + todo.len() > MAX_CELLS {
            return Err(Error::corrupt("the trie has a cycle"));
        }
    }
    let counts = counts.ok_or_else(|| Error::corrupt("the trie's root has no counts"))?;
    let mut n = 0u64;
    for i in 0..STRIPES {
        n = n.wrapping_add(r.cell(PPtr::<VarCell<u64>>::from_addr(counts + 64 * i), "a count stripe")?);
    }
    if n != out.len() as u64 {
        return Err(Error::corrupt(format!("the trie's count stripes sum to {n}, it holds {} entries", out.len())));
    }
    Ok(out)
}

/// Keys 1 to 24 put (three pairs of them share a root slot of the trie, so
/// nodes split below the root); then the treap's top (key 13, the highest
/// rank) removed and put back, new keys whose hash shares a root slot with
/// one leaf (a new node), removals that leave a node one leaf (it moves
/// up: the node is dropped), a replacement: the test below shows it.
const PAIR_SEED: [(bool, u64); 24] = {
    let mut s = [(true, 0); 24];
    let mut i = 0;
    while i < 24 {
        s[i].1 = i as u64 + 1;
        i += 1;
    }
    s
};
const PAIR_CYCLE: [(bool, u64); 12] = [
    (false, 13),
    (true, 25),
    (true, 12),
    (false, 3),
    (true, 34),
    (false, 19),
    (true, 13),
    (true, 41),
    (false, 10),
    (true, 3),
    (false, 24),
    (true, 55),
];

impl Coll for Pair {
    const NAME: &'static str = "coll.pair";
    const SEEDED: u64 = PAIR_SEED.len() as u64;
    fn make(pool: &Pool) -> Result<Self> {
        Ok(Pair { treap: Treap::root(pool, "coll.pair.treap")?, map: PMap::root(pool, "coll.pair.hamt")? })
    }
    fn find(d: &Dir, r: &Raw<'_, '_>) -> Result<Self> {
        Ok(Pair { treap: handle(d, r, "coll.pair.treap")?, map: handle(d, r, "coll.pair.hamt")? })
    }
    fn insert(&self, tx: &STx<'_>, k: u64, v: u64) -> StmResult<Option<u64>> {
        same(self.treap.insert(tx, k, v)?, self.map.insert(tx, k, v)?)
    }
    fn remove(&self, tx: &STx<'_>, k: u64) -> StmResult<Option<u64>> {
        same(self.treap.remove(tx, &k)?, self.map.remove(tx, &k)?)
    }
    fn check(&self, tx: &STx<'_>) -> StmResult<(Shape, Entries)> {
        let (shape, map) = (self.treap.check(tx)?, self.map.check(tx)?);
        let (treap, mut got) = (self.treap.to_vec(tx)?, self.map.to_vec(tx)?);
        got.sort_unstable();
        same(shape.len, map.len)?;
        Ok((shape, same(treap, got)?))
    }
    fn raw(&self, r: &Raw<'_, '_>) -> Result<Entries> {
        let treap = treap_entries(&self.treap, r)?;
        let mut map = hamt_entries(&self.map, r)?;
        map.sort_unstable();
        if treap.windows(2).any(|w| w[0].0 >= w[1].0) || treap != map {
            return Err(Error::corrupt(format!("the treap holds {treap:?}, the trie {map:?}")));
        }
        Ok(treap)
    }
    fn op(i: u64) -> Op {
        sequence(i, &PAIR_SEED, &PAIR_CYCLE)
    }
}

/// `a`, if the treap's `a` and the trie's `b` agree.
fn same<T: PartialEq + std::fmt::Debug>(a: T, b: T) -> StmResult<T> {
    if a != b {
        return Err(crate::stm::StmError::Failed(Error::corrupt(format!("the treap has {a:?}, the trie {b:?}"))));
    }
    Ok(a)
}

pub(super) fn w_pair(h: &Harness) -> Result<Trace> {
    workload::<Pair>(h)
}

#[cfg(test)]
mod tests {
    //! The sequences cover what the workloads claim, in the commits the
    //! moderate sweep traces: each commit is classified from the shapes
    //! read before and after it.
    use super::*;
    use crate::crashtest::Settings;
    use crate::{CreateOptions, Durability};
    use std::collections::{BTreeSet, HashMap};

    fn pool(name: &str) -> (Pool, std::path::PathBuf) {
        let d = std::env::temp_dir().join(format!("engram-stm-coll-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        (Pool::create(d.join("p.pool"), CreateOptions::new(super::super::LAYOUT).durability(Durability::Process)).unwrap(), d)
    }

    /// Runs the sequence's seeded and moderately traced operations, with
    /// `read` called before and after each traced one; returns what
    /// `classify` said of each.
    fn classes<C: Coll, S>(
        name: &str,
        read: impl Fn(&Pool, &C) -> S,
        classify: impl Fn(Op, &S, &S) -> Vec<&'static str>,
    ) -> BTreeSet<&'static str> {
        let (pool, dir) = pool(name);
        let s = Subject::<C>::open(&pool).unwrap();
        let mut model = vec![Entries::new()];
        for i in 0..C::SEEDED {
            s.step(&pool, C::op(i), &mut model).unwrap();
        }
        let regions = Settings::moderate(&dir).regions;
        let mut seen = BTreeSet::new();
        for i in C::SEEDED..C::SEEDED + traced_ops(regions) {
            let before = read(&pool, &s.coll);
            s.step(&pool, C::op(i), &mut model).unwrap();
            let after = read(&pool, &s.coll);
            let c = classify(C::op(i), &before, &after);
            println!("{:?}: {c:?}", C::op(i));
            seen.extend(c);
            s.check_in_stm(&pool, &model[model.len() - 1]).unwrap();
        }
        drop(pool);
        let _ = std::fs::remove_dir_all(&dir);
        seen
    }

    fn plain<R>(pool: &Pool, f: impl Fn(&Raw<'_, '_>) -> Result<R>) -> R {
        raw(pool, Dir::of(pool).unwrap().ptr::<StmMeta>(META_ROOT).unwrap(), f).unwrap()
    }

    /// Rotations to both sides in inserts and in removals, recolourings,
    /// the top replaced, a value replaced.
    #[test]
    fn rbtree_sequence_rotates_both_ways_and_moves_the_root() {
        let read = |p: &Pool, t: &RbTree<u64, u64>| plain(p, |r| rb_nodes(t, r));
        let seen = classes::<RbTree<u64, u64>, _>("rb", read, |op, before, after| {
            let what = if matches!(op, Op::Put(..)) { "insert" } else { "remove" };
            let (b, a): (HashMap<u64, RbNode>, HashMap<u64, RbNode>) =
                (before.iter().map(|n| (n.addr, *n)).collect(), after.iter().map(|n| (n.addr, *n)).collect());
            let mut c = Vec::new();
            for (x, xa) in &a {
                let Some(xb) = b.get(x) else { continue };
                if xa.red != xb.red {
                    c.push("recolour");
                }
                // x went down to the left of y, its old right child: a left
                // rotation at x (and the mirror)
                if xa.parent != 0 && b.contains_key(&xa.parent) {
                    let y = xa.parent;
                    if xb.right == y && a[&y].left == *x {
                        c.push(if what == "insert" { "insert rotates left" } else { "remove rotates left" });
                    }
                    if xb.left == y && a[&y].right == *x {
                        c.push(if what == "insert" { "insert rotates right" } else { "remove rotates right" });
                    }
                }
            }
            let top = |v: &[RbNode]| v.iter().find(|n| n.parent == 0).map(|n| n.addr);
            if top(before) != top(after) {
                c.push("top replaced");
            }
            if matches!(op, Op::Put(k, _) if before.iter().any(|n| n.key == k)) {
                c.push("value replaced");
            }
            c
        });
        for want in [
            "recolour",
            "insert rotates left",
            "insert rotates right",
            "remove rotates left",
            "remove rotates right",
            "top replaced",
            "value replaced",
        ] {
            assert!(seen.contains(want), "the traced operations never do {want:?}: {seen:?}");
        }
    }

    /// The pair's commits split trie nodes and collapse them, and move the
    /// treap's top.
    #[test]
    fn pair_sequence_splits_and_collapses_the_trie() {
        let read = |p: &Pool, c: &Pair| {
            let top = plain(p, |r| r.cell(PPtr::<VarCell<u64>>::from_addr(c.treap.addr()), "the treap's root"));
            (top, p.atomically(|tx| c.map.check(tx)).unwrap().objects)
        };
        let seen = classes::<Pair, _>("pair", read, |_, before, after| {
            let mut c = Vec::new();
            if before.0 != after.0 {
                c.push("treap top replaced");
            }
            if after.1 > before.1 {
                c.push("trie nodes added");
            }
            if after.1 < before.1 {
                c.push("trie nodes dropped");
            }
            c
        });
        for want in ["treap top replaced", "trie nodes added", "trie nodes dropped"] {
            assert!(seen.contains(want), "the traced operations never do {want:?}: {seen:?}");
        }
    }

    /// Every inline and overflow case of inserts, replacements and removals.
    #[test]
    fn hash_sequence_covers_every_chain_case() {
        let read = |p: &Pool, t: &HashTable<u64, u64>| plain(p, |r| hash_chains(t, r));
        let seen = classes::<HashTable<u64, u64>, _>("hash", read, |op, before, _| {
            let k = match op {
                Op::Put(k, _) | Op::Del(k) => k,
            };
            let chain = &before[(crate::stm::collections::hashtable::key_hash(&k) % BUCKETS) as usize];
            let at = chain.iter().position(|e| e.0 == k);
            vec![match (op, at) {
                (Op::Put(..), None) if chain.is_empty() => "insert inline",
                (Op::Put(..), None) => "insert overflow",
                (Op::Put(..), Some(0)) => "replace inline",
                (Op::Put(..), Some(_)) => "replace overflow",
                (Op::Del(_), Some(0)) if chain.len() > 1 => "remove inline, promote",
                (Op::Del(_), Some(0)) => "remove inline, empty",
                (Op::Del(_), Some(p)) if p + 1 < chain.len() => "remove overflow, middle",
                (Op::Del(_), Some(_)) => "remove overflow, end",
                (Op::Del(_), None) => "remove absent",
            }]
        });
        for want in [
            "insert inline",
            "insert overflow",
            "replace inline",
            "replace overflow",
            "remove inline, promote",
            "remove inline, empty",
            "remove overflow, middle",
            "remove overflow, end",
        ] {
            assert!(seen.contains(want), "the traced operations never do {want:?}: {seen:?}");
        }
    }
}
