//! An update transaction's volatile write-set: (offset, value) entries in
//! store order, one per offset, found by a linear scan while few and by
//! an open-addressing index beyond [`LINEAR`].
//!
//! Keeps true: [`WriteSet::get`] returns the last value [`WriteSet::put`]
//! stored at an offset since [`WriteSet::clear`]; the index, when built,
//! maps every offset of `entries` to its position (plus one; 0: empty).

/// Entries searched linearly.
const LINEAR: usize = 16;

/// The write-set.
#[derive(Default)]
pub struct WriteSet {
    entries: Vec<(u64, u64)>,
    index: Vec<u32>,
}

impl WriteSet {
    fn slot(&self, off: u64) -> usize {
        let bits = self.index.len().trailing_zeros();
        (off.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// The position of `off`'s entry.
    #[inline]
    fn find(&self, off: u64) -> Result<usize, usize> {
        if self.index.is_empty() {
            return self.entries.iter().rposition(|e| e.0 == off).ok_or(0);
        }
        let mask = self.index.len() - 1;
        let mut i = self.slot(off);
        loop {
            match self.index[i] {
                0 => return Err(i),
                p if self.entries[p as usize - 1].0 == off => return Ok(p as usize - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The value stored at `off`, if any.
    #[inline]
    pub fn get(&self, off: u64) -> Option<u64> {
        if self.entries.is_empty() {
            return None;
        }
        self.find(off).ok().map(|p| self.entries[p].1)
    }

    /// Records a store of `v` at `off`.
    #[inline]
    pub fn put(&mut self, off: u64, v: u64) {
        match self.find(off) {
            Ok(p) => self.entries[p].1 = v,
            Err(i) => {
                self.entries.push((off, v));
                if !self.index.is_empty() && 2 * self.entries.len() <= self.index.len() {
                    self.index[i] = self.entries.len() as u32;
                } else if self.entries.len() > LINEAR {
                    self.reindex();
                }
            }
        }
    }

    /// Rebuilds the index at twice the entries' count, at least.
    fn reindex(&mut self) {
        self.index.clear();
        self.index.resize((4 * self.entries.len()).next_power_of_two(), 0);
        let mask = self.index.len() - 1;
        for p in 0..self.entries.len() {
            let mut i = self.slot(self.entries[p].0);
            while self.index[i] != 0 {
                i = (i + 1) & mask;
            }
            self.index[i] = p as u32 + 1;
        }
    }

    /// Empties it.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.index.clear();
    }

    /// The entries, in store order.
    pub fn entries(&self) -> &[(u64, u64)] {
        &self.entries
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
