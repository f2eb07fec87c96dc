//! [`PHashMap`]: a hash map in the pool, with separate chaining.
//!
//! Layout: the handle points at a `MapHeader { len, buckets }`; `buckets` is
//! a pool array of chain heads whose length is a power of two (null while the
//! map has never held a key); each entry is a `MapNode { next, hash, key,
//! value }` in the chain of bucket `hash & (buckets - 1)`.
//!
//! What it keeps true:
//! - `len` is the number of nodes reachable from the buckets, each key is in
//!   at most one node, and every node sits in the chain its stored hash picks;
//! - `len <= 0.75 * buckets`: the insert that would pass that load factor
//!   first doubles the bucket array, inside its own region, relinking every
//!   node into a new array and freeing the old array when the region commits;
//! - hashes are FNV-1a over the bytes the key's [`Hash`] impl feeds, with a
//!   final avalanche step: the same key hashes the same in every process, so
//!   the map finds its keys after a restart (never `RandomState`).
//!
//! On a crash or rollback: every node link, bucket head and header word is
//! undo-logged before it changes, so the map is exactly as it was before the
//! region — after a resize too, since the old bucket array is only freed at
//! commit and the relinked `next` words are restored. Nodes and arrays the
//! region allocated are freed by the rollback, or are garbage after a crash.

use super::handle_impls;
use super::raw;
use crate::{Error, PArray, PPtr, Persistent, Result, Tx};
use std::hash::Hash;
use std::mem::offset_of;

/// Buckets of a map's first bucket array.
const MIN_BUCKETS: u64 = 8;

/// One entry of a chain.
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::MapNode")]
#[repr(C)]
struct Node<K, V> {
    /// The next node of the same bucket, or null.
    next: PPtr<Node<K, V>>,
    /// The key's hash (kept so that resizing needs no rehashing).
    hash: u64,
    key: K,
    value: V,
}

/// The pool object a [`PHashMap`] points to.
#[derive(Clone, Copy, Persistent)]
#[engram(name = "engram::MapHeader")]
#[repr(C)]
struct MapHeader<K, V> {
    /// Number of entries.
    len: u64,
    /// Chain heads; a power-of-two length, or null before the first insert.
    buckets: PArray<Link<K, V>>,
}

type Link<K, V> = PPtr<Node<K, V>>;

/// Where a key was found: its bucket, the node before it in the chain
/// (`None` when it is the head), the node and its contents.
struct Found<K, V> {
    bucket: u64,
    prev: Option<Link<K, V>>,
    at: Link<K, V>,
    node: Node<K, V>,
}

/// A hash map from `K` to `V` in a pool.
///
/// A handle (one pool pointer, `Copy` and [`Persistent`]) like
/// [`super::PVec`]; every method, readers included, takes the map's lock
/// until the region ends. Keys are compared with `Eq` and hashed with a
/// fixed FNV-1a hasher through their `Hash` impl, which must therefore be
/// deterministic (the derived one and those of integers, arrays and pool
/// pointers are). `free` and `clear` release the map's own nodes, not what
/// keys or values point to.
///
/// # Example
/// ```
/// use engram::{collections::PHashMap, CreateOptions, Durability, Pool};
/// # let path = std::env::temp_dir().join(format!("engram-doc-phashmap-{}.pool", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let pool = Pool::create(&path, CreateOptions::new("doc").durability(Durability::Process))?;
/// pool.txn(|tx| {
///     let m = PHashMap::<u64, u64>::new(tx)?;
///     for k in 0..100 {
///         m.insert(tx, k, k * k)?;
///     }
///     m.set_root(tx, "squares")
/// })?;
/// pool.txn(|tx| {
///     let m = PHashMap::<u64, u64>::from_root(tx, "squares")?.expect("root exists");
///     assert_eq!(m.get(tx, &7)?, Some(49));
///     assert_eq!(m.insert(tx, 7, 0)?, Some(49));
///     assert_eq!(m.remove(tx, &8)?, Some(64));
///     assert_eq!(m.len(tx)?, 99);
///     Ok::<_, engram::Error>(())
/// })?;
/// # pool.close()?; std::fs::remove_file(&path).unwrap();
/// # Ok::<(), engram::Error>(())
/// ```
#[repr(transparent)]
pub struct PHashMap<K, V>(PPtr<MapHeader<K, V>>);

handle_impls!(PHashMap[K, V] "engram::PHashMap");

