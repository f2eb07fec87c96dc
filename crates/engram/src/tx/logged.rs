//! The region's "already logged?" set: one bit per 8-byte word of the pool.
//!
//! A region logs a range the first time it changes it; every later write
//! to the same bytes only has to ask whether they are covered. A hash map
//! keyed by offset made that question cost nearly as much as PMDK's whole
//! swap in sps; this set answers it with one or two loads: the bits live in
//! 32 KiB pages (one per 2 MiB of pool), found by index in a table.
//!
//! The same bits cover the objects the region allocated (they need no
//! undo: a rollback frees them), marked lazily: an allocation marks
//! nothing; the region's first log of a range not yet covered marks the
//! objects allocated since (`Tx::ready_to_log`), then asks again.
//!
//! Pages are owned through raw pointers ([`Page`]), not `Box`es, so that a
//! page's address can be cached by an array view for the rest of the
//! region ([`LoggedWords::page_ptr`]): a page is never freed or moved
//! before the set is cleared at the region's end, and every access to its
//! bits is a raw-pointer load or store, so marking through the set does not
//! invalidate the cached pointer.
//!
//! Invariants: a bit is set only for a word that lies entirely inside a
//! range the region logged or an object it allocated, so `covered` may answer "no" for bytes that are
//! logged (a word only partly logged: the range is simply logged again), but
//! never "yes" for bytes that are not. The set is volatile; it is emptied at
//! the end of every region (`clear`, in time proportional to what was
//! marked), so it plays no part in crash recovery.

/// Bits per page: one per 8-byte word of 2 MiB of pool.
pub(crate) const PAGE_BITS: u64 = 1 << 18;
/// `u64`s per page.
const PAGE_WORDS: usize = (PAGE_BITS / 64) as usize;
/// Pages kept between regions; a region that marked more gives them back.
const KEEP_PAGES: usize = 64;
/// Marked ranges per allocated page above which `clear` zeroes the pages
/// instead of unmarking range by range (a page is 512 cache lines).
const BULK_CLEAR_PER_PAGE: usize = 1024;

/// One page of bits: `PAGE_WORDS` `u64`s, owned through a raw pointer
/// (from `Box<[u64]>::into_raw`, given back in `Drop`).
struct Page(std::ptr::NonNull<u64>);

impl Page {
    fn new() -> Self {
        let b: &'static mut [u64] = Box::leak(vec![0u64; PAGE_WORDS].into_boxed_slice());
        Page(std::ptr::NonNull::from(b).cast::<u64>())
    }

    /// Bitmap word `i` (`i < PAGE_WORDS`, checked by the callers' index
    /// arithmetic: `i = (w % PAGE_BITS) / 64`).
    #[inline]
    fn get(&self, i: usize) -> u64 {
        debug_assert!(i < PAGE_WORDS);
        // SAFETY: the page holds PAGE_WORDS initialised u64s and i is below
        // that; nothing else holds a reference into it.
        unsafe { *self.0.as_ptr().add(i) }
    }

    #[inline]
    fn set(&mut self, i: usize, v: u64) {
        debug_assert!(i < PAGE_WORDS);
        // SAFETY: as in `get`; a raw store, so pointers cached by array
        // views (raw, read-only) stay valid.
        unsafe { *self.0.as_ptr().add(i) = v }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.0.as_ptr(), PAGE_WORDS);
        // SAFETY: the pointer came from Box::leak of a PAGE_WORDS slice in
        // `new` and is given back once, here.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Words of the pool (by offset) that the running region has logged.
#[derive(Default)]
pub(crate) struct LoggedWords {
    pages: Vec<Option<Page>>,
    /// Pages allocated, to bound what an idle thread keeps.
    allocated: usize,
}

/// The bit for word `w` (pool offset / 8): (page, bitmap word in the page).
#[inline]
pub(crate) fn bit_at(w: u64) -> (usize, usize) {
    ((w / PAGE_BITS) as usize, ((w % PAGE_BITS) / 64) as usize)
}

/// The address of one bitmap page, as a region's fast paths cache it
/// ([`LoggedWords::page_ptr`]): `Tx::log_range` keeps one for the region,
/// an array view one for its array. Answers "covered?" for a range whose
/// words share one bitmap `u64` in that page; "no" for anything else
/// (the caller then asks the set itself).
///
/// Invariant (the holder's): the pointer is used only while the set it
/// came from has not been cleared, i.e. within the region.
#[derive(Clone, Copy)]
pub(crate) struct PageCache {
    page: usize,
    bits: *const u64,
}

impl PageCache {
    /// Caches nothing.
    pub const EMPTY: PageCache = PageCache { page: usize::MAX, bits: std::ptr::null() };

