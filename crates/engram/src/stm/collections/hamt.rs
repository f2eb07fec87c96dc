//! [`PMap`] and [`PSet`]: a hash array mapped trie whose nodes are
//! transactional variables (the stm-containers design).
//!
//! Layout: every trie node is a `PTVar` cell holding a [`Node`]: a 32-bit
//! occupancy `bitmap`, a pointer to an immutable pool array of [`Slot`]s
//! (one per set bit, in bit order; null when empty) and, in the root only,
//! the [`Counts`] object. A slot is a leaf (`hash`, `key`, `value`, no
//! child) or a branch (a child node's cell). Level `d` indexes with bits
//! `5d..5d+5` of the key's 64-bit hash; level 13 has no bits left and holds
//! a *collision node*: leaves whose hashes are all equal, bitmap 0, searched
//! linearly.
//!
//! An update copies the slot array of the deepest node on its key's path
//! and writes that node's variable (a new leaf splits into a chain of new
//! nodes, which are private until commit), so updates of keys in different
//! deepest nodes never conflict. The entry count is kept in per-thread
//! stripes (`Counts`, one 64-byte line each): a thread changes only its own
//! stripe (threads beyond eight share), so the count is no conflict hot
//! spot, and `len` sums the stripes
//! (eight reads). A stripe may wrap below zero (a thread that removes more
//! than it inserted); the sum is taken modulo 2^64 and is exact.
//!
//! What it keeps true (verified by [`PMap::check`]):
//! - `popcount(bitmap)` equals the number of slots, and only the low 32
//!   bits are used (levels 0..=12); the slot for hash fragment `f` is at
//!   index `popcount(bitmap & ((1 << f) - 1))`;
//! - every leaf's hash agrees with the fragments of the path to it, so a
//!   key has exactly one place to be; keys in a collision node share their
//!   hash and are distinct;
//! - a node other than the root holds at least one branch or at least two
//!   leaves: a removal that leaves a node empty unlinks it, and one that
//!   leaves a single leaf moves that leaf up into the parent (repeatedly),
//!   so the trie never keeps a chain that leads to one key;
//! - the stripes sum to the number of leaves.
//!
//! Slot arrays are immutable once committed; a rewritten node's old array,
//! and any node a removal unlinks, are garbage for the engine's GC.
//!
//! On a crash: inherits the STM's (see the module docs): each transaction's
//! node writes are replayed or lost together.

use super::{broken, handle, Handle, Shape};
use crate::stm::{CopyCx, PTField, PTVar, Persist, ReadTx, STx, StmResult, VarCell};
use crate::{PArray, PPtr, Persistent, Pool, Result};
use std::hash::Hash;
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Hash bits per level.
const BITS: u32 = 5;
/// The level whose nodes are collision nodes (5 * 13 >= 64).
const MAX_DEPTH: u32 = 13;
/// Count stripes per map.
const STRIPES: usize = 8;

/// One entry of a node's slot array.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::PMap.Slot")]
struct Slot<K, V> {
    /// The key's hash (a leaf), or 0 (a branch).
    hash: u64,
    /// The child node (a branch), or null (a leaf).
    child: Cell<K, V>,
    /// The key (all zero in a branch).
    key: K,
    /// The value (all zero in a branch).
    value: V,
}

/// The value of a node's variable.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::PMap.Node")]
struct Node<K, V> {
    /// Occupied hash fragments (0 in a collision node).
    bitmap: u64,
    /// The slots, one per set bit in bit order (a collision node: its
    /// leaves); null when there are none. Immutable once committed.
    slots: PArray<Slot<K, V>>,
    /// The entry count (root only; null elsewhere).
    counts: PPtr<Counts>,
}

/// The cell object of a node's variable.
type Cell<K, V> = PPtr<VarCell<Node<K, V>>>;

/// What a transaction writes into a node's variable: the slot array is
/// copied into the pool when the transaction commits (or reads it back).
struct NewNode<K, V> {
    bitmap: u64,
    slots: Vec<Slot<K, V>>,
    counts: PPtr<Counts>,
}

impl<K: Persistent, V: Persistent> Persist for NewNode<K, V> {
    type P = Node<K, V>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Node<K, V>> {
        let slots = if self.slots.is_empty() { PArray::null() } else { cx.alloc_slice(&self.slots)? };
        Ok(Node { bitmap: self.bitmap, slots, counts: self.counts })
    }
}

