//! Fresh objects awaiting write-back: the cache lines of new objects that a
//! committed region left unflushed, because nothing durable could reach them
//! yet.
//!
//! A region that logged nothing (no undo entry, no redo entry: it changed no
//! object that existed before it and no root) can only have allocated and
//! filled new objects and freed old ones. No committed pointer leads to its
//! new objects, so a crash right after its commit loses nothing: recovery's
//! collection frees them, written back or not (DESIGN, "an object that was
//! allocated but never linked from a root is garbage after a crash"). Such a
//! region commits without writing its objects back (`Tx::commit`, step 1');
//! it lists their lines here instead. They become reachable only through a
//! later logged store (into an existing object or a root entry) of some
//! region, on any thread, and every such region fences before its commit
//! point. So the write-back rides on the *next fence of any thread* on the
//! pool, as the pending generation bumps do (`bumps.rs`):
//! [`crate::pmem::Persister::fence`] calls [`PendingFresh::flush_listed`]
//! first, which writes every listed line back on the fencing thread (the
//! flush named "fresh objects of earlier regions"), and [`Listed::retire`]
//! once its own fence has completed. A binary-trees build region thus
//! issues no flush and no fence; the lines are written back once, by
//! whichever later fence comes first (at the latest the clean close's).
//!
//! Invariants:
//! - A line is listed from the listing region's commit until a fence that
//!   wrote it back has completed: the set is cleared only after the fence
//!   that follows its write-back, and its lock is held from the first
//!   write-back to the clear, so a thread that finds the set empty (the
//!   `any` flag clear, or no line listed under the lock) knows every line
//!   listed before is durable. (Were it cleared before that fence, another
//!   thread could find it empty and commit a link to lines still in
//!   flight.)
//! - `any` is set under the lock after the lines are listed, and cleared
//!   under it after the fence: a fence that reads it clear (acquire) after a
//!   listing region returned sees that region's lines durable.
//! - The set is one bit per 64-byte line of the pool, on pages of 4 KiB
//!   (2 MiB of pool each) allocated on first use: a line listed again (its
//!   slot freed and reused) costs nothing more, so the set is bounded by the
//!   pool, not by how many regions committed. Flushing a line that was
//!   freed, reused or never written since is harmless (a write-back does not
//!   change memory).
//! - The thread that fences writes the lines back itself: a fence orders
//!   only its own thread's write-backs (the Px86 model the crash explorer
//!   checks against).
//!
//! Crash behaviour: none of this is persistent. A crash with lines listed
//! loses only objects no committed region linked; recovery's collection
//! frees them.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Pool bytes one bitmap page covers (`PAGE_WORDS` words of 64 lines).
const PAGE_SHIFT: u32 = 21;
const LINE: u64 = 64;
const PAGE_WORDS: usize = (1 << PAGE_SHIFT) / LINE as usize / 64;

/// The lines of a pool's fresh objects not yet written back (one set per
/// open pool, shared by the clones of its persister).
#[derive(Debug, Default)]
pub(crate) struct PendingFresh {
    /// Whether any line may be listed (see the module docs).
    any: AtomicBool,
    lines: Mutex<Lines>,
}

/// The bitmap: bit `i` of word `w` of page `p` is the line at pool offset
/// `(p << PAGE_SHIFT) + (w * 64 + i) * LINE`.
#[derive(Debug, Default)]
struct Lines {
    /// Absolute address of pool offset 0 (the reservation never moves).
    base: u64,
    pages: Vec<Option<Box<[u64; PAGE_WORDS]>>>,
    /// Per page: whether it is in `touched`.
    listed: Vec<bool>,
    /// Pages with a bit set, each once.
    touched: Vec<usize>,
}

/// Lines per bitmap page, as a shift.
const LINES_SHIFT: u32 = PAGE_SHIFT - 6;

impl Lines {
    /// Lists the lines of `[off, off+len)` (pool offsets).
    fn mark(&mut self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (first, last) = ((off / LINE) as usize, ((off + len - 1) / LINE) as usize);
        let mut line = first;
        while line <= last {
            let p = line >> LINES_SHIFT;
            let page_end = ((p + 1) << LINES_SHIFT) - 1;
            let page = self.page(p);
            for l in line..=last.min(page_end) {
                page[(l >> 6) & (PAGE_WORDS - 1)] |= 1 << (l & 63);
            }
            line = page_end + 1;
        }
    }

    /// Page `p`, allocated (and noted as touched) on first use.
    fn page(&mut self, p: usize) -> &mut [u64; PAGE_WORDS] {
        if self.pages.len() <= p {
            self.pages.resize_with(p + 1, || None);
            self.listed.resize(p + 1, false);
        }
        if !self.listed[p] {
            self.listed[p] = true;
            self.touched.push(p);
        }
        self.pages[p].get_or_insert_with(|| Box::new([0; PAGE_WORDS]))
    }

    /// Calls `flush(addr, len)` for every run of listed lines.
    fn each_run(&self, mut flush: impl FnMut(u64, u64)) {
        for &p in &self.touched {
            let Some(page) = &self.pages[p] else { continue };
            for (w, &word) in page.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let start = bits.trailing_zeros();
                    let run = (!(bits >> start)).trailing_zeros().min(64 - start);
                    let line = ((p as u64) << LINES_SHIFT) + w as u64 * 64 + start as u64;
                    flush(self.base + line * LINE, run as u64 * LINE);
                    bits &= !(u64::MAX >> (64 - run) << start);
                }
            }
        }
    }

    /// Unlists every line.
    fn clear(&mut self) {
        for &p in &self.touched {
            if let Some(page) = &mut self.pages[p] {
                page.fill(0);
            }
            self.listed[p] = false;
        }
        self.touched.clear();
    }
}

