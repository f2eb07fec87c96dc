//! Recording a pool's persistent-memory events for the crash explorer.
//!
//! In `Trace` durability mode the persistence seam reports every flush and
//! fence here, and `Space` reports the stores it makes. Stores made through
//! raw pointers (region data, front ends writing mapped memory directly) are
//! caught by comparison: the tracer keeps a shadow copy of the pool, and
//! before each flush it compares the flushed line, and at each fence the
//! whole mapped pool, with the shadow; every changed 8-byte word becomes a
//! store in the trace. So no store escapes, and a raw store is ordered
//! correctly against the flushes and fences around it; only the order of
//! several raw stores to one line between two events is approximated
//! (address order).
//!
//! Several threads may report to one tracer: their events are merged in the
//! order they reach it (under its lock, so the order of a flush or fence
//! against the stores it covers is the order they became visible), with an
//! `Event::Thread` wherever the reporting thread changes, because a fence
//! completes only its own thread's flushes. Stores found by comparison are
//! recorded where they are found, whichever thread made them: for the
//! model only their order within a line matters.
//!
//! Recording is for tests and `engram crashtest`: it costs a comparison of
//! the mapped pool per fence, so keep traced pools small.

pub use engram_model::FlushKind;
use engram_model::{Event, Trace};
use parking_lot::Mutex;
use std::sync::Arc;

const LINE: u64 = 64;

/// Collects a [`Trace`] from a pool opened in `Trace` mode.
#[derive(Debug, Default)]
pub struct Tracer {
    st: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Address of the pool's first byte (0 until attached).
    base: u64,
    /// Bytes mapped.
    len: u64,
    recording: bool,
    start_on_attach: bool,
    /// Records every flush as this instruction instead of the one the
    /// persister would use (tests of each kind on any CPU).
    force_kind: Option<FlushKind>,
    /// What the trace so far says memory holds.
    shadow: Vec<u8>,
    trace: Trace,
    /// Threads seen while recording (index = id in `Event::Thread`); the
    /// first is 0, the model's default.
    threads: Vec<std::thread::ThreadId>,
    /// The thread whose events are being recorded now.
    current: u32,
    /// Lines some recorded store wrote to. A flush of any other line is
    /// left out of the trace: the line still holds what the base (or an
    /// `Extend`, zero) says, so writing it back changes no crash image.
    /// (Committing a huge object flushes its whole 64 MiB, nearly all
    /// untouched zeros: a million flush events the model need not see.)
    touched: std::collections::HashSet<u64>,
}

// Every method leaves the state consistent before it can unwind.
impl std::panic::UnwindSafe for Tracer {}
impl std::panic::RefUnwindSafe for Tracer {}