/// One thread's share of the entry count, alone in its cache line.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::PMap.Stripe")]
struct Stripe {
    /// Inserts minus removals by the threads of this stripe (mod 2^64).
    n: PTField<u64>,
    pad: [u64; 6],
}

/// The entry count of a map.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::PMap.Counts")]
struct Counts {
    stripes: [Stripe; STRIPES],
}

const _: () = assert!(size_of::<Stripe>() == 64);

/// The stripe of the calling thread.
fn my_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
    MINE.with(|m| *m)
}

fn stripe(counts: PPtr<Counts>, i: usize) -> crate::stm::vars::FieldRef<u64> {
    PTField::at(counts.addr(), offset_of!(Counts, stripes) + i * size_of::<Stripe>() + offset_of!(Stripe, n))
}

/// A value of all zero bits (the key and value of a branch slot).
fn zeroed<T: Persistent>() -> T {
    // SAFETY: `Persistent` promises that every bit pattern of T is a valid
    // value, all zeros included.
    unsafe { std::mem::zeroed() }
}

fn var<K: Persistent, V: Persistent>(cell: Cell<K, V>) -> PTVar<NewNode<K, V>> {
    PTVar::from_cell(cell)
}

/// The hash fragment that indexes level `depth` (< MAX_DEPTH).
fn frag(hash: u64, depth: u32) -> u32 {
    ((hash >> (BITS * depth)) & 31) as u32
}

/// The slot index of `bit` in `bitmap`.
fn index(bitmap: u64, bit: u64) -> usize {
    (bitmap & (bit - 1)).count_ones() as usize
}

/// A node as one transaction sees it.
struct Seen<'t, K, V> {
    cell: Cell<K, V>,
    node: Node<K, V>,
    slots: &'t [Slot<K, V>],
}

/// Where a key leads in one node.
enum Probe<K, V> {
    /// Leaf `i` holds the key.
    Found(usize),
    /// Descend into slot `i`'s child.
    Child(Cell<K, V>, usize),
    /// The key is not here.
    Vacant,
}

/// How a node's slots change on the way up from a removal.
#[derive(Clone, Copy)]
enum Edit<K, V> {
    Remove(usize),
    Replace(usize, Slot<K, V>),
}

impl<K: Persistent, V: Persistent> Slot<K, V> {
    fn leaf(hash: u64, key: K, value: V) -> Self {
        Slot { hash, child: PPtr::null(), key, value }
    }

    fn branch(child: Cell<K, V>) -> Self {
        Slot { hash: 0, child, key: zeroed(), value: zeroed() }
    }

    fn is_leaf(&self) -> bool {
        self.child.is_null()
    }
}

/// Node `cell` as `tx` sees it: its variable, then its slot array (an
/// immutable committed array, in a read-only transaction too:
/// `RTx::elements_of`).
fn load<'t, K: Persistent, V: Persistent, T: ReadTx>(tx: &'t T, cell: Cell<K, V>) -> StmResult<Seen<'t, K, V>> {
    let node = tx.get(&var(cell))?;
    let slots = if node.slots.is_null() { &[][..] } else { tx.elements_of(node.slots)? };
    Ok(Seen { cell, node, slots })
}

fn write_node<K: Persistent, V: Persistent>(tx: &STx<'_>, s: &Seen<'_, K, V>, bitmap: u64, slots: Vec<Slot<K, V>>) -> StmResult<()> {
    tx.write(&var(s.cell), NewNode { bitmap, slots, counts: s.node.counts })
}

fn probe<K: Persistent + Eq, V: Persistent>(s: &Seen<'_, K, V>, depth: u32, hash: u64, key: &K) -> StmResult<Probe<K, V>> {
    if depth >= MAX_DEPTH {
        let at = s.slots.iter().position(|x| x.is_leaf() && x.hash == hash && x.key == *key);
        return Ok(at.map_or(Probe::Vacant, Probe::Found));
    }
    let bit = 1u64 << frag(hash, depth);
    if s.node.bitmap & bit == 0 {
        return Ok(Probe::Vacant);
    }
    let i = index(s.node.bitmap, bit);
    let x = s.slots.get(i).ok_or_else(|| broken(format!("trie node {:#x}: bitmap and slots disagree", s.cell.addr())))?;
    Ok(if !x.is_leaf() {
        Probe::Child(x.child, i)
    } else if x.hash == hash && x.key == *key {
        Probe::Found(i)
    } else {
        Probe::Vacant
    })
}

