//! Persistent memo tables from `u64` arguments to values, used as
//! `memo.get_or_compute(n, |n, memo| ...)`, recursion going through the
//! memo (see the [`Memo`] docs). Two designs, as Haskell's MemoTrie and
//! MemoCombinators, and a volatile one for comparison:
//!
//! - [`TrieMemo`]: a 64-way radix trie over the argument's base-64 digits,
//!   one tree per digit count (`tops[L]` holds the keys of `L + 1` digits,
//!   so each top word is set once and never moves). Every slot is an
//!   indirection word of `publish.rs`: an insert stages the value and any
//!   missing nodes (fully written, private), fences once, and links them
//!   with one 8-byte CAS where the walk found 0. Lookups take no lock and
//!   no transaction. One fence per new entry.
//! - [`HashMemo`]: the STM's HAMT ([`crate::stm::collections::PMap`])
//!   keyed by the argument, mapping to the value's copy: the copy is staged
//!   and fenced, then an STM transaction inserts its pointer (the commit's
//!   own fence, plus the fence for new trie nodes the HAMT creates).
//! - [`VolatileMemo`]: the same memoization in volatile memory (a hash
//!   map), the baseline of the benchmark.
//!
//! Concurrency: a miss claims the entry (blackhole) so one thread computes
//! it and the others wait and share. On a crash: an entry is present with
//! its whole value or absent; entries are published in order on a thread,
//! each by the fence of the next, so at most the last is lost.

use super::blackhole::{self, Entered};
use super::publish::{self, Staged};
use super::reader::{Cx, Load};
use crate::error::{Error, Result};
use crate::hash::FastMap;
use crate::ptr::PPtr;
use crate::stm::collections::PMap;
use crate::{Persistent, Pool};
use parking_lot::RwLock;
use std::marker::PhantomData;
use std::sync::Arc;

/// A memo table from `u64` arguments to `T`s.
///
/// ```
/// use engram::lazy::{Memo, TrieMemo};
/// use engram::{CreateOptions, Durability, Pool, Result};
/// use num_bigint::BigUint;
///
/// fn fib(memo: &impl Memo<BigUint>, n: u64) -> Result<BigUint> {
///     memo.get_or_compute(n, |n, memo| if n < 2 { Ok(BigUint::from(n)) } else { Ok(fib(memo, n - 1)? + fib(memo, n - 2)?) })
/// }
/// # let path = std::env::temp_dir().join(format!("engram-memo-doc-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("fib").durability(Durability::Process))?;
/// let memo = TrieMemo::<BigUint>::root(&pool, "fib")?;
/// assert_eq!(fib(&memo, 90)?, BigUint::from(2880067194370816120u64));
/// # drop(memo); pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
pub trait Memo<T>: Sized {
    /// The value for `n`: from the table, or computed by `f(n, self)` and
    /// stored (once, by one thread; others wait for it).
    fn get_or_compute(&self, n: u64, f: impl FnOnce(u64, &Self) -> Result<T>) -> Result<T>;
    /// The stored value for `n`, if any (never computes).
    fn get(&self, n: u64) -> Result<Option<T>>;
}

/// Runs a blackholed miss: waits for another evaluator, or computes and stores.
fn miss<T>(key: blackhole::Key, mut lookup: impl FnMut() -> Result<Option<T>>, compute: impl FnOnce() -> Result<T>) -> Result<T> {
    let mut compute = Some(compute);
    loop {
        if let Some(v) = lookup()? {
            return Ok(v);
        }
        match blackhole::enter(key)? {
            Entered::Waited => continue,
            Entered::Owner(hole) => {
                if let Some(v) = lookup()? {
                    return Ok(v);
                }
                let f = compute.take().ok_or_else(|| Error::corrupt("memo entry computed twice"))?;
                let r = f();
                drop(hole);
                return r;
            }
        }
    }
}

// ----- the trie ---------------------------------------------------------------

const BITS: u32 = 6;
const FAN: usize = 1 << BITS;
const LEVELS: usize = 64usize.div_ceil(BITS as usize);

/// The root of a [`TrieMemo`]: one top word per digit count.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TrieRoot {
    tops: [u64; LEVELS],
}

/// One indirection word of a trie node (a node is a pool array of 64:
/// children, or values at level 0).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TrieNode(u64);