impl Tracer {
    /// A tracer, not recording yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Tracer::default())
    }

    /// A tracer that starts recording the moment a pool is mapped (to trace
    /// an open, with its recovery, from the file's content).
    pub fn starting_on_attach() -> Arc<Self> {
        let t = Tracer::default();
        t.st.lock().start_on_attach = true;
        Arc::new(t)
    }

    /// Records every flush as `kind`, whatever this CPU offers: the
    /// explorer can then be run for CLWB, CLFLUSHOPT and CLFLUSH machines
    /// alike. Call before the traced pool is created or opened.
    pub fn force_flush_kind(&self, kind: FlushKind) {
        self.st.lock().force_kind = Some(kind);
    }

    /// Called when the pool is mapped at `base` with `len` bytes.
    pub(crate) fn attach(&self, base: u64, len: u64) {
        let mut st = self.st.lock();
        st.base = base;
        st.len = len;
        if st.start_on_attach {
            st.start_on_attach = false;
            Self::begin(&mut st);
        }
    }

    /// Starts recording: the pool's current content becomes the trace's base.
    /// Before a pool is attached (or after it detached), recording starts
    /// when the next pool is attached, as with [`Tracer::starting_on_attach`].
    pub fn start(&self) {
        let mut st = self.st.lock();
        if st.base == 0 {
            st.start_on_attach = true;
        } else {
            Self::begin(&mut st);
        }
    }

    /// Takes the attached pool's content as the trace's base.
    fn begin(st: &mut State) {
        debug_assert!(st.base != 0, "begin without an attached pool");
        if st.base == 0 {
            return;
        }
        // SAFETY: base != 0, so attach was called and detach was not since:
        // [base, base+len) is the pool's live mapping (the pool detaches us
        // before it unmaps).
        let now = unsafe { std::slice::from_raw_parts(st.base as *const u8, st.len as usize) }.to_vec();
        st.trace = Trace::new(now.clone());
        st.shadow = now;
        st.recording = true;
        st.threads = vec![std::thread::current().id()];
        st.current = 0;
        st.touched.clear();
    }

    /// Records a `Thread` event if the calling thread is not the one whose
    /// events were recorded last (the merged trace of several threads).
    fn switch(st: &mut State) {
        let me = std::thread::current().id();
        let id = match st.threads.iter().position(|&t| t == me) {
            Some(i) => i as u32,
            None => {
                st.threads.push(me);
                st.threads.len() as u32 - 1
            }
        };
        if id != st.current {
            st.current = id;
            st.trace.push(Event::Thread { id });
        }
    }

    /// The number of events recorded so far (0 when not recording): a
    /// crash before event `position()` or later happens after whatever the
    /// caller just finished.
    pub fn position(&self) -> usize {
        let st = self.st.lock();
        if st.recording {
            st.trace.events.len()
        } else {
            0
        }
    }

    /// The names of the fences recorded so far, each once, in the order
    /// first seen (the double-crash explorer asks it of a traced open: had
    /// recovery any work to do? see `fences::is_recovery`).
    pub fn fences(&self) -> Vec<&'static str> {
        let st = self.st.lock();
        let mut out: Vec<&'static str> = Vec::new();
        for e in &st.trace.events {
            if let Event::Fence { what } = e {
                if !out.contains(what) {
                    out.push(what);
                }
            }
        }
        out
    }

    /// Stops recording and returns the trace. Stores made since the last
    /// event are included as unflushed stores.
    pub fn stop(&self) -> Trace {
        let mut st = self.st.lock();
        // (after `detach` base is 0 and everything was recorded already)
        if st.recording && st.base != 0 {
            let len = st.len;
            Self::diff(&mut st, 0, len);
        }
        st.recording = false;
        std::mem::take(&mut st.trace)
    }

    /// The pool is being unmapped: records what is pending, then forgets
    /// the mapping.
    pub(crate) fn detach(&self) {
        let mut st = self.st.lock();
        if st.recording && st.base != 0 {
            let len = st.len;
            Self::diff(&mut st, 0, len);
        }
        st.base = 0;
        st.len = 0;
    }

    /// Before an explicit store to `[addr, addr+len)`: picks up raw stores
    /// to those lines first, so the order within each line is right.
    pub(crate) fn before_store(&self, addr: u64, len: u64) {
        let mut st = self.st.lock();
        if st.recording {
            let (from, to) = lines(&st, addr, len);
            Self::diff(&mut st, from, to);
        }
    }

    /// After an explicit store: records it.
    pub(crate) fn store(&self, addr: u64, len: u64) {
        let mut st = self.st.lock();
        if st.recording {
            let (from, to) = lines(&st, addr, len);
            Self::diff(&mut st, from, to);
        }
    }

    /// A flush of `[addr, addr+len)` with instruction `kind` (unless one
    /// was forced): one event per line, after its stores.
    pub(crate) fn flush(&self, addr: u64, len: u64, kind: FlushKind) {
        let mut st = self.st.lock();
        if !st.recording {
            return;
        }
        let kind = st.force_kind.unwrap_or(kind);
        Self::switch(&mut st);
        let (from, to) = lines(&st, addr, len);
        Self::diff(&mut st, from, to);
        let mut line = from;
        while line < to {
            if st.touched.contains(&line) {
                st.trace.push(Event::Flush { addr: line, kind });
            }
            line += LINE;
        }
    }

    /// A fence: everything stored so far is in the trace before it.
    pub(crate) fn fence(&self, what: &'static str) {
        let mut st = self.st.lock();
        if !st.recording {
            return;
        }
        let len = st.len;
        Self::diff(&mut st, 0, len);
        Self::switch(&mut st);
        st.trace.push(Event::Fence { what });
    }

    /// The pool grew to `len` bytes.
    pub(crate) fn extend(&self, len: u64) {
        let mut st = self.st.lock();
        if len <= st.len {
            return;
        }
        st.len = len;
        if st.recording {
            st.shadow.resize(len as usize, 0);
            st.trace.push(Event::Extend { len });
        }
    }

    /// Records every 8-byte word of `[from, to)` (offsets) that differs from
    /// the shadow as a store, and updates the shadow.
    fn diff(st: &mut State, from: u64, to: u64) {
        let to = to.min(st.len).min(st.shadow.len() as u64);
        if from >= to {
            return;
        }
        if st.base == 0 {
            return;
        }
        // SAFETY: base != 0: attached and not detached, so [base, base+len)
        // is the live mapping, and [base+from, base+to) is inside it (to <= len).
        let mem = unsafe { std::slice::from_raw_parts((st.base + from) as *const u8, (to - from) as usize) };
        let shadow = &mut st.shadow[from as usize..to as usize];
        const PAGE: usize = 4096;
        let mut events = Vec::new();
        let mut p = 0;
        while p < mem.len() {
            let end = (p + PAGE).min(mem.len());
            if mem[p..end] != shadow[p..end] {
                changed_runs(&mem[p..end], &shadow[p..end], from + p as u64, &mut events);
                shadow[p..end].copy_from_slice(&mem[p..end]);
            }
            p = end;
        }
        for e in &events {
            if let Event::Store { addr, .. } = e {
                st.touched.insert(addr / LINE * LINE);
            }
        }
        st.trace.events.extend(events);
    }
}