/// A new node at `depth` holding leaves `a` and `b` (different keys), with
/// as many single-branch nodes above it as their hashes share fragments.
fn pair<K: Persistent, V: Persistent>(tx: &STx<'_>, depth: u32, a: Slot<K, V>, b: Slot<K, V>) -> StmResult<Cell<K, V>> {
    let n = if depth >= MAX_DEPTH {
        NewNode { bitmap: 0, slots: vec![a, b], counts: PPtr::null() }
    } else {
        let (fa, fb) = (frag(a.hash, depth), frag(b.hash, depth));
        if fa == fb {
            let child = pair(tx, depth + 1, a, b)?;
            NewNode { bitmap: 1 << fa, slots: vec![Slot::branch(child)], counts: PPtr::null() }
        } else {
            let slots = if fa < fb { vec![a, b] } else { vec![b, a] };
            NewNode { bitmap: (1 << fa) | (1 << fb), slots, counts: PPtr::null() }
        }
    };
    Ok(PTVar::new(tx, n)?.cell())
}

/// Puts `leaf` (a key not in the trie) into node `s` at `depth`.
fn place<K: Persistent, V: Persistent>(tx: &STx<'_>, s: &Seen<'_, K, V>, depth: u32, leaf: Slot<K, V>) -> StmResult<()> {
    let mut slots = s.slots.to_vec();
    if depth >= MAX_DEPTH {
        slots.push(leaf);
        return write_node(tx, s, s.node.bitmap, slots);
    }
    let bit = 1u64 << frag(leaf.hash, depth);
    let i = index(s.node.bitmap, bit);
    if s.node.bitmap & bit == 0 {
        slots.insert(i, leaf);
        return write_node(tx, s, s.node.bitmap | bit, slots);
    }
    // Occupied by another key's leaf: both move into a new subtree.
    slots[i] = Slot::branch(pair(tx, depth + 1, slots[i], leaf)?);
    write_node(tx, s, s.node.bitmap, slots)
}

/// Applies `edit` to node `s` at `depth` on the path of `hash`.
fn edited<K: Persistent, V: Persistent>(s: &Seen<'_, K, V>, depth: u32, hash: u64, edit: Edit<K, V>) -> (u64, Vec<Slot<K, V>>) {
    let mut slots = s.slots.to_vec();
    match edit {
        Edit::Remove(i) => {
            slots.remove(i);
            let bit = if depth >= MAX_DEPTH { 0 } else { 1u64 << frag(hash, depth) };
            (s.node.bitmap & !bit, slots)
        }
        Edit::Replace(i, x) => {
            slots[i] = x;
            (s.node.bitmap, slots)
        }
    }
}

