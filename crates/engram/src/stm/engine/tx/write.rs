//! The write set: buffered writes of pool cells and volatile variables
//! ([`Kind`]), their lookup and the write filter, objects the attempt
//! allocates, and where a written cell lies in the pool.
//!
//! What it keeps true: the write filter (`STx::wbits`) is a superset of
//! the words in `writes` (a clear bit means "not written"); `index` maps
//! every word to its entry once there are more than 16; the `off` of a
//! pool write was checked to lie, with its value, inside one allocated
//! object (by the allocator, the attempt's last allocation, the span
//! cache of small spans the thread's writes found (`tx/spans.rs`, valid
//! while the heap frees nothing; no span changes class while an attempt
//! holds the GC gate), or [`Located`], valid while the heap frees
//! nothing). Nothing here writes
//! shared memory: commit (`commit.rs`) installs the set; an aborted
//! attempt's objects are freed ([`STx::discard`]).

use super::volatile::VCell;
use super::{wbit, STx, State};
use crate::error::{Error, Result};
use crate::format::OBJ_HEADER;
use crate::ptr::PPtr;
use crate::stm::engine::{StmError, StmResult, MAX_VALUE};
use crate::stm::persist::{CopyCx, Made, Persist};
use crate::stm::vars::VarCell;
use crate::Persistent;
use std::any::Any;
use std::mem::size_of;
use std::sync::Arc;

pub(in crate::stm::engine) trait Pending {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes>;
}

pub(in crate::stm::engine) struct PendingVal<T>(T);

impl<T: Persist> Pending for PendingVal<T> {
    fn materialize(&self, cx: &mut CopyCx<'_>) -> Result<Bytes> {
        Ok(Bytes::of(&self.0.persist(cx)?))
    }
}

/// A value's bytes (at most MAX_VALUE).
#[derive(Clone, Copy)]
pub(in crate::stm::engine) struct Bytes {
    pub(in crate::stm::engine) buf: [u8; MAX_VALUE],
    pub(in crate::stm::engine) len: usize,
}

impl Bytes {
    pub(in crate::stm::engine) fn of<P: Persistent>(p: &P) -> Self {
        let mut b = Bytes { buf: [0; MAX_VALUE], len: size_of::<P>() };
        // SAFETY: len <= MAX_VALUE (checked by callers via `check_value`);
        // P is plain data, its bytes may be copied.
        unsafe { std::ptr::copy_nonoverlapping(p as *const P as *const u8, b.buf.as_mut_ptr(), b.len) };
        b
    }

    pub(in crate::stm::engine) fn get<P: Persistent>(&self) -> P {
        // SAFETY: the buffer holds size_of::<P>() bytes of a P (same type, by
        // the cell it came from); every bit pattern is a valid P.
        unsafe { std::ptr::read_unaligned(self.buf.as_ptr() as *const P) }
    }

    pub(in crate::stm::engine) fn words(&self) -> usize {
        self.len.div_ceil(8)
    }
}

pub(in crate::stm::engine) enum Kind {
    /// A persistent cell at pool offset `off`; `boxed`: its value is the
    /// pointer to a box (`boxed.rs`), and the old box is freed at commit.
    P { off: u64, value: Option<Bytes>, pending: Option<Box<dyn Pending>>, boxed: bool },
    /// A volatile TVar.
    V { cell: Arc<dyn VCell>, value: Box<dyn Any + Send + Sync> },
    /// A volatile `TWord` (`tword.rs`): the value word to install, at
    /// `word + 8`. No count: the attempt is pinned ([`STx::write_word`]).
    W { bits: u64 },
}

impl Kind {
    /// Whether this writes a volatile variable (the volatile domain's).
    #[inline]
    pub(in crate::stm::engine) fn is_volatile(&self) -> bool {
        !matches!(self, Kind::P { .. })
    }
}

pub(in crate::stm::engine) struct Write {
    pub(in crate::stm::engine) word: usize,
    pub(in crate::stm::engine) kind: Kind,
    /// The word as it was before commit locked it.
    pub(in crate::stm::engine) old: u64,
}

