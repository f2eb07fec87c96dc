//! The x86 persistency model (Px86), as a crash-state generator.
//!
//! Rules (Raad et al., POPL 2020, simplified to what a single serialised
//! trace needs):
//! - A store is split into 8-byte-aligned atoms; each atom persists whole or
//!   not at all.
//! - Atoms to one 64-byte line persist in program order: a crash leaves each
//!   line at some *prefix* of its history.
//! - Lines are otherwise independent: any line may persist any time (eviction).
//! - CLWB/CLFLUSHOPT of a line, then a fence (SFENCE, MFENCE, locked RMW):
//!   every atom of that line stored before the flush is persisted once the
//!   fence completes.
//! - CLFLUSH is ordered with all stores: the line's atoms before it are
//!   persisted before the next event executes (a crash right after it may
//!   still find it in flight).
//! - Several threads (a merged trace, `Event::Thread`): stores and flushes
//!   act on lines whatever thread issued them (a flush covers the line's
//!   stores visible before it, from any thread), but a fence completes only
//!   the flushes of its own thread. A CLFLUSH completes before the next
//!   event of the merged trace, whichever thread issued it (slightly
//!   stronger than the hardware, which lets other threads run meanwhile).
//!
//! What it keeps true: `durable` is the image every crash from now on
//! includes (the base plus every atom known persisted); each line's `tail`
//! holds the atoms that may or may not have persisted, oldest first. A crash
//! state is `durable` plus, per line, any prefix of its tail.

use crate::trace::{Event, FlushKind};
use std::collections::BTreeMap;

/// Cache-line size.
pub const LINE: u64 = 64;

/// An 8-byte-atomic piece of a store (never crosses an aligned 8-byte word).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Atom {
    /// Offset of the first byte.
    pub addr: u64,
    /// 1 to 8 bytes.
    pub data: Vec<u8>,
    /// Index in the trace of the event that stored it (0 from [`atoms`]).
    pub event: usize,
}

#[derive(Clone, Debug, Default)]
struct Line {
    /// Atoms not known to be persisted, oldest first.
    tail: Vec<Atom>,
    /// Atoms already folded into `durable` (so absolute index = folded + i).
    folded: usize,
}

/// The model's state while a trace is replayed.
#[derive(Clone, Debug)]
pub struct Px86 {
    durable: Vec<u8>,
    lines: BTreeMap<u64, Line>,
    /// (thread, line, absolute history length at the flush) awaiting a
    /// fence of that thread.
    pending: Vec<(u32, u64, usize)>,
    /// The thread issuing the current events.
    thread: u32,
    /// CLFLUSHes in flight: persisted before the next event executes.
    strong: Vec<(u64, usize)>,
    /// Events applied so far (the index of the next one).
    applied: usize,
}

/// What a crash at one point may leave: `durable` plus, for each listed
/// line, a prefix of its tail.
#[derive(Clone, Debug)]
pub struct CrashState<'a> {
    /// Bytes every possible image contains.
    pub durable: &'a [u8],
    /// Lines with atoms that may or may not have persisted.
    pub lines: Vec<(u64, &'a [Atom])>,
}

/// Splits a store into atoms at 8-byte boundaries.
pub fn atoms(addr: u64, data: &[u8]) -> Vec<Atom> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let a = addr + at as u64;
        let room = (8 - (a % 8)) as usize;
        let n = room.min(data.len() - at);
        out.push(Atom { addr: a, data: data[at..at + n].to_vec(), event: 0 });
        at += n;
    }
    out
}

fn write(img: &mut Vec<u8>, a: &Atom) {
    let end = a.addr as usize + a.data.len();
    if img.len() < end {
        img.resize(end, 0);
    }
    img[a.addr as usize..end].copy_from_slice(&a.data);
}

impl Px86 {
    /// A model whose memory starts as `base`, all of it persisted.
    pub fn new(base: Vec<u8>) -> Self {
        Px86 { durable: base, lines: BTreeMap::new(), pending: Vec::new(), thread: 0, strong: Vec::new(), applied: 0 }
    }

    /// Applies one event.
    pub fn apply(&mut self, e: &Event) {
        // A CLFLUSH completes before anything after it executes.
        for (line, upto) in std::mem::take(&mut self.strong) {
            self.fold(line, upto);
        }
        match e {
            Event::Store { addr, data } => self.store(*addr, data),
            Event::Flush { addr, kind } => {
                let line = addr / LINE * LINE;
                let l = self.lines.entry(line).or_default();
                let upto = l.folded + l.tail.len();
                if *kind == FlushKind::Clflush {
                    self.strong.push((line, upto));
                } else {
                    self.pending.push((self.thread, line, upto));
                }
            }
            Event::Fence { .. } => self.fence(),
            Event::Rmw { addr, data } => {
                // A locked RMW orders like MFENCE; its own store is not
                // persisted by it.
                self.fence();
                self.store(*addr, data);
            }
            Event::Extend { len } => {
                if (self.durable.len() as u64) < *len {
                    self.durable.resize(*len as usize, 0);
                }
            }
            Event::Thread { id } => self.thread = *id,
            Event::Acquire { .. } | Event::Release { .. } | Event::SeqPoint { .. } => {}
        }
        self.applied += 1;
    }

    fn store(&mut self, addr: u64, data: &[u8]) {
        for mut a in atoms(addr, data) {
            a.event = self.applied;
            self.lines.entry(a.addr / LINE * LINE).or_default().tail.push(a);
        }
    }