/// Removes slot `i` of `s` (at `depth`), shrinking the path above it: a
/// node left empty leaves its parent, a node left with one leaf is
/// replaced in its parent by that leaf. The root is always rewritten in
/// place.
fn unlink<K: Persistent, V: Persistent>(
    tx: &STx<'_>,
    mut path: Vec<(Seen<'_, K, V>, usize)>,
    s: Seen<'_, K, V>,
    i: usize,
    hash: u64,
) -> StmResult<()> {
    let (mut cur, mut depth, mut edit) = (s, path.len() as u32, Edit::Remove(i));
    loop {
        let (bitmap, slots) = edited(&cur, depth, hash, edit);
        let Some((parent, at)) = path.pop() else { return write_node(tx, &cur, bitmap, slots) };
        edit = match slots.as_slice() {
            [] => Edit::Remove(at),
            [only] if only.is_leaf() => Edit::Replace(at, *only),
            _ => return write_node(tx, &cur, bitmap, slots),
        };
        (cur, depth) = (parent, depth - 1);
    }
}

fn count(tx: &STx<'_>, counts: PPtr<Counts>, delta: i64) -> StmResult<()> {
    let f = stripe(counts, my_stripe());
    let n = tx.read(&f)?;
    tx.write(&f, n.wrapping_add(delta as u64))
}

/// Mask of the hash bits that levels `0..depth` consume.
fn prefix_mask(depth: u32) -> u64 {
    if BITS * depth >= 64 {
        u64::MAX
    } else {
        (1u64 << (BITS * depth)) - 1
    }
}

/// A transactional hash map in a pool (a hash array mapped trie).
///
/// A handle: one pool pointer, `Copy`, [`Persistent`] and
/// [`Persist`], so it can be kept in a `PTVar`, a `PTField`, another
/// collection or a named root ([`PMap::root`]). Every method works inside
/// the caller's transaction. `K` and `V` are plain pool values; keys are
/// hashed with a fixed FNV-1a hasher through their `Hash` impl, which must
/// be deterministic. Updates of different keys conflict only when the keys
/// share the trie node they live in (see the module docs); [`PMap::len`]
/// reads eight per-thread count stripes and is no hot spot.
///
/// ```
/// use engram::stm::collections::PMap;
/// use engram::{CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-pmap-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// let squares = PMap::<u64, u64>::root(&pool, "squares")?;
/// pool.atomically(|tx| {
///     for k in 0..100 {
///         squares.insert(tx, k, k * k)?;
///     }
///     Ok(())
/// })?;
/// let (seven, old, len) = pool.atomically(|tx| {
///     let old = squares.insert(tx, 7, 0)?;
///     squares.remove(tx, &8)?;
///     Ok((squares.get(tx, &7)?, old, squares.len(tx)?))
/// })?;
/// assert_eq!((seven, old, len), (Some(0), Some(49), 99));
/// pool.close()?;
///
/// // After a restart, the same root gives the same map.
/// let pool = Pool::open(&path, engram::OpenOptions::new("doc"))?;
/// let squares = PMap::<u64, u64>::root(&pool, "squares")?;
/// assert_eq!(pool.atomically(|tx| squares.get(tx, &9))?, Some(81));
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::PMap")]
pub struct PMap<K, V> {
    /// The root node's cell (the root never moves).
    root: Cell<K, V>,
}

handle!(PMap[K, V], "PMap");

impl<K: Persistent, V: Persistent> Handle for PMap<K, V> {
    fn from_addr(addr: u64) -> Self {
        PMap { root: PPtr::from_addr(addr) }
    }
    fn addr(&self) -> u64 {
        self.root.addr()
    }
}

impl<K: Persistent + Hash + Eq, V: Persistent> PMap<K, V> {
    /// A new, empty map (private to `tx` until it commits).
    pub fn new(tx: &STx<'_>) -> StmResult<Self> {
        let zero = Stripe { n: PTField::new(0), pad: [0; 6] };
        let counts = tx.alloc(Counts { stripes: [zero; STRIPES] })?;
        let root = PTVar::new(tx, NewNode { bitmap: 0, slots: Vec::new(), counts })?;
        Ok(PMap { root: root.cell() })
    }

    /// The map in the named root `name` (a `PTVar<PMap<K, V>>`), created
    /// empty in its own transaction if the root does not exist yet.
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        super::root_handle(pool, name, Self::new)
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        let hash = crate::hash::stable_hash(key);
        let (mut cell, mut depth) = (self.root, 0);
        loop {
            let s = load(tx, cell)?;
            match probe(&s, depth, hash, key)? {
                Probe::Found(i) => return Ok(Some(s.slots[i].value)),
                Probe::Child(c, _) => (cell, depth) = (c, depth + 1),
                Probe::Vacant => return Ok(None),
            }
        }
    }

    /// Whether `key` is in the map (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(self.get(tx, key)?.is_some())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&self, tx: &STx<'_>, key: K, value: V) -> StmResult<Option<V>> {
        let hash = crate::hash::stable_hash(&key);
        let leaf = Slot::leaf(hash, key, value);
        let (mut cell, mut depth, mut counts) = (self.root, 0, PPtr::null());
        loop {
            let s = load(tx, cell)?;
            if depth == 0 {
                counts = s.node.counts;
            }
            match probe(&s, depth, hash, &key)? {
                Probe::Child(c, _) => (cell, depth) = (c, depth + 1),
                Probe::Found(i) => {
                    let old = s.slots[i].value;
                    let mut slots = s.slots.to_vec();
                    slots[i] = leaf;
                    write_node(tx, &s, s.node.bitmap, slots)?;
                    return Ok(Some(old));
                }
                Probe::Vacant => {
                    place(tx, &s, depth, leaf)?;
                    count(tx, counts, 1)?;
                    return Ok(None);
                }
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, tx: &STx<'_>, key: &K) -> StmResult<Option<V>> {
        let hash = crate::hash::stable_hash(key);
        let mut path = Vec::new();
        let mut cell = self.root;
        let (s, i) = loop {
            let s = load(tx, cell)?;
            match probe(&s, path.len() as u32, hash, key)? {
                Probe::Found(i) => break (s, i),
                Probe::Child(c, i) => {
                    cell = c;
                    path.push((s, i));
                }
                Probe::Vacant => return Ok(None),
            }
        };
        let old = s.slots[i].value;
        let counts = path.first().map_or(s.node.counts, |(r, _)| r.node.counts);
        unlink(tx, path, s, i, hash)?;
        count(tx, counts, -1)?;
        Ok(Some(old))
    }

    /// The number of entries (eight reads: the count stripes).
    pub fn len(&self, tx: &STx<'_>) -> StmResult<u64> {
        let counts = tx.read(&var(self.root))?.counts;
        (0..STRIPES).try_fold(0u64, |sum, i| Ok(sum.wrapping_add(tx.read(&stripe(counts, i))?)))
    }

    /// Whether the map is empty.
    pub fn is_empty(&self, tx: &STx<'_>) -> StmResult<bool> {
        Ok(self.len(tx)? == 0)
    }

    /// Calls `f` on every entry, in hash order (reads the whole map).
    pub fn for_each(&self, tx: &STx<'_>, mut f: impl FnMut(K, V)) -> StmResult<()> {
        let mut stack = vec![self.root];
        while let Some(cell) = stack.pop() {
            // Push children in reverse, so the walk goes in slot order.
            for x in load(tx, cell)?.slots.iter().rev() {
                if x.is_leaf() {
                    f(x.key, x.value);
                } else {
                    stack.push(x.child);
                }
            }
        }
        Ok(())
    }

    /// Every entry (reads the whole map).
    pub fn to_vec(&self, tx: &STx<'_>) -> StmResult<Vec<(K, V)>> {
        let mut out = Vec::new();
        self.for_each(tx, |k, v| out.push((k, v)))?;
        Ok(out)
    }

    /// Verifies the trie's invariants (module docs); an error names the
    /// first one broken. Reads the whole map.
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        let root = load(tx, self.root)?;
        if root.node.counts.is_null() {
            return Err(broken(format!("map {:#x}: the root has no counts", self.root.addr())));
        }
        let mut shape = Shape { objects: 2, ..Shape::default() };
        check_node(tx, &root, 0, 0, &mut shape)?;
        let len = self.len(tx)?;
        if len != shape.len {
            return Err(broken(format!("map {:#x}: count {len}, but {} leaves", self.root.addr(), shape.len)));
        }
        Ok(shape)
    }
}

