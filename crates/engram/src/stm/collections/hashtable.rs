//! [`HashTable`]: a fixed-size chained hash table whose bucket heads and
//! nodes are transactional fields (the Yates & Scott benchmark table).
//!
//! Layout: the handle points at the bucket array, a pool array of
//! `PTField` chain heads whose length is fixed when the table is made. A
//! node is one pool object of three [`PTField`]s: `key` (written once, when
//! the node is made), `value` and `next`. A new key is pushed at the head
//! of its chain.
//!
//! What it keeps true (verified by [`HashTable::check`]):
//! - a key is in the chain of bucket `hash % buckets` (the deterministic
//!   hash of the module docs) and in no other node.
//!
//! Conflicts: operations on keys of different buckets touch disjoint
//! variables; in one bucket, an insert writes the head, a removal the link
//! before its node, an update the node's value. The table never resizes
//! (which would conflict with everything), so choose the bucket count for
//! the expected size.
//!
//! Removed nodes are unlinked, never freed: garbage for the engine's GC.
//! On a crash: inherits the STM's (see the module docs).

use super::{broken, fld, handle, Handle, Plain, Shape};
use crate::stm::vars::FieldRef;
use crate::stm::{CopyCx, PTField, PTVar, Persist, ReadTx, STx, StmResult};
use crate::{Error, PArray, PPtr, Persistent, Pool, Result};
use std::collections::HashSet;
use std::hash::Hash;
use std::mem::size_of;

/// One node of a chain.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Node")]
struct HNode<K, V> {
    /// Set when the node is made, never written (`#[immutable]`).
    #[immutable]
    key: PTField<K>,
    value: PTField<V>,
    next: PTField<Link<K, V>>,
}

type Link<K, V> = PPtr<HNode<K, V>>;

/// A link's field (a bucket head or a node's `next`) and the node it holds.
type Found<K, V> = (FieldRef<Link<K, V>>, Link<K, V>);

/// A transactional chained hash table from `K` to `V` in a pool, with a
/// fixed number of buckets and its transactional fields embedded in the
/// nodes.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]); every method works
/// inside the caller's transaction. Keys are hashed with a fixed FNV-1a
/// hasher through their `Hash` impl, which must be deterministic; keys and
/// values are [`Plain`] values of at most 8 bytes. [`HashTable::len`] walks
/// every chain.
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::HashTable")]
pub struct HashTable<K, V> {
    /// The chain heads.
    buckets: PArray<PTField<Link<K, V>>>,
}

handle!(HashTable[K, V], "HashTable");

impl<K: Persistent, V: Persistent> Handle for HashTable<K, V> {
    fn from_addr(addr: u64) -> Self {
        HashTable { buckets: PArray::from_addr(addr) }
    }
    fn addr(&self) -> u64 {
        self.buckets.addr()
    }
}

/// What `new` writes: `n` empty chain heads, copied into the pool by the
/// STM (which has no array allocation of its own).
struct NewBuckets<K, V>(u64, std::marker::PhantomData<fn() -> (K, V)>);

impl<K: Persistent, V: Persistent> Persist for NewBuckets<K, V> {
    type P = PArray<PTField<Link<K, V>>>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        cx.alloc_slice(&vec![PTField::new(PPtr::null()); self.0 as usize])
    }
}

impl<K: Plain + Hash + Eq, V: Plain> HashTable<K, V> {
    /// A new, empty table of `buckets` chains (private to `tx` until it
    /// commits).
    pub fn new(tx: &STx<'_>, buckets: u64) -> StmResult<Self> {
        if buckets == 0 || buckets > u32::MAX as u64 {
            return Err(Error::invalid(format!("a hash table of {buckets} buckets")).into());
        }
        // The array comes in a fresh variable's value; the variable itself
        // is garbage once this commits.
        let holder = PTVar::new(tx, NewBuckets::<K, V>(buckets, std::marker::PhantomData))?;
        Ok(HashTable { buckets: tx.read(&holder)? })
    }

    /// The table in the named root `name` (a `PTVar<HashTable<K, V>>`),
    /// created with `buckets` chains in its own transaction if the root
    /// does not exist yet (an existing table keeps its size).
    pub fn root(pool: &Pool, name: &str, buckets: u64) -> Result<Self> {
        super::root_handle(pool, name, |tx| Self::new(tx, buckets))
    }

    /// The address of the bucket array (an array of `PTField` chain heads,
    /// 16 bytes each: lock word, then the head's address), for tools that
    /// inspect the layout (the benchmark's `hash_floor` example).
    pub fn addr(&self) -> u64 {
        self.buckets.addr()
    }

    /// The number of buckets.
    pub fn buckets(&self, tx: &STx<'_>) -> StmResult<u64> {
        Ok(tx.slice_of(self.buckets)?.len() as u64)
    }

    /// A key's chain head. The bucket count comes from the array's header
    /// alone (`STx::array_len`, no allocator lookup: this is on every
    /// operation); each head read is bounds-checked by the STM anyway.
    #[inline]
    fn head<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<FieldRef<Link<K, V>>> {
        let n = tx.array_len_of(self.buckets)?;
        if n == 0 {
            return Err(broken(format!("hash table {:#x} has no buckets", self.buckets.addr())));
        }
        let h = crate::hash::stable_hash(key);
        // (a mask, not a division, for the usual power-of-two count)
        let i = if n.is_power_of_two() { h & (n - 1) } else { h % n };
        Ok(self.bucket(i))
    }