impl<K: Persistent + Hash + Eq, V: Persistent> PHashMap<K, V> {
    /// An empty map (no buckets until the first insert).
    pub fn new(tx: &Tx<'_>) -> Result<Self> {
        tx.alloc(MapHeader { len: 0, buckets: PArray::null() }).map(PHashMap)
    }

    /// Number of entries.
    pub fn len(self, tx: &Tx<'_>) -> Result<u64> {
        Ok(self.open(tx)?.len)
    }

    /// Whether the map has no entries.
    pub fn is_empty(self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.len(tx)? == 0)
    }

    /// Sets `key` to `value`; returns the value it replaced, if any. Doubles
    /// the bucket array first if the new entry would pass load factor 0.75.
    pub fn insert(self, tx: &Tx<'_>, key: K, value: V) -> Result<Option<V>> {
        let mut h = self.open(tx)?;
        let hash = crate::hash::stable_hash(&key);
        if let Some(f) = find(tx, &h, &key, hash)? {
            tx.write(f.at, Node { value, ..f.node })?;
            return Ok(Some(f.node.value));
        }
        let nb = raw::capacity(tx, h.buckets)?;
        if h.len.saturating_add(1).saturating_mul(4) > nb.saturating_mul(3) {
            h.buckets = grow(tx, &h, nb)?;
        }
        let bucket = bucket_of(tx, h.buckets, hash)?;
        let next = tx.get(h.buckets, bucket)?;
        let at = tx.alloc(Node { next, hash, key, value })?;
        tx.set(h.buckets, bucket, at)?;
        h.len += 1;
        tx.write(self.0, h)?;
        Ok(None)
    }

    /// The value of `key`, if present.
    pub fn get(self, tx: &Tx<'_>, key: &K) -> Result<Option<V>> {
        let h = self.open(tx)?;
        Ok(find(tx, &h, key, crate::hash::stable_hash(key))?.map(|f| f.node.value))
    }

    /// Whether `key` is present.
    pub fn contains_key(self, tx: &Tx<'_>, key: &K) -> Result<bool> {
        Ok(self.get(tx, key)?.is_some())
    }

    /// Removes `key`; returns its value if it was present. Its node is freed
    /// when the region commits.
    pub fn remove(self, tx: &Tx<'_>, key: &K) -> Result<Option<V>> {
        let mut h = self.open(tx)?;
        let Some(f) = find(tx, &h, key, crate::hash::stable_hash(key))? else { return Ok(None) };
        match f.prev {
            Some(prev) => set_next(tx, prev, f.node.next)?,
            None => tx.set(h.buckets, f.bucket, f.node.next)?,
        }
        tx.free(f.at)?;
        h.len -= 1;
        tx.write(self.0, h)?;
        Ok(Some(f.node.value))
    }

    /// Copies every entry out of the pool, in bucket order.
    pub fn entries(self, tx: &Tx<'_>) -> Result<Vec<(K, V)>> {
        let h = self.open(tx)?;
        let mut out = Vec::new();
        walk(tx, &h, |_, n| {
            out.push((n.key, n.value));
            Ok(())
        })?;
        Ok(out)
    }

    /// Removes every entry, freeing the nodes and the bucket array when the
    /// region commits.
    pub fn clear(self, tx: &Tx<'_>) -> Result<()> {
        let h = self.open(tx)?;
        free_contents(tx, &h)?;
        tx.write(self.0, MapHeader { len: 0, buckets: PArray::null() })
    }

    /// Frees the map, its bucket array and every node when the region
    /// commits. The handle (and every copy of it) must not be used afterwards.
    pub fn free(self, tx: &Tx<'_>) -> Result<()> {
        let h = self.open(tx)?;
        free_contents(tx, &h)?;
        tx.free(self.0)
    }

    /// Points root `name` at this map.
    pub fn set_root(self, tx: &Tx<'_>, name: &str) -> Result<()> {
        tx.set_root(name, self.0)
    }

    /// The map root `name` points to, if the root exists. Fails with
    /// [`crate::Error::RootType`] if it holds something else.
    pub fn from_root(tx: &Tx<'_>, name: &str) -> Result<Option<Self>> {
        Ok(tx.root::<MapHeader<K, V>>(name)?.map(PHashMap))
    }

    /// Locks the map for the rest of the region and reads its header.
    fn open(self, tx: &Tx<'_>) -> Result<MapHeader<K, V>> {
        tx.lock_ptr(self.0)?;
        tx.read(self.0)
    }
}