/// Checks node `s` at `depth`, whose leaves' hashes start with `prefix`.
fn check_node<K: Persistent + Eq, V: Persistent>(
    tx: &STx<'_>,
    s: &Seen<'_, K, V>,
    depth: u32,
    prefix: u64,
    shape: &mut Shape,
) -> StmResult<()> {
    let at = s.cell.addr();
    shape.objects += !s.slots.is_empty() as u64;
    shape.height = shape.height.max(depth as u64 + 1);
    if depth > 0 {
        if !s.node.counts.is_null() {
            return Err(broken(format!("trie node {at:#x}: counts outside the root")));
        }
        if s.slots.is_empty() || (s.slots.len() == 1 && s.slots[0].is_leaf()) {
            return Err(broken(format!("trie node {at:#x}: an inner node with {} slots", s.slots.len())));
        }
    }
    if depth >= MAX_DEPTH {
        return check_collisions(s, prefix, shape);
    }
    if s.node.bitmap >> 32 != 0 || s.node.bitmap.count_ones() as usize != s.slots.len() {
        return Err(broken(format!("trie node {at:#x}: bitmap {:#x} for {} slots", s.node.bitmap, s.slots.len())));
    }
    let bits = (0..32u64).filter(|b| s.node.bitmap & (1 << b) != 0);
    for (x, b) in s.slots.iter().zip(bits) {
        let p = prefix | (b << (BITS * depth));
        if x.is_leaf() {
            if x.hash & prefix_mask(depth + 1) != p {
                return Err(broken(format!("trie node {at:#x}: a leaf in slot {b} has hash {:#x}", x.hash)));
            }
            shape.len += 1;
        } else {
            shape.objects += 1;
            check_node(tx, &load(tx, x.child)?, depth + 1, p, shape)?;
        }
    }
    Ok(())
}