    /// The page of `words` that holds pool offset `off`'s bit, if it exists.
    #[inline]
    pub fn of(words: &LoggedWords, off: u64) -> Option<PageCache> {
        let (page, _) = bit_at(off / 8);
        words.page_ptr(page).map(|bits| PageCache { page, bits })
    }

    /// Whether the cached page marks every word of `[off, off+len)` (so
    /// `LoggedWords::covered` would say yes); false when in doubt.
    #[inline]
    pub fn covered(&self, off: u64, len: u64) -> bool {
        let Some(end) = off.checked_add(len) else { return false };
        if len == 0 {
            return false;
        }
        let (first, last) = (off / 8, (end - 1) / 8);
        if first / 64 != last / 64 {
            return false;
        }
        let (page, word) = bit_at(first);
        if page != self.page {
            return false;
        }
        let mask = (u64::MAX >> (63 - (last - first))) << (first & 63);
        // SAFETY: `page == self.page`, so `bits` is not null: it came from
        // `page_ptr` of a set that is not yet cleared (the holder's
        // invariant), a live page of PAGE_WORDS u64s, and `word` is below
        // that (`bit_at`). A raw load, as the set's own accesses are.
        unsafe { *self.bits.add(word) & mask == mask }
    }
}

/// The words `[first, end)` (word indices) as runs inside one bitmap `u64`:
/// calls `f(page, word in page, mask)` for each.
fn for_each_mask(first: u64, end: u64, mut f: impl FnMut(usize, usize, u64) -> bool) -> bool {
    let mut w = first;
    while w < end {
        let bit = w & 63;
        let n = (end - w).min(64 - bit);
        let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << bit };
        if !f((w / PAGE_BITS) as usize, ((w % PAGE_BITS) / 64) as usize, mask) {
            return false;
        }
        w += n;
    }
    true
}

impl LoggedWords {
    /// Whether every byte of `[off, off+len)` lies in a word marked logged.
    #[inline]
    pub fn covered(&self, off: u64, len: u64) -> bool {
        let Some(end) = off.checked_add(len) else { return false };
        let (first, last) = (off / 8, end.wrapping_sub(1) / 8);
        if len > 0 && first / 64 == last / 64 {
            // The common case: the words share one bitmap word.
            let mask = (u64::MAX >> (63 - (last - first))) << (first & 63);
            let (page, word) = bit_at(first);
            return matches!(self.pages.get(page), Some(Some(p)) if p.get(word) & mask == mask);
        }
        self.covered_slow(off, end)
    }

    /// The bitmap word holding the bit of the word at `off` (0 if its page
    /// is not allocated): a load that brings the word into the cache, for
    /// a caller that is about to ask about many ranges (`Tx::log_ranges`).
    #[inline]
    pub fn peek(&self, off: u64) -> u64 {
        let (page, word) = bit_at(off / 8);
        match self.pages.get(page) {
            Some(Some(p)) => p.get(word),
            _ => 0,
        }
    }

    #[cold]
    fn covered_slow(&self, off: u64, end: u64) -> bool {
        if off == end {
            return true;
        }
        let (first, end) = (off / 8, end.div_ceil(8));
        for_each_mask(first, end, |page, word, mask| matches!(self.pages.get(page), Some(Some(p)) if p.get(word) & mask == mask))
    }

    /// The bitmap word and mask for word indices `[first, end)` when they
    /// share one bitmap `u64` in an existing page (the common case: one
    /// small object or range), else None.
    #[inline]
    fn one_word(&mut self, first: u64, end: u64) -> Option<(&mut Page, usize, u64)> {
        if first >= end || first / 64 != (end - 1) / 64 {
            return None;
        }
        let mask = (u64::MAX >> (63 - (end - 1 - first))) << (first & 63);
        let (page, word) = bit_at(first);
        let page = self.pages.get_mut(page)?.as_mut()?;
        Some((page, word, mask))
    }

    /// The address of the bitmap of page `page` (bit `w % PAGE_BITS` of it
    /// is word `w`'s), if the page exists. Valid until the set is next
    /// cleared (the region's end): pages are never freed or moved before,
    /// and the set writes them only through raw pointers. Read it only with
    /// raw loads.
    #[inline]
    pub fn page_ptr(&self, page: usize) -> Option<*const u64> {
        match self.pages.get(page) {
            Some(Some(p)) => Some(p.0.as_ptr() as *const u64),
            _ => None,
        }
    }

    /// Marks the words that lie entirely inside `[off, off+len)`.
    #[inline]
    pub fn mark(&mut self, off: u64, len: u64) {
        let (first, end) = (off.div_ceil(8), (off + len) / 8);
        if let Some((p, w, mask)) = self.one_word(first, end) {
            p.set(w, p.get(w) | mask);
            return;
        }
        self.mark_slow(first, end);
    }

