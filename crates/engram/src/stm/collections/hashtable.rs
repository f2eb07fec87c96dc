//! [`HashTable`]: a fixed-size chained hash table whose buckets are
//! transactional cells holding their chain's first entry inline, with
//! overflow nodes (one transactional cell each) for the rest of the
//! chain (the Yates & Scott benchmark table).
//!
//! Layout: the handle points at the bucket array. Bucket `i` is a cell in
//! the [`PTVar`] format at `addr + 16 + 32·i`: a versioned lock word and
//! the entry `{key, value, next}`, 32 bytes, so two buckets share a 64-byte
//! line and none straddles one (the array's payload starts 16 bytes past a
//! 32-byte boundary, as every slot of its size gets: checked when it is
//! made). A bucket's `next` says what it holds: null, nothing (empty);
//! the array's own address (`end`), one entry and no overflow node;
//! otherwise its entry and the first overflow node. An overflow node
//! (`HNode`) is one pool object that starts with a cell of the same
//! format, padded to a 48-byte payload so it takes a 64-byte slot, one
//! line; its `next` is the following node, null at the chain's end. A
//! lookup reads its bucket's cell (key, value and link in one seqlock
//! read; an empty bucket or a hit on the inline entry ends there), then
//! one cell per overflow node; an update rewrites the cell it changes
//! whole (read in the transaction, one word changed, written back).
//!
//! Updates: an insert into an empty bucket writes the bucket and allocates
//! nothing; into an occupied one it links a new node right after the
//! inline entry (the bucket's `next`, no copy). Removing the inline entry
//! moves the first overflow node's key, value and link into the bucket
//! (or empties it); that node is then unlinked garbage.
//!
//! What it keeps true (verified by [`HashTable::check`]):
//! - a key is in the chain of bucket `key_hash(key) % buckets` (a mask
//!   for a power-of-two count), inline or in a node, and nowhere else;
//!   `key_hash` is the word-at-a-time stable hash (`hash.rs`), so a key
//!   is in the same bucket in every process and build;
//! - every cell (a bucket's, a node's) lies in one 64-byte line;
//! - a node's key is the one it was made with: every write of a node's
//!   cell copies the key it read (a bucket's key changes only when its
//!   entry is replaced whole).
//!
//! Conflicts: operations on keys of different buckets touch disjoint
//! variables (two buckets share a line, not a lock word); in one bucket,
//! an insert of a new key writes the bucket's cell (so it conflicts with
//! an update of the inline entry's value), a removal the link before its
//! node (the bucket's cell, or the whole cell of the node before it), an
//! update its entry's cell. The table never resizes (which would conflict
//! with everything), so choose the bucket count for the expected size.
//!
//! Unlinked nodes are never freed by the table: garbage for the engine's
//! GC, which reaches the live ones through the bucket array (its element
//! type, `Seam`, declares where the buckets' `next` words and any pool
//! pointers in keys and values lie). On a crash: inherits the STM's (see
//! the module docs).
//!
//! Limits: keys and values of at most 8 bytes, aligned to at most 8, each
//! kept in a word of its own (`Word`); at least 3 buckets (fewer are made
//! as 3: the array of 1 or 2 buckets takes a slot class whose slots are not
//! all 32-byte aligned).
//!
//! Pool layout: the type names end in `.v4` (`engram::stm::HashTable.v4`,
//! `.Seam.v4`, `.Node.v4`, `.Entry.v4`, `.Word.v4`; docs/stm.md rounds 25
//! and 28). A pool whose root holds a table of an earlier layout (`.v3`:
//! the same cells, keys placed by the byte-at-a-time FNV-1a hash; `.v2`:
//! heads of 16 bytes, every entry in a node; or the first, `PTField`
//! nodes) is refused by the root's type check (`Error::RootType`); there
//! is no converter.