    /// Lines flushed (CLWB/CLFLUSHOPT) since the last fence, oldest flush
    /// first, each once, that still hold atoms the flush covers. In a
    /// correct protocol they are what the next fence orders; when a fence
    /// is missing, the oldest of them belong to the step before it.
    ///
    /// Each comes with how many atoms of the line's tail its latest flush
    /// covers.
    pub fn pending_flushes(&self) -> Vec<(u64, usize)> {
        let mut out: Vec<(u64, usize)> = Vec::new();
        for &(_, line, upto) in &self.pending {
            let Some(l) = self.lines.get(&line) else { continue };
            let covered = upto.saturating_sub(l.folded).min(l.tail.len());
            if covered == 0 {
                continue;
            }
            match out.iter_mut().find(|(x, _)| *x == line) {
                Some(e) => e.1 = e.1.max(covered),
                None => out.push((line, covered)),
            }
        }
        out
    }

    /// Whether a CLFLUSH is in flight: the next event makes its line durable.
    pub fn clflush_in_flight(&self) -> bool {
        !self.strong.is_empty()
    }

    /// Completes the current thread's flushes (another thread's SFENCE
    /// does not order this one's CLWBs).
    fn fence(&mut self) {
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending).into_iter().partition(|p| p.0 == self.thread);
        self.pending = others;
        for (_, line, upto) in mine {
            self.fold(line, upto);
        }
    }

    /// Persists the line's atoms with absolute index < `upto`.
    fn fold(&mut self, line: u64, upto: usize) {
        let Some(l) = self.lines.get_mut(&line) else { return };
        let k = upto.saturating_sub(l.folded).min(l.tail.len());
        for a in l.tail.drain(..k) {
            write(&mut self.durable, &a);
        }
        l.folded += k;
        if l.tail.is_empty() {
            self.lines.remove(&line);
        }
    }

    /// The crash state at this point.
    pub fn crash_state(&self) -> CrashState<'_> {
        CrashState { durable: &self.durable, lines: self.lines.iter().map(|(&k, l)| (k, l.tail.as_slice())).collect() }
    }

    /// The image if every store so far persisted (what the program sees).
    pub fn visible(&self) -> Vec<u8> {
        let mut img = self.durable.clone();
        for l in self.lines.values() {
            for a in &l.tail {
                write(&mut img, a);
            }
        }
        img
    }
}

impl CrashState<'_> {
    /// Number of distinct choices (product of tail lengths + 1), saturating.
    pub fn count(&self) -> u128 {
        self.lines.iter().fold(1u128, |acc, (_, t)| acc.saturating_mul(t.len() as u128 + 1))
    }

    /// The image for one choice: line `i` keeps `prefix[i]` atoms of its tail.
    pub fn image(&self, prefix: &[usize]) -> Vec<u8> {
        let mut img = self.durable.to_vec();
        for ((_, tail), &p) in self.lines.iter().zip(prefix) {
            for a in &tail[..p.min(tail.len())] {
                write(&mut img, a);
            }
        }
        img
    }

    /// [`CrashState::image`] into `img`, which must hold `durable` or an
    /// earlier image of this same state: only the listed lines differ, so
    /// only they are restored and rewritten (a big pool's images cost their
    /// few changed lines, not a copy of the whole pool each).
    pub fn image_over(&self, prefix: &[usize], img: &mut Vec<u8>) {
        img.truncate(self.durable.len());
        for &(line, _) in &self.lines {
            let (s, e) = (line as usize, (line + LINE) as usize);
            let e = e.min(self.durable.len());
            if s < e {
                img[s..e].copy_from_slice(&self.durable[s..e]);
            }
        }
        for ((_, tail), &p) in self.lines.iter().zip(prefix) {
            for a in &tail[..p.min(tail.len())] {
                write(img, a);
            }
        }
    }

    /// Every possible image (exponential: for small states only).
    pub fn all_images(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut prefix = vec![0usize; self.lines.len()];
        loop {
            out.push(self.image(&prefix));
            if !next_prefix(&mut prefix, &self.lines) {
                return out;
            }
        }
    }
}

/// Advances a mixed-radix counter; false when it wraps.
pub(crate) fn next_prefix(prefix: &mut [usize], lines: &[(u64, &[Atom])]) -> bool {
    for (p, (_, tail)) in prefix.iter_mut().zip(lines) {
        if *p < tail.len() {
            *p += 1;
            return true;
        }
        *p = 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoms_split_at_words() {
        let a = atoms(6, &[1, 2, 3, 4, 5]);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0], Atom { addr: 6, data: vec![1, 2], event: 0 });
        assert_eq!(a[1], Atom { addr: 8, data: vec![3, 4, 5], event: 0 });
    }

    /// Rewriting one buffer image after image gives the images `image`
    /// builds afresh, in any order, also past the durable length.
    #[test]
    fn image_over_matches_image() {
        use crate::trace::Event;
        let mut m = Px86::new(vec![9; 256]);
        m.apply(&Event::Store { addr: 0, data: vec![1; 16] });
        m.apply(&Event::Store { addr: 8, data: vec![2; 8] });
        m.apply(&Event::Store { addr: 130, data: vec![3; 12] });
        m.apply(&Event::Extend { len: 320 });
        m.apply(&Event::Store { addr: 300, data: vec![4; 8] });
        let st = m.crash_state();
        let mut prefixes = Vec::new();
        let mut p = vec![0; st.lines.len()];
        loop {
            prefixes.push(p.clone());
            if !next_prefix(&mut p, &st.lines) {
                break;
            }
        }
        assert!(prefixes.len() > 4);
        let mut img = st.durable.to_vec();
        for p in prefixes.iter().chain(prefixes.iter().rev()) {
            st.image_over(p, &mut img);
            assert_eq!(img, st.image(p), "{p:?}");
        }
    }
}