/// The bucket of `hash` in `buckets`.
fn bucket_of<K: Persistent, V: Persistent>(tx: &Tx<'_>, buckets: PArray<Link<K, V>>, hash: u64) -> Result<u64> {
    let nb = raw::capacity(tx, buckets)?;
    if !nb.is_power_of_two() {
        return Err(Error::corrupt(format!("hash map with {nb} buckets, not a power of two")));
    }
    Ok(hash & (nb - 1))
}

/// Looks `key` up in its chain.
fn find<K: Persistent + Eq, V: Persistent>(tx: &Tx<'_>, h: &MapHeader<K, V>, key: &K, hash: u64) -> Result<Option<Found<K, V>>> {
    if h.len == 0 {
        return Ok(None);
    }
    let bucket = bucket_of(tx, h.buckets, hash)?;
    let (mut prev, mut at) = (None, tx.get(h.buckets, bucket)?);
    for _ in 0..h.len {
        if at.is_null() {
            break;
        }
        let node = tx.read(at)?;
        if node.hash == hash && node.key == *key {
            return Ok(Some(Found { bucket, prev, at, node }));
        }
        (prev, at) = (Some(at), node.next);
    }
    if !at.is_null() {
        return Err(too_many(h));
    }
    Ok(None)
}

/// Calls `f` on every node of every chain. `f` may relink or free the node
/// it gets (its successor has already been read).
fn walk<K: Persistent, V: Persistent>(
    tx: &Tx<'_>,
    h: &MapHeader<K, V>,
    mut f: impl FnMut(Link<K, V>, Node<K, V>) -> Result<()>,
) -> Result<()> {
    let heads = raw::read_elems(tx, h.buckets, 0, raw::capacity(tx, h.buckets)?)?;
    let mut seen = 0u64;
    for mut at in heads {
        while !at.is_null() {
            seen += 1;
            if seen > h.len {
                return Err(too_many(h));
            }
            let node = tx.read(at)?;
            f(at, node)?;
            at = node.next;
        }
    }
    Ok(())
}

/// A map whose chains hold more nodes than its `len` (a cycle, or a damaged
/// pool): an error rather than an endless walk.
fn too_many<K, V>(h: &MapHeader<K, V>) -> Error {
    Error::corrupt(format!("hash map chains hold more than its {} entries", h.len))
}

/// Overwrites only the `next` word of node `at` (8 bytes logged, not the
/// whole node).
fn set_next<K: Persistent, V: Persistent>(tx: &Tx<'_>, at: Link<K, V>, next: Link<K, V>) -> Result<()> {
    let field = PPtr::<Link<K, V>>::from_addr(at.addr() + offset_of!(Node<K, V>, next) as u64);
    tx.write(field, next)
}

/// Returns a bucket array of twice `nb` buckets (`MIN_BUCKETS` if there
/// were none) holding every node of `h`, and queues the old one for freeing at
/// commit. Each relinked node's `next` word is logged, so a rollback puts
/// every chain back as it was.
fn grow<K: Persistent, V: Persistent>(tx: &Tx<'_>, h: &MapHeader<K, V>, nb: u64) -> Result<PArray<Link<K, V>>> {
    let new_nb = if nb == 0 { MIN_BUCKETS } else { nb.checked_mul(2).ok_or_else(|| too_many(h))? };
    let grown = tx.alloc_array::<Link<K, V>>(new_nb)?;
    let mut heads = vec![Link::<K, V>::null(); new_nb as usize];
    walk(tx, h, |at, node| {
        let head = &mut heads[(node.hash & (new_nb - 1)) as usize];
        if node.next != *head {
            set_next(tx, at, *head)?;
        }
        *head = at;
        Ok(())
    })?;
    // A fresh array: not logged, freed by a rollback.
    tx.write_slice(grown, 0, &heads)?;
    if !h.buckets.is_null() {
        tx.free_array(h.buckets)?;
    }
    Ok(grown)
}

/// Queues every node and the bucket array for freeing at commit.
fn free_contents<K: Persistent, V: Persistent>(tx: &Tx<'_>, h: &MapHeader<K, V>) -> Result<()> {
    walk(tx, h, |at, _| tx.free(at))?;
    if !h.buckets.is_null() {
        tx.free_array(h.buckets)?;
    }
    Ok(())
}
