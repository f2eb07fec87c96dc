//! A fixed-size bit set over atom indices, used for persist-memory-order
//! predecessor sets (every set the models build is down-closed, so union is
//! the only combinator they need).

/// A set of indices `0..len`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    /// The empty set over `len` indices.
    pub fn new(len: usize) -> Self {
        BitSet { words: vec![0; len.div_ceil(64)] }
    }

    /// Adds `i` (grows if needed).
    pub fn insert(&mut self, i: usize) {
        let w = i / 64;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (i % 64);
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// `self ∪= other`.
    pub fn union_with(&mut self, other: &BitSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Whether every element of `self` is in `other`.
    pub fn is_subset(&self, other: &BitSet) -> bool {
        self.words.iter().enumerate().all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The elements in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| (0..64).filter(move |b| w & (1 << b) != 0).map(move |b| i * 64 + b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_union_subset() {
        let mut a = BitSet::new(10);
        a.insert(3);
        a.insert(70);
        let mut b = BitSet::new(100);
        b.insert(3);
        assert!(b.is_subset(&a));
        assert!(!a.is_subset(&b));
        b.union_with(&a);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![3, 70]);
        assert_eq!(b.len(), 2);
    }
}