type Node = [TrieNode; FAN];

// SAFETY: u64 words, each 0 or a pool pointer (listed).
unsafe impl Persistent for TrieRoot {
    fn type_name() -> String {
        "engram::lazy::TrieRoot".into()
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.extend((0..LEVELS as u32).map(|i| at + 8 * i));
    }
}

// SAFETY: a u64 that is 0 or a pool pointer.
unsafe impl Persistent for TrieNode {
    fn type_name() -> String {
        "engram::lazy::TrieSlot".into()
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

/// Index of the highest base-64 digit of `n` (0 for n < 64).
fn top_level(n: u64) -> usize {
    if n == 0 {
        0
    } else {
        (63 - n.leading_zeros()) as usize / BITS as usize
    }
}

fn digit(n: u64, level: usize) -> usize {
    ((n >> (BITS as usize * level)) & (FAN as u64 - 1)) as usize
}

/// Where a trie walk stopped.
enum Walk {
    /// The value's copy.
    Found(u64),
    /// The word at `word` is 0; below it `level` node levels are missing
    /// (`None`: the word is a value slot).
    Missing { word: u64, level: Option<usize> },
}

/// The default persistent memo table (the trie).
pub type PMemo<T> = TrieMemo<T>;

/// A persistent memo table over a radix trie (MemoTrie's design).
pub struct TrieMemo<T> {
    pool: Pool,
    root: PPtr<TrieRoot>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Load> TrieMemo<T> {
    /// The table under the named root `name`, created empty if absent.
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        let root = pool.txn(|tx| match tx.root::<TrieRoot>(name)? {
            Some(r) => Ok(r),
            None => {
                let r = tx.alloc(TrieRoot { tops: [0; LEVELS] })?;
                tx.set_root(name, r).map(|_| r)
            }
        })?;
        Ok(TrieMemo { pool: pool.clone(), root, _t: PhantomData })
    }

    fn walk(&self, cx: &Cx<'_>, n: u64) -> Result<Walk> {
        let top = top_level(n);
        cx.check::<TrieRoot>(self.root.addr())?;
        let mut word = self.root.addr() + 8 * top as u64;
        for level in (0..=top).rev() {
            let node = publish::load(cx.inner, word)?;
            if node == 0 {
                return Ok(Walk::Missing { word, level: Some(level) });
            }
            cx.check::<Node>(node)?;
            word = node + 8 * digit(n, level) as u64;
        }
        match publish::load(cx.inner, word)? {
            0 => Ok(Walk::Missing { word, level: None }),
            v => Ok(Walk::Found(v)),
        }
    }

    fn lookup(&self, cx: &Cx<'_>, n: u64) -> Result<Option<T>> {
        match self.walk(cx, n)? {
            Walk::Found(v) => cx.load::<T>(PPtr::from_addr(v)).map(Some),
            Walk::Missing { .. } => Ok(None),
        }
    }

    /// Stores `v` for `n` (an existing entry wins; returns whether `v` was linked).
    fn insert(&self, cx: &Cx<'_>, n: u64, v: &T) -> Result<bool> {
        loop {
            let Walk::Missing { word, level } = self.walk(cx, n)? else { return Ok(false) };
            let (mut st, mut target): (Staged<'_>, u64) = publish::stage(cx.inner, v)?;
            // Nodes from level 0 up to `level`, each holding the one below.
            for l in 0..=level.map_or(-1, |l| l as i64) {
                let mut node = [TrieNode(0); FAN];
                node[digit(n, l as usize)] = TrieNode(target);
                target = st.alloc_slice(&node)?;
            }
            if st.commit(word, target)?.is_none() {
                return Ok(true);
            }
        }
    }
}

impl<T: Load> Memo<T> for TrieMemo<T> {
    fn get_or_compute(&self, n: u64, f: impl FnOnce(u64, &Self) -> Result<T>) -> Result<T> {
        let cx = Cx::new(&self.pool);
        miss(
            (cx.inner.heap.id, self.root.addr(), n),
            || self.lookup(&cx, n),
            || {
                let v = f(n, self)?;
                self.insert(&cx, n, &v)?;
                Ok(v)
            },
        )
    }

    fn get(&self, n: u64) -> Result<Option<T>> {
        self.lookup(&Cx::new(&self.pool), n)
    }
}

// ----- the HAMT -----------------------------------------------------------------

/// A persistent memo table over the STM's HAMT keyed by the argument
/// (MemoCombinators' role: a table chosen by the argument type).
pub struct HashMemo<T: Load> {
    pool: Pool,
    map: PMap<u64, PPtr<T::P>>,
}

impl<T: Load> HashMemo<T> {
    /// The table under the named root `name`, created empty if absent.
    pub fn root(pool: &Pool, name: &str) -> Result<Self> {
        Ok(HashMemo { pool: pool.clone(), map: PMap::root(pool, name)? })
    }

    fn find(&self, n: u64) -> Result<Option<PPtr<T::P>>> {
        self.pool.atomically(|tx| self.map.get(tx, &n))
    }

    fn lookup(&self, cx: &Cx<'_>, n: u64) -> Result<Option<T>> {
        self.find(n)?.map(|p| cx.load::<T>(p)).transpose()
    }

    /// Stages and fences the copy, then inserts its pointer in one STM
    /// transaction (an existing entry wins; the copy is then freed).
    fn insert(&self, cx: &Cx<'_>, n: u64, v: &T) -> Result<()> {
        let (mut st, addr) = publish::stage(cx.inner, v)?;
        st.durable()?;
        let p = PPtr::<T::P>::from_addr(addr);
        let r = self.pool.atomically(|tx| match self.map.get(tx, &n)? {
            Some(_) => Ok(false),
            None => self.map.insert(tx, n, p).map(|_| true),
        });
        match r {
            Ok(true) => st.linked(),
            Ok(false) => st.lost(),
            Err(e) => {
                st.discard();
                return Err(e);
            }
        }
        Ok(())
    }
}

impl<T: Load> Memo<T> for HashMemo<T> {
    fn get_or_compute(&self, n: u64, f: impl FnOnce(u64, &Self) -> Result<T>) -> Result<T> {
        let cx = Cx::new(&self.pool);
        miss(
            (cx.inner.heap.id, self.map_addr(), n),
            || self.lookup(&cx, n),
            || {
                let v = f(n, self)?;
                self.insert(&cx, n, &v)?;
                Ok(v)
            },
        )
    }

    fn get(&self, n: u64) -> Result<Option<T>> {
        self.lookup(&Cx::new(&self.pool), n)
    }
}

impl<T: Load> HashMemo<T> {
    fn map_addr(&self) -> u64 {
        use crate::stm::collections::Handle;
        self.map.addr()
    }
}

// ----- volatile ---------------------------------------------------------------------

/// The same memoization in volatile memory (lost at exit): the baseline.
pub struct VolatileMemo<T> {
    table: RwLock<FastMap<u64, Arc<T>>>,
}

impl<T> Default for VolatileMemo<T> {
    fn default() -> Self {
        VolatileMemo { table: RwLock::new(FastMap::default()) }
    }
}

impl<T: Clone> VolatileMemo<T> {
    /// Entries stored.
    pub fn len(&self) -> usize {
        self.table.read().len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Clone> Memo<T> for VolatileMemo<T> {
    fn get_or_compute(&self, n: u64, f: impl FnOnce(u64, &Self) -> Result<T>) -> Result<T> {
        if let Some(v) = self.get(n)? {
            return Ok(v);
        }
        let v = f(n, self)?;
        self.table.write().entry(n).or_insert_with(|| Arc::new(v.clone()));
        Ok(v)
    }

    fn get(&self, n: u64) -> Result<Option<T>> {
        Ok(self.table.read().get(&n).map(|v| (**v).clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_one_tree_per_digit_count() {
        assert_eq!(top_level(0), 0);
        assert_eq!(top_level(63), 0);
        assert_eq!(top_level(64), 1);
        assert_eq!(top_level(4095), 1);
        assert_eq!(top_level(4096), 2);
        assert_eq!(top_level(u64::MAX), LEVELS - 1);
        let n = 0x0123_4567_89ab_cdefu64;
        let back = (0..=top_level(n)).fold(0u64, |acc, l| acc | (digit(n, l) as u64) << (BITS as usize * l));
        assert_eq!(back, n);
    }
}