use super::{broken, handle, Handle, Plain, Shape};
use crate::stm::{CopyCx, PTVar, Persist, ReadTx, STx, StmResult, VarCell};
use crate::{Error, PArray, PPtr, Persistent, Pool, Result};
use std::collections::HashSet;
use std::hash::Hash;
use std::mem::size_of;

/// A key or value in a word of its own (`T` of at most 8 bytes, padded to
/// 8), so an entry's words sit at the same offsets whatever `K` and `V`
/// are: the bucket array's element type (`Seam`) depends on it.
#[repr(C, align(8))]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Word.v4")]
struct Word<T>(T);

/// The value of a cell (a bucket's or a node's): the key, the value and
/// the link (see the module docs for what a bucket's link says). A node's
/// key is set when the node is made and never changed by a write.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Entry.v4")]
struct Entry<K, V> {
    key: Word<K>,
    value: Word<V>,
    next: Link<K, V>,
}

crate::stm::persist::plain_persist!([K: Persistent, V: Persistent] Entry<K, V>);

/// An overflow node: its cell (lock word and `Entry`, in the [`PTVar`]
/// format) at the start of the object, padded to a 48-byte payload, so the
/// object takes a 64-byte slot, which is one cache line (a 32-byte payload
/// would take a 48-byte slot, and one such slot in four straddles two
/// lines).
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Node.v4")]
struct HNode<K, V> {
    cell: VarCell<Entry<K, V>>,
    pad: [u64; 2],
}

/// The bucket array's element, as the pool (its GC, its checks) sees it:
/// 32 bytes that straddle two bucket cells, because the cells start 16
/// bytes into the array (`FIRST`). Element `e` holds bucket `e - 1`'s value
/// and link, then bucket `e`'s lock word and key; element 0's first half
/// and the last element's second half belong to no bucket and stay zero.
/// The code reads and writes buckets as cells, never through this type.
#[repr(C)]
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::stm::HashTable.Seam.v4")]
struct Seam<K, V> {
    value: Word<V>,
    next: Link<K, V>,
    word: u64,
    key: Word<K>,
}

/// Where bucket 0's cell starts in the array: the array's payload is 16
/// bytes past a 32-byte boundary, so a 32-byte cell at `FIRST + 32·i`
/// starts on one and never straddles a line.
const FIRST: u64 = 16;

/// Bytes per bucket cell (lock word, key, value, link).
const CELL: u64 = 32;

/// Fewer buckets are made as this many (see the module's limits).
const MIN_BUCKETS: u64 = 3;

/// A key's hash, which places it in bucket `key_hash(key) % buckets`:
/// part of the layout (`.v4`), so the same in every process and build.
#[inline]
pub(crate) fn key_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    crate::hash::stable_word_hash(key)
}

/// A link: the address of a node, which is its cell's (null: the end of a
/// chain, or an empty bucket; see the module docs).
type Link<K, V> = PPtr<HNode<K, V>>;

/// The cell of the node a link points to, as a variable.
#[inline]
fn node<K: Persistent, V: Persistent>(n: Link<K, V>) -> PTVar<Entry<K, V>> {
    PTVar::from_cell(PPtr::from_addr(n.addr()))
}

/// The all-zero value of a pool type: an empty bucket's entry, a seam.
fn zeroed<T: Persistent>() -> T {
    // SAFETY: every bit pattern of a Persistent type is a valid value
    // (the pool's contract), so all zeroes is one.
    unsafe { std::mem::zeroed() }
}