    fn bucket(&self, i: u64) -> FieldRef<Link<K, V>> {
        PTField::at(self.buckets.addr(), i as usize * size_of::<PTField<Link<K, V>>>())
    }

    /// The link to `key`'s node (the link after which it would go if
    /// absent) and the node (null if absent).
    #[inline]
    fn find<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Found<K, V>> {
        self.find_from(tx, self.head(tx, key)?, key)
    }

    /// [`HashTable::find`] in the chain that starts at `head` (`key`'s).
    #[inline]
    fn find_from<T: ReadTx>(&self, tx: &T, head: FieldRef<Link<K, V>>, key: &K) -> StmResult<Found<K, V>> {
        let mut link = head;
        loop {
            let n = tx.get(&link)?;
            if n.is_null() || tx.get(&fld!(n, HNode<K, V>, key))? == *key {
                return Ok((link, n));
            }
            link = fld!(n, HNode<K, V>, next);
        }
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        let (_, n) = self.find(tx, key)?;
        if n.is_null() {
            return Ok(None);
        }
        tx.get(&fld!(n, HNode<K, V>, value)).map(Some)
    }

    /// Whether `key` is in the table (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(!self.find(tx, key)?.1.is_null())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&self, tx: &STx<'_>, key: K, value: V) -> StmResult<Option<V>> {
        // (The head found once: hashing the key is a quarter of a lookup;
        // and read once: a new node links the first one read here.)
        let head = self.head(tx, &key)?;
        let first = tx.get(&head)?;
        let mut n = first;
        while !n.is_null() && tx.get(&fld!(n, HNode<K, V>, key))? != key {
            n = tx.get(&fld!(n, HNode<K, V>, next))?;
        }
        if !n.is_null() {
            let f = fld!(n, HNode<K, V>, value);
            let old = tx.read(&f)?;
            tx.write(&f, value)?;
            return Ok(Some(old));
        }
        let n = tx.alloc(HNode { key: PTField::new(key), value: PTField::new(value), next: PTField::new(first) })?;
        tx.write(&head, n)?;
        Ok(None)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, tx: &STx<'_>, key: &K) -> StmResult<Option<V>> {
        let (link, n) = self.find(tx, key)?;
        if n.is_null() {
            return Ok(None);
        }
        let old = tx.read(&fld!(n, HNode<K, V>, value))?;
        tx.write(&link, tx.read(&fld!(n, HNode<K, V>, next))?)?;
        Ok(Some(old))
    }

    /// Calls `f` on every entry, bucket by bucket (reads the whole table).
    pub fn for_each(&self, tx: &STx<'_>, mut f: impl FnMut(K, V)) -> StmResult<()> {
        for i in 0..self.buckets(tx)? {
            let mut n = tx.read(&self.bucket(i))?;
            while !n.is_null() {
                f(tx.read(&fld!(n, HNode<K, V>, key))?, tx.read(&fld!(n, HNode<K, V>, value))?);
                n = tx.read(&fld!(n, HNode<K, V>, next))?;
            }
        }
        Ok(())
    }

    /// Every entry.
    pub fn to_vec(&self, tx: &STx<'_>) -> StmResult<Vec<(K, V)>> {
        let mut out = Vec::new();
        self.for_each(tx, |k, v| out.push((k, v)))?;
        Ok(out)
    }

    /// The number of entries (walks every chain: O(n + buckets) reads).
    pub fn len(&self, tx: &STx<'_>) -> StmResult<u64> {
        let mut n = 0;
        self.for_each(tx, |_, _| n += 1)?;
        Ok(n)
    }

    /// Whether the table is empty (reads every head).
    pub fn is_empty(&self, tx: &STx<'_>) -> StmResult<bool> {
        for i in 0..self.buckets(tx)? {
            if !tx.read(&self.bucket(i))?.is_null() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Verifies that every key sits in its own bucket's chain, once; an
    /// error names the first misplaced key. `height` is the longest chain.
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        let buckets = self.buckets(tx)?;
        let mut shape = Shape { objects: 1, ..Shape::default() };
        let mut seen = HashSet::new();
        for i in 0..buckets {
            let (mut n, mut chain) = (tx.read(&self.bucket(i))?, 0);
            while !n.is_null() {
                let k: K = tx.read(&fld!(n, HNode<K, V>, key))?;
                if crate::hash::stable_hash(&k) % buckets != i || !seen.insert(n.addr()) {
                    return Err(broken(format!("hash node {:#x}: in bucket {i}, or reached twice", n.addr())));
                }
                (chain, shape.len, shape.objects) = (chain + 1, shape.len + 1, shape.objects + 1);
                n = tx.read(&fld!(n, HNode<K, V>, next))?;
            }
            shape.height = shape.height.max(chain);
        }
        self.check_distinct(tx)?;
        Ok(shape)
    }

    fn check_distinct(&self, tx: &STx<'_>) -> StmResult<()> {
        let mut keys = HashSet::new();
        let mut repeated = false;
        self.for_each(tx, |k, _| repeated |= !keys.insert(k))?;
        if repeated {
            return Err(broken(format!("hash table {:#x}: a key is in two nodes", self.buckets.addr())));
        }
        Ok(())
    }
}