/// The large (or huge) object ([`crate::alloc::locate_containing`]'s
/// answer) that a recent write of this thread was found in, so that the
/// next write into it skips the allocator's lookup: a hash table's
/// updates write bucket heads of the same array every time, and a large
/// object's lookup is the dearest (its head's span entry, then its
/// length). Small objects are not kept: their lookup is a span entry
/// and a division, and an update rarely writes the same node in two
/// transactions.
///
/// What it keeps true: `[lo, hi)` is an answer the lookup gave when the
/// heap with id `heap` (unique per open pool) had free count `frees`
/// (`Heap::frees_seen`, read BEFORE the lookup, so a free racing it voids
/// the entry too). Until the count moves nothing was freed or swept, so
/// the object is still allocated and the lookup would give the same
/// answer for any address in `[lo, hi)`. Every use reads the count and
/// compares both. Volatile only.
#[derive(Default)]
pub(super) struct Located {
    lo: u64,
    hi: u64,
    heap: u64,
    frees: u64,
}

impl Located {
    /// Whether `[addr, addr + len)` lies inside the object kept, if it is
    /// still current: `frees_seen` reads the heap's free count now.
    #[inline]
    fn holds(&self, addr: u64, len: u64, heap: &crate::alloc::Heap) -> bool {
        addr >= self.lo
            && addr.checked_add(len).is_some_and(|end| end <= self.hi)
            && self.heap == heap.id
            && (self.frees == heap.frees_seen() || crate::failpoint::planted("stm.located_ignore_frees"))
    }
}

impl<'p> STx<'p> {
    /// This transaction's own pending value for the cell, materialised.
    #[inline]
    pub(in crate::stm::engine) fn own_write(&self, word: usize) -> StmResult<Option<Bytes>> {
        if self.wbits.get() & wbit(word) == 0 {
            return Ok(None);
        }
        self.own_write_slow(word)
    }

    fn own_write_slow(&self, word: usize) -> StmResult<Option<Bytes>> {
        let mut st = self.st.borrow_mut();
        let Some(i) = self.find(&st, word) else { return Ok(None) };
        let st = &mut *st;
        match &mut st.writes[i].kind {
            Kind::P { value: Some(b), .. } => Ok(Some(*b)),
            Kind::P { value, pending, .. } => {
                let ctx = self.ctx()?;
                let mut cx = CopyCx::new(ctx.inner, ctx.cache());
                let p = pending.as_ref().ok_or_else(|| Error::corrupt("write without value"))?;
                let r = p.materialize(&mut cx);
                st.made.append(&mut cx.made);
                let b = r?;
                *value = Some(b);
                Ok(Some(b))
            }
            Kind::V { .. } | Kind::W { .. } => Err(StmError::Failed(Error::invalid("a volatile variable was read as a persistent cell"))),
        }
    }

    pub(crate) fn write_cell<T: Persist>(&self, addr: u64, max: usize, v: T) -> StmResult<()> {
        self.check_cell::<T::P>(addr, max)?;
        // The write set is searched once, for the offset and the entry.
        let found = self.find(&self.st.borrow(), addr as usize);
        let off = self.write_offset(addr, size_of::<T::P>() as u64, found)?;
        let kind = match v.plain() {
            Some(p) => Kind::P { off, value: Some(Bytes::of(&p)), pending: None, boxed: false },
            None => Kind::P { off, value: None, pending: Some(Box::new(PendingVal(v))), boxed: false },
        };
        self.put_found(addr as usize, kind, found);
        Ok(())
    }

    /// [`STx::cell_offset`] for a write, without asking the allocator
    /// when this attempt already knows the answer: the cell is in its
    /// write set (checked then, for a value at least as long), or lies in
    /// the object the attempt allocated last (`made`: its slot is known).
    /// `found`: the cell's write-set entry, if any.
    #[inline(always)]
    fn write_offset(&self, addr: u64, len: u64, found: Option<usize>) -> StmResult<u64> {
        let known = {
            let st = self.st.borrow();
            if found.is_none() && st.made.is_empty() {
                None
            } else {
                known_cell(&st, found, addr, len, self.bounds.0.wrapping_sub(crate::format::HEAP_OFF))
            }
        };
        match known {
            Some(off) => Ok(off),
            None => self.cell_offset(addr, len),
        }
    }