/// A transactional chained hash table from `K` to `V` in a pool, with a
/// fixed number of buckets, the first entry of each chain inline in its
/// bucket's cell and one transactional cell per overflow node.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]); every method works
/// inside the caller's transaction. Keys are hashed with a fixed
/// word-at-a-time hasher through their `Hash` impl, which must be
/// deterministic (see the module docs); keys and
/// values are [`Plain`] values of at most 8 bytes. [`HashTable::len`] walks
/// every chain.
#[repr(transparent)]
#[derive(Persistent)]
#[engram(name = "engram::stm::HashTable.v4")]
pub struct HashTable<K, V> {
    /// The bucket cells, seen as seams (see `Seam`).
    buckets: PArray<Seam<K, V>>,
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

/// What `new` writes: the zeroed seams of `n` empty buckets, copied into
/// the pool by the STM (which has no array allocation of its own).
struct NewBuckets<K, V>(u64, std::marker::PhantomData<fn() -> (K, V)>);

impl<K: Persistent, V: Persistent> Persist for NewBuckets<K, V> {
    type P = PArray<Seam<K, V>>;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<Self::P> {
        cx.alloc_slice(&vec![zeroed::<Seam<K, V>>(); self.0 as usize + 1])
    }
}

impl<K: Plain + Hash + Eq, V: Plain> HashTable<K, V> {
    /// Keys and values of at most 8 bytes (aligned to at most 8): an entry
    /// is three words, a cell 32 bytes, a seam 32, a node's payload 48, so
    /// its slot is 64 (fails to compile otherwise, where used).
    const LAYOUT: () = assert!(
        size_of::<Entry<K, V>>() == 24
            && size_of::<Seam<K, V>>() == CELL as usize
            && size_of::<VarCell<Entry<K, V>>>() == CELL as usize
            && size_of::<HNode<K, V>>() == 48
    );

    /// A new, empty table of `buckets` chains (at least 3; private to `tx`
    /// until it commits).
    pub fn new(tx: &STx<'_>, buckets: u64) -> StmResult<Self> {
        let () = Self::LAYOUT;
        if buckets == 0 || buckets > u32::MAX as u64 {
            return Err(Error::invalid(format!("a hash table of {buckets} buckets")).into());
        }
        // The array comes in a fresh variable's value; the variable itself
        // is garbage once this commits.
        let holder = PTVar::new(tx, NewBuckets::<K, V>(buckets.max(MIN_BUCKETS), std::marker::PhantomData))?;
        let t = HashTable { buckets: tx.read(&holder)? };
        if t.buckets.addr() % CELL != FIRST {
            return Err(broken(format!("hash table {:#x}: the bucket array is not where its cells fit lines", t.buckets.addr())));
        }
        Ok(t)
    }

    /// The table in the named root `name` (a `PTVar<HashTable<K, V>>`),
    /// created with `buckets` chains in its own transaction if the root
    /// does not exist yet (an existing table keeps its size).
    pub fn root(pool: &Pool, name: &str, buckets: u64) -> Result<Self> {
        super::root_handle(pool, name, |tx| Self::new(tx, buckets))
    }

    /// The address of the bucket array, for tools that inspect the layout
    /// (the benchmark's `hash_floor` example). Bucket `i`'s cell is at
    /// `addr + 16 + 32·i`: lock word, key, value, next, 8 bytes each; next
    /// is 0 for an empty bucket, `addr` itself for one entry and no
    /// overflow node, otherwise the first overflow node's cell address. A
    /// node's cell is laid out the same, its next 0 at the chain's end.
    pub fn addr(&self) -> u64 {
        self.buckets.addr()
    }

    /// The number of buckets.
    pub fn buckets(&self, tx: &STx<'_>) -> StmResult<u64> {
        Ok((tx.slice_of(self.buckets)?.len() as u64).saturating_sub(1))
    }

    /// A key's bucket cell. The bucket count comes from the array's header
    /// alone (`STx::array_len_of`, no allocator lookup: this is on every
    /// operation); each cell read is bounds-checked by the STM anyway.
    #[inline]
    fn bucket_of<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<PTVar<Entry<K, V>>> {
        let n = tx.array_len_of(self.buckets)?.wrapping_sub(1);
        if n == 0 || n == u64::MAX {
            return Err(broken(format!("hash table {:#x} has no buckets", self.buckets.addr())));
        }
        let h = key_hash(key);
        // (a mask, not a division, for the usual power-of-two count; `n` is
        // not 0 here, so `n & (n - 1) == 0` is the power-of-two test in two
        // instructions, where `is_power_of_two` counts bits)
        let i = if n & (n - 1) == 0 { h & (n - 1) } else { h % n };
        Ok(self.bucket(i))
    }