impl PendingFresh {
    /// Lists the lines of `ranges` (pool offsets and lengths of new objects
    /// of a pool mapped at `base`) for the next fence of any thread.
    pub fn defer(&self, base: u64, ranges: &[(u64, u64)]) {
        let mut lines = self.lines.lock();
        lines.base = base;
        for &(off, len) in ranges {
            lines.mark(off, len);
        }
        self.any.store(true, Ordering::Release);
    }

    /// Whether a line may be listed (one load: the fence's fast path).
    #[inline]
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// If a line is listed: writes every listed line back with
    /// `flush(addr, len)` and returns the set, still locked; the caller
    /// fences, then [`Listed::retire`]s it (see the module docs). Dropped
    /// without `retire` (the fence failed), the lines stay listed.
    #[inline]
    pub fn flush_listed(&self, flush: impl FnMut(u64, u64)) -> Option<Listed<'_>> {
        if !self.any() {
            return None;
        }
        let lines = self.lines.lock();
        if lines.touched.is_empty() {
            return None;
        }
        lines.each_run(flush);
        Some(Listed { lines, any: &self.any })
    }
}

/// The listed lines, written back and awaiting their fence; the set stays
/// locked until [`Listed::retire`] or drop.
pub(crate) struct Listed<'a> {
    lines: parking_lot::MutexGuard<'a, Lines>,
    any: &'a AtomicBool,
}

impl Listed<'_> {
    /// Unlists every line: the caller's fence after their write-back returned.
    pub fn retire(mut self) {
        self.lines.clear();
        self.any.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(f: &PendingFresh) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if let Some(l) = f.flush_listed(|a, l| out.push((a, l))) {
            l.retire();
        }
        out
    }

    /// Lines are listed once however often they are deferred, come back as
    /// maximal runs within a bitmap word, and are gone after a retire.
    #[test]
    fn lines_are_listed_once_and_written_back_in_runs() {
        let f = PendingFresh::default();
        assert!(!f.any());
        f.defer(0x1000_0000, &[(0x40, 32), (0x60, 32), (0x80, 1), (0x100, 0x40 * 70), (0x40_0000, 16)]);
        f.defer(0x1000_0000, &[(0x50, 8)]);
        assert!(f.any());
        let mut got = runs(&f);
        got.sort();
        let want = vec![
            (0x1000_0040, 0x80),                  // lines 1 and 2
            (0x1000_0100, 0x40 * 60),             // lines 4..64 of word 0
            (0x1000_0100 + 0x40 * 60, 0x40 * 10), // word 1
            (0x1040_0000, 0x40),                  // page 2
        ];
        assert_eq!(got, want);
        assert!(!f.any());
        assert!(runs(&f).is_empty(), "a second write-back found lines");
        f.defer(0x1000_0000, &[(0x40_0000, 16)]);
        assert_eq!(runs(&f), vec![(0x1040_0000, 0x40)], "a page reused after a clear");
    }

    /// Stress: threads each list a line of their own and then "fence"
    /// (write back what is listed, recording each line as durable, then
    /// retire). When a thread's fence returns, its own line must be durable,
    /// written back by itself or by whichever thread took it: a set
    /// unlisted before its write-back had completed would let a thread find
    /// it empty while another thread's write-back of its line was still in
    /// flight.
    #[test]
    fn a_fence_returns_only_once_every_line_listed_before_it_is_durable() {
        use std::collections::HashSet;
        let f = PendingFresh::default();
        let durable = parking_lot::Mutex::new(HashSet::new());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (f, durable) = (&f, &durable);
                s.spawn(move || {
                    for k in 0..2_000u64 {
                        let off = (t << 30) + k * LINE;
                        f.defer(0, &[(off, 1)]);
                        // let another thread's fence take the line
                        std::thread::yield_now();
                        if let Some(l) = f.flush_listed(|a, n| {
                            // a write-back takes time: let other threads in
                            std::thread::yield_now();
                            let mut d = durable.lock();
                            for line in (a..a + n).step_by(LINE as usize) {
                                d.insert(line);
                            }
                        }) {
                            l.retire();
                        }
                        assert!(durable.lock().contains(&off), "thread {t}: line {off:#x} not durable after its fence");
                    }
                });
            }
        });
    }

    /// Lines written back but not retired (the fence failed) stay listed,
    /// and a thread that asks meanwhile waits for the lock, not for nothing.
    #[test]
    fn lines_stay_listed_until_retired() {
        let f = PendingFresh::default();
        f.defer(0, &[(0, 64)]);
        drop(f.flush_listed(|_, _| {}));
        assert!(f.any());
        let l = f.flush_listed(|_, _| {}).unwrap();
        std::thread::scope(|s| {
            let t = s.spawn(|| runs(&f));
            std::thread::sleep(std::time::Duration::from_millis(20));
            l.retire();
            assert!(t.join().unwrap().is_empty(), "a second thread wrote back lines already retired");
        });
    }
}