    #[cold]
    fn mark_slow(&mut self, first: u64, end: u64) {
        let (pages, allocated) = (&mut self.pages, &mut self.allocated);
        for_each_mask(first, end, |page, word, mask| {
            if pages.len() <= page {
                pages.resize_with(page + 1, || None);
            }
            let p = pages[page].get_or_insert_with(|| {
                *allocated += 1;
                Page::new()
            });
            p.set(word, p.get(word) | mask);
            true
        });
    }

    /// Unmarks what `mark(off, len)` marked.
    #[inline]
    pub fn unmark(&mut self, off: u64, len: u64) {
        let (first, end) = (off.div_ceil(8), (off + len) / 8);
        if let Some((p, w, mask)) = self.one_word(first, end) {
            p.set(w, p.get(w) & !mask);
            return;
        }
        let pages = &mut self.pages;
        for_each_mask(first, end, |page, word, mask| {
            if let Some(Some(p)) = pages.get_mut(page) {
                p.set(word, p.get(word) & !mask);
            }
            true
        });
    }

    /// Empties the set, given every range marked since it was last empty.
    /// Keeps its pages for the thread's next region unless there are many.
    pub fn clear(&mut self, marked: impl Iterator<Item = (u64, u64)>) {
        if self.cleared_whole(marked.size_hint().0) {
            return;
        }
        for (off, len) in marked {
            self.unmark(off, len);
        }
    }

    /// Empties the whole set at once if that is cheaper than unmarking
    /// `marks` ranges one by one: it holds too many pages to keep (they go
    /// back), or so many marks per page (a region that freed or allocated a
    /// whole structure) that zeroing the pages (32 KiB each) costs less.
    fn cleared_whole(&mut self, marks: usize) -> bool {
        if self.allocated > KEEP_PAGES {
            *self = LoggedWords::default();
            return true;
        }
        if marks > self.allocated * BULK_CLEAR_PER_PAGE {
            for p in self.pages.iter_mut().flatten() {
                // SAFETY: the page holds PAGE_WORDS u64s (`Page::new`); a raw
                // store, like `Page::set`.
                unsafe { std::ptr::write_bytes(p.0.as_ptr(), 0, PAGE_WORDS) };
            }
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_words_count() {
        let mut s = LoggedWords::default();
        assert!(!s.covered(64, 8));
        s.mark(64, 8);
        assert!(s.covered(64, 8) && s.covered(66, 2));
        assert!(!s.covered(60, 8) && !s.covered(64, 9));
        // a partial word is not marked
        s.mark(100, 6);
        assert!(!s.covered(100, 2));
        // long ranges across bitmap words and pages
        let big = PAGE_BITS * 8 - 1000;
        s.mark(big, 5000);
        assert!(s.covered(big, 5000) && s.covered(big + 1000, 8) && !s.covered(big - 8, 16));
        s.clear([(64, 8), (100, 6), (big, 5000)].into_iter());
        assert!(!s.covered(64, 8) && !s.covered(big + 1000, 8));
        assert!(s.pages.iter().flatten().all(|p| (0..PAGE_WORDS).all(|i| p.get(i) == 0)));
    }

    #[test]
    fn word_marks_and_bulk_clear() {
        let mut s = LoggedWords::default();
        let offs: Vec<u64> = (0..5000u64).map(|i| 4096 + i * 48).collect();
        for &o in &offs {
            assert!(!s.covered(o, 8), "{o} fresh");
            s.mark(o, 8);
        }
        assert!(offs.iter().all(|&o| s.covered(o, 8)));
        assert!(!s.covered(4096 + 8, 8), "only the word itself");
        // 5000 ranges over one page: the bulk path.
        assert!(offs.len() > s.allocated * BULK_CLEAR_PER_PAGE);
        s.clear(offs.iter().map(|&o| (o, 8)));
        assert!(s.pages.iter().flatten().all(|p| (0..PAGE_WORDS).all(|i| p.get(i) == 0)));
        assert!(!s.covered(4096, 8));
    }

    #[test]
    fn matches_a_byte_model() {
        // Random marks against a byte-level model: covered never says yes
        // for a byte that is not inside a marked word.
        let mut s = LoggedWords::default();
        let mut model = vec![false; 4096];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..500 {
            let (off, len) = (next() % 4000, 1 + next() % 90);
            s.mark(off, len);
            for w in off.div_ceil(8)..(off + len) / 8 {
                model[w as usize * 8..w as usize * 8 + 8].fill(true);
            }
            let (qo, ql) = (next() % 4000, 1 + next() % 40);
            let want = (qo..qo + ql).all(|b| model[b as usize]);
            assert_eq!(s.covered(qo, ql), want, "{qo}+{ql}");
        }
    }
}
