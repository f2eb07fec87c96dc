//! The region's double-free set: which payloads the running region has
//! freed, so `Tx::free` refuses a second free of one with
//! `Error::DoubleFree` (and checked mode refuses a pointer to one).
//!
//! One bit per 16 bytes of pool (payloads are 16-aligned), in bitmap words
//! that each carry the number of the region that last wrote them: a word
//! whose number is not the running region's reads as all zero. Emptying
//! the set at the region's end is then one increment ([`FreedSet::clear`])
//! instead of unmarking every freed object again (about 16 instructions
//! per free before, a tenth of `free`'s whole cost in binary-trees).
//! The words live in 32 KiB pages (one per 2 MiB of pool), found by
//! index in a table, allocated on first use and kept for the thread's
//! next regions (up to [`KEEP_PAGES`]).
//!
//! Invariants: a bit reads as set only if the running region marked it
//! (`test_and_mark`) since the last `clear`; so `contains` never answers
//! "freed" for an object the region did not free, and a slot freed by an
//! earlier region, handed out again and freed again is not refused.
//! Volatile and per thread: it plays no part in crash recovery.

/// Bitmap words per page: one bit per 16 bytes of 2 MiB of pool.
const PAGE_WORDS: usize = (1 << 21) / 16 / 64;
/// Pages kept between regions; a region that used more gives them back.
const KEEP_PAGES: usize = 64;

/// One bitmap word and the region that last wrote it.
#[derive(Clone, Copy, Default)]
struct Word {
    /// The [`FreedSet::epoch`] the bits belong to; 0 = never written.
    epoch: u64,
    bits: u64,
}

/// One page: the words of 2 MiB of pool.
type Page = [Word; PAGE_WORDS];

/// The payloads the running region frees (by pool offset).
pub(crate) struct FreedSet {
    pages: Vec<Option<Box<Page>>>,
    /// Pages allocated, to bound what an idle thread keeps.
    allocated: usize,
    /// The running region's number: bits of words with another are stale.
    epoch: u64,
}

impl Default for FreedSet {
    fn default() -> Self {
        FreedSet { pages: Vec::new(), allocated: 0, epoch: 1 }
    }
}

/// (page, word in the page, bit) of pool offset `off`. The word index is
/// masked, so indexing a [`Page`] with it needs no bounds check.
#[inline]
fn place(off: u64) -> (usize, usize, u64) {
    let unit = off / 16;
    ((unit / (PAGE_WORDS as u64 * 64)) as usize, (unit / 64) as usize & (PAGE_WORDS - 1), 1 << (unit % 64))
}
const _: () = assert!(PAGE_WORDS.is_power_of_two());

impl FreedSet {
    /// Marks the payload at pool offset `off` (16-aligned) freed; returns
    /// whether the running region had marked it already.
    #[inline]
    pub fn test_and_mark(&mut self, off: u64) -> bool {
        debug_assert!(off % 16 == 0);
        let (page, word, bit) = place(off);
        let epoch = self.epoch;
        let Some(Some(p)) = self.pages.get_mut(page) else { return self.mark_in_new_page(page, word, bit) };
        let w = &mut p[word];
        if w.epoch != epoch {
            *w = Word { epoch, bits: 0 };
        }
        let was = w.bits & bit != 0;
        w.bits |= bit;
        was
    }

    /// [`FreedSet::test_and_mark`] when the page does not exist yet.
    #[cold]
    fn mark_in_new_page(&mut self, page: usize, word: usize, bit: u64) -> bool {
        if self.pages.len() <= page {
            self.pages.resize_with(page + 1, || None);
        }
        let p = self.pages[page].get_or_insert_with(|| Box::new([Word::default(); PAGE_WORDS]));
        self.allocated += 1;
        p[word] = Word { epoch: self.epoch, bits: bit };
        false
    }

    /// Whether the running region marked the payload at pool offset `off`.
    #[inline]
    pub fn contains(&self, off: u64) -> bool {
        if off % 16 != 0 {
            return false;
        }
        let (page, word, bit) = place(off);
        matches!(self.pages.get(page), Some(Some(p)) if p[word].epoch == self.epoch && p[word].bits & bit != 0)
    }

    /// Empties the set (the region ended): every word becomes stale at once.
    /// A set that grew past [`KEEP_PAGES`] gives its pages back.
    #[inline]
    pub fn clear(&mut self) {
        if self.allocated > KEEP_PAGES {
            *self = FreedSet::default();
            return;
        }
        if crate::failpoint::planted("tx.freed_set_kept") {
            return;
        }
        // 2^64 regions never wrap it.
        self.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_seen_until_the_set_is_cleared_and_never_after() {
        let mut s = FreedSet::default();
        let offs: Vec<u64> = (0..5000u64).map(|i| 4096 + i * 48).collect();
        for &o in &offs {
            assert!(!s.test_and_mark(o), "{o} fresh");
        }
        assert!(offs.iter().all(|&o| s.contains(o) && s.test_and_mark(o)), "marked, and a second mark is seen");
        assert!(!s.contains(4096 + 16) && !s.contains(4096 + 8), "only the payload itself, never a misaligned offset");
        s.clear();
        assert!(offs.iter().all(|&o| !s.contains(o)), "a cleared set holds nothing");
        assert!(!s.test_and_mark(4096 + 48), "a slot freed again in the next region is fresh");
        assert!(!s.contains(4096) && s.contains(4096 + 48), "the word's other bits are stale, the new one is set");
    }

    #[test]
    fn far_apart_offsets_get_their_own_pages_and_a_big_set_gives_them_back() {
        let mut s = FreedSet::default();
        let far: Vec<u64> = (0..=KEEP_PAGES as u64).map(|i| i * (2 << 20) + 64).collect();
        for &o in &far {
            assert!(!s.test_and_mark(o));
        }
        assert_eq!(s.allocated, KEEP_PAGES + 1);
        assert!(far.iter().all(|&o| s.contains(o)));
        s.clear();
        assert_eq!((s.allocated, s.pages.len()), (0, 0), "over the budget: the pages go back");
        assert!(!s.test_and_mark(far[3]));
    }
}