    fn bucket(&self, i: u64) -> PTVar<Entry<K, V>> {
        PTVar::from_cell(PPtr::from_addr(self.buckets.addr() + FIRST + i * CELL))
    }

    /// The link a bucket's `next` holds for "one entry, no overflow node".
    fn end(&self) -> Link<K, V> {
        PPtr::from_addr(self.buckets.addr())
    }

    /// The first overflow node after a bucket's entry (null for none),
    /// from the bucket's `next`.
    #[inline]
    fn overflow(&self, next: Link<K, V>) -> Link<K, V> {
        if next == self.end() {
            PPtr::null()
        } else {
            next
        }
    }

    /// What a bucket's `next` holds when `first` (null for none) is the
    /// first overflow node after its entry.
    fn after_entry(&self, first: Link<K, V>) -> Link<K, V> {
        if first.is_null() {
            self.end()
        } else {
            first
        }
    }

    /// The entry of `key`, if any: the bucket's cell read, then one cell
    /// per overflow node visited.
    #[inline]
    fn entry<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<Entry<K, V>>> {
        let b = tx.get(&self.bucket_of(tx, key)?)?;
        if b.next.is_null() {
            return Ok(None);
        }
        if b.key.0 == *key {
            return Ok(Some(b));
        }
        let mut n = self.overflow(b.next);
        while !n.is_null() {
            let e = tx.get(&node(n))?;
            if e.key.0 == *key {
                return Ok(Some(e));
            }
            n = e.next;
        }
        Ok(None)
    }

    /// The value of `key`, in a full ([`STx`]) or read-only
    /// ([`crate::stm::RTx`]) transaction.
    pub fn get<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<Option<V>> {
        Ok(self.entry(tx, key)?.map(|e| e.value.0))
    }

    /// Whether `key` is in the table (in either kind of transaction).
    pub fn contains_key<T: ReadTx>(&self, tx: &T, key: &K) -> StmResult<bool> {
        Ok(self.entry(tx, key)?.is_some())
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&self, tx: &STx<'_>, key: K, value: V) -> StmResult<Option<V>> {
        let () = Self::LAYOUT;
        // (The bucket found once: hashing the key is a quarter of a
        // lookup; and read once: a new node links the first one read here.)
        let cell = self.bucket_of(tx, &key)?;
        let b = tx.read(&cell)?;
        if b.next.is_null() {
            tx.write(&cell, Entry { key: Word(key), value: Word(value), next: self.end() })?;
            return Ok(None);
        }
        if b.key.0 == key {
            tx.write(&cell, Entry { value: Word(value), ..b })?;
            return Ok(Some(b.value.0));
        }
        let first = self.overflow(b.next);
        let mut n = first;
        while !n.is_null() {
            let e = tx.read(&node(n))?;
            if e.key.0 == key {
                tx.write(&node(n), Entry { value: Word(value), ..e })?;
                return Ok(Some(e.value.0));
            }
            n = e.next;
        }
        let entry = Entry { key: Word(key), value: Word(value), next: first };
        let n = tx.alloc(HNode { cell: VarCell { word: 0, value: entry }, pad: [0; 2] })?;
        tx.write(&cell, Entry { next: n, ..b })?;
        Ok(None)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, tx: &STx<'_>, key: &K) -> StmResult<Option<V>> {
        let cell = self.bucket_of(tx, key)?;
        let b = tx.read(&cell)?;
        if b.next.is_null() {
            return Ok(None);
        }
        let first = self.overflow(b.next);
        if b.key.0 == *key {
            // The first overflow node's entry moves into the bucket, or the
            // bucket empties. Planted bug: the bucket empties anyway,
            // losing the overflow nodes' keys.
            let moved = if first.is_null() || crate::failpoint::planted("stm.ht_remove_drops_overflow") {
                zeroed()
            } else {
                let f = tx.read(&node(first))?;
                Entry { next: self.after_entry(f.next), ..f }
            };
            tx.write(&cell, moved)?;
            return Ok(Some(b.value.0));
        }
        // The node before the one visited (None: the bucket's entry).
        let (mut pred, mut n) = (None::<(Link<K, V>, Entry<K, V>)>, first);
        while !n.is_null() {
            let e = tx.read(&node(n))?;
            if e.key.0 == *key {
                match pred {
                    None => tx.write(&cell, Entry { next: self.after_entry(e.next), ..b })?,
                    Some((p, pe)) => tx.write(&node(p), Entry { next: e.next, ..pe })?,
                }
                return Ok(Some(e.value.0));
            }
            (pred, n) = (Some((n, e)), e.next);
        }
        Ok(None)
    }

