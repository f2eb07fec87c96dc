//! The persistent allocator of the peers' word heaps: segregated free
//! lists of power-of-two block sizes (1 to [`MAX_WORDS`] words) and a bump
//! pointer, its metadata in the first bytes of the heap and changed only
//! by the transaction's own stores ([`Tx::store`]), so it commits, rolls
//! back and recovers with the data (RomulusLog's and OneFile's algorithms
//! need nothing more of an allocator; the papers' own are different,
//! general ones).
//!
//! Layout of a heap's first [`DATA_START`] bytes: 8 root words (the
//! structures' entry points), the bump pointer, then the head of the free
//! list of each size in words. A free block's first word links the next
//! free block of its size (0: none). Blocks larger than [`MAX_WORDS`] come
//! from the bump pointer only and are never freed (the hash set's bucket
//! array, made once).
//!
//! Blocks are aligned to their size up to a cache line (larger ones to a
//! line), so no block of up to 64 bytes straddles two lines: a 48-byte
//! tree node takes a 64-byte block on its own line, as a 48-byte request
//! gets a 64-byte chunk from a general-purpose allocator of the dlmalloc
//! kind. (Packed 48-byte nodes cost the tree's operations
//! 3.1 more D1 misses each at 90 % lookups, docs/stm.md.)
//!
//! Keeps true: every block handed out lies in `[DATA_START, bump)` and in
//! no free list; offset 0 is never a block, so it serves as the null link.
//! A block is not cleared: the caller writes every word it reads.

use super::{HeapError, Tx};

/// Root words (offsets `8 * i`).
pub const ROOTS: u64 = 8;
/// The bump pointer's word.
pub const BUMP: u64 = 8 * ROOTS;
/// The largest block size with a free list, in words.
pub const MAX_WORDS: u64 = 16;
/// The free list head of blocks of `w` words.
const fn free_head(w: u64) -> u64 {
    BUMP + 8 * w
}
/// Where blocks start.
pub const DATA_START: u64 = 256;
const _: () = assert!(free_head(MAX_WORDS) + 8 <= DATA_START);

/// The offset of root word `i` (below [`ROOTS`]).
pub const fn root(i: u64) -> u64 {
    8 * (i % ROOTS)
}

/// The block size, in words, of a request of `words` words: a power of
/// two up to [`MAX_WORDS`], else the request.
fn block_words(words: u64) -> u64 {
    let w = words.max(1);
    if w <= MAX_WORDS {
        w.next_power_of_two()
    } else {
        w
    }
}

/// A block for `words` words (at least 1), from its free list or the
/// bump pointer.
pub fn alloc<T: Tx>(tx: &mut T, words: u64) -> Result<u64, T::Error> {
    let words = block_words(words);
    if words <= MAX_WORDS {
        let head = tx.load(free_head(words));
        if head != 0 {
            let next = tx.load(head);
            tx.store(free_head(words), next)?;
            return Ok(head);
        }
    }
    let b = tx.load(BUMP).next_multiple_of((8 * words).min(64));
    let end = b.saturating_add(8 * words);
    if end > tx.heap_bytes() {
        return Err(HeapError::Full(tx.heap_bytes()).into());
    }
    tx.store(BUMP, end)?;
    Ok(b)
}

/// Gives back block `off` of `words` words (larger blocks are kept).
pub fn free<T: Tx>(tx: &mut T, off: u64, words: u64) -> Result<(), T::Error> {
    let words = block_words(words);
    if words > MAX_WORDS {
        return Ok(());
    }
    let head = tx.load(free_head(words));
    tx.store(off, head)?;
    tx.store(free_head(words), off)
}