/// The line-aligned offsets covering `[addr, addr+len)` (addr absolute).
fn lines(st: &State, addr: u64, len: u64) -> (u64, u64) {
    let off = addr.saturating_sub(st.base);
    (off / LINE * LINE, (off + len).div_ceil(LINE) * LINE)
}

/// Stores for the changed 8-byte words of a page, one store per run of
/// changed words within a line.
fn changed_runs(mem: &[u8], shadow: &[u8], at: u64, out: &mut Vec<Event>) {
    let words = mem.len().div_ceil(8);
    let mut run: Option<usize> = None;
    for w in 0..=words {
        let s = w * 8;
        let changed = w < words && mem[s..(s + 8).min(mem.len())] != shadow[s..(s + 8).min(mem.len())];
        let line_start = (at + s as u64) % LINE == 0;
        if let Some(r) = run {
            if !changed || line_start {
                let e = s.min(mem.len());
                out.push(Event::Store { addr: at + r as u64, data: mem[r..e].to_vec() });
                run = None;
            }
        }
        if changed && run.is_none() {
            run = Some(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_before_attach_waits_for_the_pool() {
        let t = Tracer::new();
        t.start(); // no pool yet: must not read address 0
        assert!(t.stop().events.is_empty());
        let t = Tracer::new();
        t.start();
        let mem = [7u8; 128];
        t.attach(mem.as_ptr() as u64, mem.len() as u64);
        t.fence("test");
        t.detach();
        let tr = t.stop();
        assert_eq!(tr.base, vec![7u8; 128]);
        assert_eq!(tr.events, vec![Event::Fence { what: "test" }]);
    }

    #[test]
    fn runs_split_at_lines() {
        let shadow = vec![0u8; 128];
        let mut mem = shadow.clone();
        mem[56..72].fill(1); // two words, across the line boundary at 64
        mem[100] = 2;
        let mut ev = Vec::new();
        changed_runs(&mem, &shadow, 0, &mut ev);
        assert_eq!(
            ev,
            vec![
                Event::Store { addr: 56, data: vec![1; 8] },
                Event::Store { addr: 64, data: vec![1; 8] },
                Event::Store { addr: 96, data: vec![0, 0, 0, 0, 2, 0, 0, 0] },
            ]
        );
    }
}