    /// Calls `f` on every entry (its bucket, its cell's address, whether
    /// that is an overflow node's, and the entry), bucket by bucket, the
    /// inline entry first (reads the whole table).
    fn for_each_cell(&self, tx: &STx<'_>, mut f: impl FnMut(u64, u64, bool, Entry<K, V>) -> StmResult<()>) -> StmResult<()> {
        for i in 0..self.buckets(tx)? {
            let cell = self.bucket(i);
            let b = tx.read(&cell)?;
            if b.next.is_null() {
                continue;
            }
            f(i, cell.cell().addr(), false, b)?;
            let mut n = self.overflow(b.next);
            while !n.is_null() {
                let e = tx.read(&node(n))?;
                f(i, n.addr(), true, e)?;
                n = e.next;
            }
        }
        Ok(())
    }

    /// Calls `f` on every entry, bucket by bucket (reads the whole table).
    pub fn for_each(&self, tx: &STx<'_>, mut f: impl FnMut(K, V)) -> StmResult<()> {
        self.for_each_cell(tx, |_, _, _, e| {
            f(e.key.0, e.value.0);
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

    /// Whether the table is empty (reads every bucket).
    pub fn is_empty(&self, tx: &STx<'_>) -> StmResult<bool> {
        for i in 0..self.buckets(tx)? {
            if !tx.read(&self.bucket(i))?.next.is_null() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Verifies that every key sits in its own bucket's chain, once, and
    /// that every cell (a bucket's, a node's) lies in one cache line; an
    /// error names the first cell that breaks it. `height` is the longest
    /// chain (entries, the inline one included); `objects` counts the
    /// array and the overflow nodes.
    pub fn check(&self, tx: &STx<'_>) -> StmResult<Shape> {
        let buckets = self.buckets(tx)?;
        let mut shape = Shape { objects: 1, ..Shape::default() };
        let (mut nodes, mut keys) = (HashSet::new(), HashSet::new());
        let (mut last, mut chain) = (0, 0);
        self.for_each_cell(tx, |i, a, is_node, e| {
            if key_hash(&e.key.0) % buckets != i || (is_node && !nodes.insert(a)) {
                return Err(broken(format!("hash cell {a:#x}: in bucket {i}, or reached twice")));
            }
            if a % 64 + CELL > 64 {
                return Err(broken(format!("hash cell {a:#x}: it straddles a cache line")));
            }
            if !keys.insert(e.key.0) {
                return Err(broken(format!("hash table {:#x}: a key is in two entries", self.buckets.addr())));
            }
            chain = if i == last { chain + 1 } else { 1 };
            last = i;
            (shape.len, shape.height) = (shape.len + 1, shape.height.max(chain));
            shape.objects += is_node as u64;
            Ok(())
        })?;
        Ok(shape)
    }
}
