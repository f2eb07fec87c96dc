//! Read and write sets for `retry` wake-ups: the paper's 64-bit Bloom
//! filters over variable addresses, and precise address sets to compare
//! against.
//!
//! A [`Bloom64`] sets one bit per address (the top 6 bits of a Fibonacci
//! hash of the word address), so a set of any size fits one word, two sets
//! meet with one AND, and a hardware transaction can build its filter in a
//! register-sized local. False positives (a writer wakes a waiter whose
//! reads it did not touch) cost a re-validation, never a lost wake-up: a
//! filter never has a false negative.
//!
//! A [`Watch`] is what a waiter registers: always the filter (the fast scan
//! test), plus, in precise mode, the sorted addresses, which remove the
//! false positives of the filter.
//!
//! No crash behaviour: volatile.

/// A 64-bit Bloom filter of word addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bloom64(pub u64);

impl Bloom64 {
    /// The bit of `addr` (8-aligned words: the low 3 bits carry nothing).
    #[inline]
    pub fn bit(addr: usize) -> u64 {
        1 << (((addr >> 3) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
    }
    /// Adds `addr`.
    #[inline]
    pub fn add(&mut self, addr: usize) {
        self.0 |= Self::bit(addr);
    }
    /// Whether `addr` may be in the set.
    pub fn may_contain(&self, addr: usize) -> bool {
        self.0 & Self::bit(addr) != 0
    }
    /// Whether the two sets may share an address.
    #[inline]
    pub fn meets(&self, o: &Bloom64) -> bool {
        self.0 & o.0 != 0
    }
    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }
}

/// How waiters watch their read set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchMode {
    /// The 64-bit filter only (the paper).
    Bloom,
    /// The filter to scan, then the exact addresses.
    Precise,
}

impl WatchMode {
    /// Both modes.
    pub const ALL: [WatchMode; 2] = [WatchMode::Bloom, WatchMode::Precise];

    /// The mode's name: `bloom` or `precise`.
    pub fn name(self) -> &'static str {
        match self {
            WatchMode::Bloom => "bloom",
            WatchMode::Precise => "precise",
        }
    }

    /// Parses a [`WatchMode::name`] (case-insensitive).
    pub fn parse(s: &str) -> Option<WatchMode> {
        WatchMode::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// A set of addresses as a waiter or a committer presents it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watch {
    /// The filter of every address.
    pub bloom: Bloom64,
    /// The sorted, deduplicated addresses (precise mode), else `None`.
    pub exact: Option<Vec<usize>>,
}

impl Watch {
    /// A watch over `addrs` in `mode`.
    /// (Bloom mode allocates nothing.)
    pub fn new(mode: WatchMode, addrs: impl IntoIterator<Item = usize>) -> Watch {
        let mut bloom = Bloom64::default();
        let addrs = addrs.into_iter().inspect(|&a| bloom.add(a));
        let exact = match mode {
            WatchMode::Bloom => {
                addrs.for_each(drop);
                None
            }
            WatchMode::Precise => {
                let mut v: Vec<usize> = addrs.collect();
                v.sort_unstable();
                v.dedup();
                Some(v)
            }
        };
        Watch { bloom, exact }
    }
    /// Whether a commit writing `w` may have changed something watched:
    /// the filters meet and, when both sides are exact, the sets do.
    pub fn meets(&self, w: &Watch) -> bool {
        if !self.bloom.meets(&w.bloom) {
            return false;
        }
        match (&self.exact, &w.exact) {
            (Some(a), Some(b)) => sorted_meet(a, b),
            _ => true,
        }
    }
}

fn sorted_meet(a: &[usize], b: &[usize]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_precise_removes_false_positives() {
        let words: Vec<u64> = vec![0; 4096];
        let addr = |i: usize| &words[i] as *const u64 as usize;
        let reads = Watch::new(WatchMode::Bloom, (0..8).map(addr));
        for i in 0..8 {
            assert!(reads.meets(&Watch::new(WatchMode::Bloom, [addr(i)])));
        }
        // Over many single-word writes elsewhere, the filter gives some false
        // positives (8 of 64 bits set), the precise set none.
        let exact = Watch::new(WatchMode::Precise, (0..8).map(addr));
        let (mut fp_bloom, mut fp_exact) = (0, 0);
        for i in 8..4096 {
            let w = Watch::new(WatchMode::Precise, [addr(i)]);
            fp_bloom += usize::from(reads.meets(&w));
            fp_exact += usize::from(exact.meets(&w));
        }
        assert!(fp_bloom > 0 && fp_bloom < 4088 / 2, "{fp_bloom}");
        assert_eq!(fp_exact, 0);
        // Consecutive words spread over the 64 bits.
        let mut b = Bloom64::default();
        (0..64).for_each(|i| b.add(addr(i)));
        assert!(b.0.count_ones() > 30, "{:#x}", b.0);
        assert!(b.may_contain(addr(3)) && !Bloom64::default().meets(&b));
    }
}