    /// The pool offset of the cell at `addr`, checked to lie, with a value
    /// of `len` bytes, inside one allocated object: what
    /// [`crate::alloc::locate_containing`] answers. A small span this
    /// thread's writes found before answers from the span cache
    /// (`State::spans`); a large object a recent write of this thread was
    /// found in answers without the allocator if the heap freed nothing
    /// since (`Located`).
    #[inline]
    pub(in crate::stm::engine) fn cell_offset(&self, addr: u64, len: u64) -> StmResult<u64> {
        // (the cache is there whenever the pool is: `STx::begin`)
        if self.st.borrow().spans.as_ref().is_some_and(|s| s.holds(addr, 8 + len)) {
            return Ok(addr - self.bounds.0.wrapping_sub(crate::format::HEAP_OFF));
        }
        self.cell_offset_tables(addr, len)
    }

    /// [`STx::cell_offset`] when the span cache does not hold the span:
    /// `Located`, else the allocator's tables (whose small span the cache
    /// then learns).
    fn cell_offset_tables(&self, addr: u64, len: u64) -> StmResult<u64> {
        let inner = self.ctx()?.inner;
        let space = &inner.space;
        if self.st.borrow().located.holds(addr, 8 + len, &inner.heap) {
            return Ok(addr - space.base());
        }
        // Read before the lookup: a free from now on voids what it finds.
        let frees = inner.heap.frees_seen();
        match crate::alloc::locate_containing(space, addr) {
            Some((p, loc)) if addr >= p && addr + 8 + len <= p + loc.capacity() => {
                if matches!(loc, crate::alloc::Loc::Small { .. }) {
                    self.learn_span(loc);
                } else {
                    self.st.borrow_mut().located = Located { lo: p, hi: p + loc.capacity(), heap: inner.heap.id, frees };
                }
                Ok(addr - space.base())
            }
            _ => Err(StmError::Failed(Error::BadPointer { addr })),
        }
    }

    /// Teaches the thread's span cache the span of `loc` (from the span
    /// tables or the allocator), if it holds small objects.
    #[inline]
    fn learn_span(&self, loc: crate::alloc::Loc) {
        if let Some(s) = &self.st.borrow().spans {
            s.learn(loc);
        }
    }

    pub(in crate::stm::engine) fn put(&self, word: usize, kind: Kind) {
        let found = self.find(&self.st.borrow(), word);
        self.put_found(word, kind, found);
    }

    /// [`STx::put`] with the word's write-set entry already looked up
    /// (`found`, nothing changed the set since).
    #[inline]
    fn put_found(&self, word: usize, kind: Kind, found: Option<usize>) {
        // An update from here on: record the reads that follow.
        self.rec.set(true);
        let mut st = self.st.borrow_mut();
        let w = Write { word, kind, old: 0 };
        match found {
            Some(i) => {
                let old = std::mem::replace(&mut st.writes[i], w);
                if let Some(f) = st.frames.last_mut() {
                    if i < f.len {
                        f.replaced.push((i, old));
                    }
                }
            }
            None => {
                if !crate::failpoint::planted("stm.write_filter_unset") {
                    self.wbits.set(self.wbits.get() | wbit(word));
                }
                st.writes.push(w);
                let i = st.writes.len() - 1;
                if st.writes.len() > 16 {
                    if st.index.is_empty() {
                        rebuild_index(&mut st);
                    } else {
                        st.index.insert(word, i);
                    }
                }
            }
        }
    }

    /// Allocates a cell object holding `init` (for `PTVar::new`).
    pub(crate) fn new_cell<T: Persist>(&self, init: &T) -> StmResult<u64> {
        self.new_cell_with(|cx| match init.plain() {
            Some(p) => Ok(p),
            None => init.persist(cx),
        })
    }