fn check_collisions<K: Persistent + Eq, V: Persistent>(s: &Seen<'_, K, V>, prefix: u64, shape: &mut Shape) -> StmResult<()> {
    let at = s.cell.addr();
    let hash = s.slots[0].hash;
    if s.node.bitmap != 0 || hash != prefix {
        return Err(broken(format!("collision node {at:#x}: bitmap {:#x}, hash {hash:#x}", s.node.bitmap)));
    }
    for (i, x) in s.slots.iter().enumerate() {
        if !x.is_leaf() || x.hash != hash || s.slots[..i].iter().any(|y| y.key == x.key) {
            return Err(broken(format!("collision node {at:#x}: slot {i} is a branch, another hash or a repeated key")));
        }
    }
    shape.len += s.slots.len() as u64;
    Ok(())
}

/// The (empty) value of a set's map.
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::PSet.Member")]
struct Member;

/// A transactional hash set in a pool: a [`PMap`] from `K` to nothing.
///
/// A handle like [`PMap`] (same conflict behaviour, same root helper).
///
/// ```
/// use engram::stm::collections::PSet;
/// use engram::{CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-pset-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// let seen = PSet::<u64>::root(&pool, "seen")?;
/// let fresh = pool.atomically(|tx| {
///     let a = seen.insert(tx, 3)?;
///     let b = seen.insert(tx, 3)?;
///     Ok((a, b))
/// })?;
/// assert_eq!(fresh, (true, false));
/// assert!(pool.atomically(|tx| seen.contains(tx, &3))?);
/// assert!(pool.atomically(|tx| seen.remove(tx, &3))?);
/// assert_eq!(pool.atomically(|tx| seen.len(tx))?, 0);
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::PSet")]
pub struct PSet<K> {
    map: PMap<K, Member>,
}

handle!(PSet[K], "PSet");

impl<K: Persistent> Handle for PSet<K> {
    fn from_addr(addr: u64) -> Self {
        PSet { map: PMap::from_addr(addr) }
    }
    fn addr(&self) -> u64 {
        self.map.addr()
    }
}

impl<K: Persistent + Hash + Eq> PSet<K> {
    /// A new, empty set (private to `tx` until it commits).
    pub fn new(tx: &STx<'_>) -> StmResult<Self> {
        Ok(PSet { map: PMap::new(tx)? })
    }

    /// The set in the named root `name` (a `PTVar<PSet<K>>`), created empty
    /// in its own transaction if the root does not exist yet.
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        super::root_handle(pool, name, Self::new)
    }

    /// Adds `key`; whether it was new.
    pub fn insert(&self, tx: &STx<'_>, key: K) -> StmResult<bool> {
        Ok(self.map.insert(tx, key, Member)?.is_none())
    }

    /// Removes `key`; whether it was there.
    pub fn remove(&self, tx: &STx<'_>, key: &K) -> StmResult<bool> {
        Ok(self.map.remove(tx, key)?.is_some())
    }

    /// Whether `key` is in the set (in either kind of transaction).
    pub fn contains<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        self.map.contains_key(tx, key)
    }

    /// The number of keys (eight reads).
    pub fn len(&self, tx: &STx<'_>) -> StmResult<u64> {
        self.map.len(tx)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self, tx: &STx<'_>) -> StmResult<bool> {
        self.map.is_empty(tx)
    }

    /// Calls `f` on every key, in hash order.
    pub fn for_each(&self, tx: &STx<'_>, mut f: impl FnMut(K)) -> StmResult<()> {
        self.map.for_each(tx, |k, _| f(k))
    }

    /// Every key.
    pub fn to_vec(&self, tx: &STx<'_>) -> StmResult<Vec<K>> {
        let mut out = Vec::new();
        self.for_each(tx, |k| out.push(k))?;
        Ok(out)
    }

    /// Verifies the underlying trie (see [`PMap::check`]).
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        self.map.check(tx)
    }
}
