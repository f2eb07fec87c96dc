//! [`HashTable`]: a fixed-size chained hash table whose bucket heads are
//! transactional fields and whose nodes are transactional cells, one lock
//! word per node (the Yates & Scott benchmark table).
//!
//! Layout: the handle points at the bucket array, a pool array of
//! `PTField` chain heads whose length is fixed when the table is made. A
//! node (`HNode`) is one pool object that starts with a cell in the
//! [`PTVar`] format: a versioned lock word and the value `Entry`
//! `{key, value, next}`, 32 bytes, padded to a 48-byte payload so the
//! node takes a 64-byte slot, one cache line: lock word and values
//! persist together (the redo replay rule). A link (a head, a node's
//! `next`) is the address of a node, which is its cell's. A lookup reads
//! one cell per node (key, value and link in one seqlock read); an update
//! rewrites the cell it changes whole (read in the transaction, one word
//! changed, written back). A new key is pushed at the head of its chain.
//!
//! What it keeps true (verified by [`HashTable::check`]):
//! - a key is in the chain of bucket `hash % buckets` (the deterministic
//!   hash of the module docs) and in no other node;
//! - a node's cell (lock word and entry) lies in one 64-byte line;
//! - a node's key is the one it was made with: every write of a cell
//!   copies the key it read.
//!
//! Conflicts: operations on keys of different buckets touch disjoint
//! variables; in one bucket, an insert writes the head, a removal the link
//! before its node (the head, or the whole cell of the node before it, so
//! it also conflicts with an update of that node's value), an update its
//! node's cell. The table never resizes (which would conflict with
//! everything), so choose the bucket count for the expected size.
//!
//! Removed nodes are unlinked, never freed: garbage for the engine's GC.
//! On a crash: inherits the STM's (see the module docs).
//!
//! Pool layout: the type names end in `.v2` (`engram::stm::HashTable.v2`,
//! `.Node.v2`, `.Entry.v2`; docs/stm.md round 23). A pool whose root holds
//! a table of the earlier layout (three `PTField`s per node, handle type
//! `engram::stm::HashTable`) is refused by the root's type check
//! (`Error::RootType`); there is no converter.

use super::{broken, handle, Handle, Plain, Shape};
use crate::stm::vars::FieldRef;
use crate::stm::{CopyCx, PTField, PTVar, Persist, ReadTx, STx, StmResult, VarCell};
use crate::{Error, PArray, PPtr, Persistent, Pool, Result};
use std::collections::HashSet;
use std::hash::Hash;
use std::mem::size_of;

/// The value of a node's cell: the key (set when the node is made, and
/// never changed by a write: every write copies it), the value and the
/// link to the next node.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Entry.v2")]
struct Entry<K, V> {
    key: K,
    value: V,
    next: Link<K, V>,
}

crate::stm::persist::plain_persist!([K: Persistent, V: Persistent] Entry<K, V>);

/// A node: its cell (lock word and `Entry`, in the [`PTVar`] format)
/// at the start of the object, padded to a 48-byte payload, so the object
/// takes a 64-byte slot, which is one cache line (a 32-byte payload would
/// take a 48-byte slot, and one such slot in four straddles two lines).
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Node.v2")]
struct HNode<K, V> {
    cell: VarCell<Entry<K, V>>,
    pad: [u64; 2],
}

/// A link: the address of a node, which is its cell's (null: the end of a
/// chain).
type Link<K, V> = PPtr<HNode<K, V>>;

/// The cell of the node a link points to, as a variable.
#[inline]
fn node<K: Persistent, V: Persistent>(n: Link<K, V>) -> PTVar<Entry<K, V>> {
    PTVar::from_cell(PPtr::from_addr(n.addr()))
}

/// Where the link to a node sits: a bucket head, or the cell of the node
/// before it (with the entry this transaction read there).
enum Pred<K, V> {
    Head(FieldRef<Link<K, V>>),
    Node(Link<K, V>, Entry<K, V>),
}