    /// Allocates a cell object holding the value `make` copies into the
    /// pool (with the commit's copy context).
    pub(in crate::stm::engine) fn new_cell_with<P: Persistent>(&self, make: impl FnOnce(&mut CopyCx<'_>) -> Result<P>) -> StmResult<u64> {
        let ctx = self.ctx()?;
        if size_of::<P>() > MAX_VALUE || std::mem::align_of::<P>() > 8 {
            self.check_cell::<P>(0, MAX_VALUE)?;
        }
        let mut cx = CopyCx::new(ctx.inner, ctx.cache());
        let r = (|| {
            let p = make(&mut cx)?;
            let id = ctx.local.pool_type_id::<VarCell<P>>(ctx.inner)?;
            // 16- or 48-byte payloads land in classes 32/64: the cell never
            // straddles a cache line (see vars.rs).
            let payload = if 8 + size_of::<P>() <= 16 { 16 } else { 48 };
            let space = &ctx.inner.space;
            let (addr, loc) = ctx.inner.heap.alloc(space, ctx.cache(), payload, id, 0, 1)?;
            cx.made.push(Made { loc, off: addr - OBJ_HEADER - space.base(), len: payload + OBJ_HEADER, mutable: true });
            // SAFETY: a fresh slot of `payload` >= size_of::<VarCell<P>>() bytes.
            unsafe {
                std::ptr::write_bytes(addr as *mut u8, 0, payload as usize);
                std::ptr::write(addr as *mut VarCell<P>, VarCell { word: 0, value: p });
            }
            Ok(addr)
        })();
        self.st.borrow_mut().made.append(&mut cx.made);
        r.map_err(StmError::Failed)
    }

    /// Allocates a pool object holding `v` (a node with embedded
    /// [`crate::stm::PTField`]s, say). It is private to this transaction until it
    /// commits: flushed before the commit fence, freed if the attempt
    /// aborts, garbage for the GC if nothing links it.
    pub fn alloc<T: Persistent>(&self, v: T) -> StmResult<PPtr<T>> {
        // The type id from the thread's cache (`Local::pool_type_id`), the
        // object straight onto the reused `made` list: no lock, no heap
        // allocation besides the object.
        let ctx = self.ctx()?;
        let (inner, space) = (ctx.inner, &ctx.inner.space);
        let id = ctx.local.pool_type_id::<T>(inner)?;
        let payload = size_of::<T>() as u64;
        let (addr, loc) = inner.heap.alloc(space, ctx.cache(), payload, id, 0, 1)?;
        // SAFETY: a fresh slot of at least size_of::<T>() bytes, 16-aligned,
        // inside the mapping, not yet reachable by anyone else.
        unsafe { std::ptr::write(addr as *mut T, v) };
        let made = Made { loc, off: addr - OBJ_HEADER - space.base(), len: payload + OBJ_HEADER, mutable: true };
        self.st.borrow_mut().made.push(made);
        self.learn_span(loc);
        Ok(PPtr::from_addr(addr))
    }

    /// Frees what this attempt allocated (it was never linked).
    pub(in crate::stm::engine) fn discard(&self) {
        let mut st = self.st.borrow_mut();
        if let Some(ctx) = self.ctx.as_ref() {
            for m in st.made.drain(..) {
                let _ = ctx.inner.heap.free(&ctx.inner.space, ctx.cache(), m.loc);
            }
        }
    }
}

/// The pool offset of the cell at `addr` (value of `len` bytes) if `st`
/// shows it lies inside one allocated object: write-set entry `found` is
/// that cell with a value of at least `len` bytes (its offset was checked
/// when it was written), or the object this attempt allocated last
/// (`made`: one comparison pair, not a scan; a write into an earlier one
/// asks the allocator) holds it. `base` is the pool's base address.
#[inline]
fn known_cell(st: &State, found: Option<usize>, addr: u64, len: u64, base: u64) -> Option<u64> {
    if let Some(Kind::P { off, value: Some(b), .. }) = found.map(|i| &st.writes[i].kind) {
        if b.len as u64 >= len {
            return Some(*off);
        }
    }
    let off = addr.checked_sub(base)?;
    if crate::failpoint::planted("stm.known_cell_any") && !st.made.is_empty() {
        return Some(off);
    }
    let inside = |m: &Made| m.mutable && off >= m.off + OBJ_HEADER && off + 8 + len <= m.off + m.len;
    st.made.last().is_some_and(inside).then_some(off)
}

pub(in crate::stm::engine) fn rebuild_index(st: &mut State) {
    st.index.clear();
    if st.writes.len() > 16 {
        for (i, w) in st.writes.iter().enumerate() {
            st.index.insert(w.word, i);
        }
    }
}