/// A transactional chained hash table from `K` to `V` in a pool, with a
/// fixed number of buckets and one transactional cell per node.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]); every method works
/// inside the caller's transaction. Keys are hashed with a fixed FNV-1a
/// hasher through their `Hash` impl, which must be deterministic; keys and
/// values are [`Plain`] values of at most 8 bytes. [`HashTable::len`] walks
/// every chain.
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::HashTable.v2")]
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
    /// 16 bytes each: lock word, then the address of the first node's
    /// cell; a node's cell is its lock word, then key, value and the next
    /// node's cell address, 8 bytes each), for tools that inspect the
    /// layout (the benchmark's `hash_floor` example).
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

    /// The entry of `key`'s node, if any: one cell read per node visited.
    #[inline]
    fn entry<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<Entry<K, V>>> {
        let mut n = tx.get(&self.head(tx, key)?)?;
        while !n.is_null() {
            let e = tx.get(&node(n))?;
            if e.key == *key {
                return Ok(Some(e));
            }
            n = e.next;
        }
        Ok(None)
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        Ok(self.entry(tx, key)?.map(|e| e.value))
    }

    /// Whether `key` is in the table (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(self.entry(tx, key)?.is_some())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&self, tx: &STx<'_>, key: K, value: V) -> StmResult<Option<V>> {
        // (The head found once: hashing the key is a quarter of a lookup;
        // and read once: a new node links the first one read here.)
        let head = self.head(tx, &key)?;
        let first = tx.read(&head)?;
        let mut n = first;
        while !n.is_null() {
            let e = tx.read(&node(n))?;
            if e.key == key {
                tx.write(&node(n), Entry { value, ..e })?;
                return Ok(Some(e.value));
            }
            n = e.next;
        }
        // Keys and values of at most 8 bytes: the node's payload is 33 to
        // 48 bytes, so its slot is 64 (fails to compile otherwise).
        const { assert!(size_of::<K>() <= 8 && size_of::<V>() <= 8 && size_of::<HNode<K, V>>() > 32 && size_of::<HNode<K, V>>() <= 48) };
        let entry = Entry { key, value, next: first };
        let n = tx.alloc(HNode { cell: VarCell { word: 0, value: entry }, pad: [0; 2] })?;
        tx.write(&head, n)?;
        Ok(None)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, tx: &STx<'_>, key: &K) -> StmResult<Option<V>> {
        let head = self.head(tx, key)?;
        let (mut pred, mut n) = (Pred::Head(head), tx.read(&head)?);
        while !n.is_null() {
            let e = tx.read(&node(n))?;
            if e.key == *key {
                match pred {
                    Pred::Head(h) => tx.write(&h, e.next)?,
                    Pred::Node(p, pe) => tx.write(&node(p), Entry { next: e.next, ..pe })?,
                }
                return Ok(Some(e.value));
            }
            (pred, n) = (Pred::Node(n, e), e.next);
        }
        Ok(None)
    }

    /// Calls `f` on every node (its cell's address and entry), bucket by
    /// bucket (reads the whole table).
    fn for_each_node(&self, tx: &STx<'_>, mut f: impl FnMut(u64, Link<K, V>, Entry<K, V>) -> StmResult<()>) -> StmResult<()> {
        for i in 0..self.buckets(tx)? {
            let mut n = tx.read(&self.bucket(i))?;
            while !n.is_null() {
                let e = tx.read(&node(n))?;
                f(i, n, e)?;
                n = e.next;
            }
        }
        Ok(())
    }

    /// Calls `f` on every entry, bucket by bucket (reads the whole table).
    pub fn for_each(&self, tx: &STx<'_>, mut f: impl FnMut(K, V)) -> StmResult<()> {
        self.for_each_node(tx, |_, _, e| {
            f(e.key, e.value);
            Ok(())
        })
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

    /// Verifies that every key sits in its own bucket's chain, once, and
    /// that every node's cell lies in one cache line; an error names the
    /// first node that breaks it. `height` is the longest chain.
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        let buckets = self.buckets(tx)?;
        let mut shape = Shape { objects: 1, ..Shape::default() };
        let (mut nodes, mut keys) = (HashSet::new(), HashSet::new());
        let (mut last, mut chain) = (0, 0);
        self.for_each_node(tx, |i, n, e| {
            let a = n.addr();
            if crate::hash::stable_hash(&e.key) % buckets != i || !nodes.insert(a) {
                return Err(broken(format!("hash node {a:#x}: in bucket {i}, or reached twice")));
            }
            if a % 64 + size_of::<VarCell<Entry<K, V>>>() as u64 > 64 {
                return Err(broken(format!("hash node {a:#x}: its cell straddles a cache line")));
            }
            if !keys.insert(e.key) {
                return Err(broken(format!("hash table {:#x}: a key is in two nodes", self.buckets.addr())));
            }
            chain = if i == last { chain + 1 } else { 1 };
            last = i;
            (shape.len, shape.objects, shape.height) = (shape.len + 1, shape.objects + 1, shape.height.max(chain));
            Ok(())
        })?;
        Ok(shape)
    }
}
