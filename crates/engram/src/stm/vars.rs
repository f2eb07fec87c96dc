//! Transactional variables: [`PTVar`] (a cell object in a pool), [`PTField`]
//! (a cell embedded in a persistent struct) and [`TVar`] (volatile).
//!
//! A persistent cell is a versioned lock word followed by the value, both in
//! one 64-byte line, so the value and its version persist in order (the
//! redo-log replay rule depends on it): a `PTVar` cell object is allocated
//! with a 16- or 48-byte payload, whose slot (class 32 or 64) never makes it
//! straddle a line, and a `PTField<T>` is 16-aligned and 16 bytes. Values
//! are plain pool data (`Persistent`), at most 8 bytes for a `PTField`; a
//! `PTVar` value of more than 40 bytes (or aligned to more than 8) is boxed
//! transparently: the cell holds a pointer to an immutable pool object
//! with the value (`engine/boxed.rs`), replaced by every write.

use super::engine::{STx, StmResult};
use super::persist::Persist;
use crate::ptr::PPtr;
use crate::Persistent;
use std::marker::PhantomData;

/// A variable a transaction can read and write.
pub trait Var {
    /// What `write` takes.
    type In;
    /// What `read` gives.
    type Out;
    /// Reads it in `tx`.
    fn read_in(&self, tx: &STx<'_>) -> StmResult<Self::Out>;
    /// Buffers a write in `tx`.
    fn write_in(&self, tx: &STx<'_>, v: Self::In) -> StmResult<()>;
}

/// The pool object behind a [`PTVar`]: the lock word and the value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VarCell<P> {
    /// Versioned lock word (see `word.rs`).
    pub word: u64,
    /// The committed value.
    pub value: P,
}

// SAFETY: a u64 and a Persistent value; the pointers are the value's,
// shifted by its offset.
unsafe impl<P: Persistent> Persistent for VarCell<P> {
    fn type_name() -> String {
        format!("engram::VarCell<{}>", P::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        P::pointer_offsets(out, at + std::mem::offset_of!(VarCell<P>, value) as u32);
    }
}

/// A persistent transactional variable holding a `T` (stored as `T::P`).
///
/// It is a pointer, so it can be stored in other persistent structures and
/// in roots ([`crate::Pool::root`]).
#[repr(transparent)]
pub struct PTVar<T: Persist> {
    cell: PPtr<VarCell<T::P>>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Persist> Clone for PTVar<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Persist> Copy for PTVar<T> {}
impl<T: Persist> PartialEq for PTVar<T> {
    fn eq(&self, o: &Self) -> bool {
        self.cell == o.cell
    }
}
impl<T: Persist> Eq for PTVar<T> {}
impl<T: Persist> std::fmt::Debug for PTVar<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PTVar({:#x})", self.cell.addr())
    }
}

// SAFETY: a PTVar is a PPtr: one pointer at offset 0.
unsafe impl<T: Persist> Persistent for PTVar<T> {
    fn type_name() -> String {
        format!("engram::PTVar<{}>", T::P::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

/// Largest value a [`PTVar`] holds in its cell, bytes (the cell is a lock
/// word and the value in one 48-byte payload). A larger value, or one
/// aligned to more than 8, is boxed transparently: the cell holds a pointer
/// to a pool object with the value ([`BoxCell`]), a write copies the new
/// value into a new box at commit and the old box is freed once no redo
/// record can need it (docs/stm.md, "Values of any size"):
///
/// ```
/// use engram::stm::{PTVar, STx, StmResult};
/// type Five = (u64, (u64, (u64, (u64, u64)))); // 40 bytes: in the cell
/// type Six = (u64, (u64, (u64, (u64, (u64, u64))))); // 48 bytes: boxed
/// fn make(tx: &STx<'_>) -> StmResult<(PTVar<Five>, PTVar<Six>, PTVar<[u64; 512]>)> {
///     Ok((PTVar::new(tx, (0, (0, (0, (0, 0)))))?, PTVar::new(tx, (0, (0, (0, (0, (0, 0))))))?, PTVar::new(tx, [7; 512])?))
/// }
/// assert!(!PTVar::<Five>::BOXED && PTVar::<Six>::BOXED && PTVar::<[u64; 512]>::BOXED);
/// ```
pub const PTVAR_MAX_VALUE: usize = 40;

/// The cell object of a boxed [`PTVar`] (see [`PTVAR_MAX_VALUE`]): the
/// lock word and a pointer to the box holding the value.
pub type BoxCell<P> = VarCell<PPtr<P>>;

impl<T: Persist> PTVar<T> {
    /// Whether `T`'s pool form is kept in a box of its own (more than
    /// [`PTVAR_MAX_VALUE`] bytes, or aligned to more than 8) rather than in
    /// the cell.
    pub const BOXED: bool = std::mem::size_of::<T::P>() > PTVAR_MAX_VALUE || std::mem::align_of::<T::P>() > 8;

    /// Creates a variable holding `init` (copied into the pool). The new
    /// variable is private to `tx` until it commits.
    pub fn new(tx: &STx<'_>, init: T) -> StmResult<Self> {
        let addr = if Self::BOXED { tx.new_boxed_cell::<T>(&init)? } else { tx.new_cell::<T>(&init)? };
        Ok(PTVar { cell: PPtr::from_addr(addr), _t: PhantomData })
    }

    /// The handle of the cell object at `cell` (from a root or a field).
    /// For a boxed variable ([`PTVar::BOXED`]) the object is a
    /// [`BoxCell<T::P>`]: use [`PTVar::from_box_cell`].
    pub fn from_cell(cell: PPtr<VarCell<T::P>>) -> Self {
        PTVar { cell, _t: PhantomData }
    }

    /// The handle of a boxed variable's cell object.
    pub fn from_box_cell(cell: PPtr<BoxCell<T::P>>) -> Self {
        PTVar { cell: PPtr::from_addr(cell.addr()), _t: PhantomData }
    }

    /// The cell object (a [`BoxCell<T::P>`] at this address if the
    /// variable is boxed: see [`PTVar::box_cell`]).
    pub fn cell(self) -> PPtr<VarCell<T::P>> {
        self.cell
    }

    /// The cell object of a boxed variable, `None` if it is not boxed.
    pub fn box_cell(self) -> Option<PPtr<BoxCell<T::P>>> {
        Self::BOXED.then(|| PPtr::from_addr(self.cell.addr()))
    }

    /// The variable root `name` names, if any (typed by its cell object).
    pub(crate) fn find_root(tx: &crate::Tx<'_>, name: &str) -> crate::Result<Option<Self>> {
        Ok(if Self::BOXED {
            tx.root::<BoxCell<T::P>>(name)?.map(Self::from_box_cell)
        } else {
            tx.root::<VarCell<T::P>>(name)?.map(Self::from_cell)
        })
    }

    /// Points root `name` at this variable's cell object.
    pub(crate) fn set_root(self, tx: &crate::Tx<'_>, name: &str) -> crate::Result<()> {
        match self.box_cell() {
            Some(c) => tx.set_root(name, c),
            None => tx.set_root(name, self.cell),
        }
    }
}

impl<T: Persist> Var for PTVar<T> {
    type In = T;
    type Out = T::P;
    fn read_in(&self, tx: &STx<'_>) -> StmResult<T::P> {
        if Self::BOXED {
            return tx.read_boxed::<T::P>(self.cell.addr());
        }
        tx.read_cell::<T::P>(self.cell.addr(), PTVAR_MAX_VALUE)
    }
    fn write_in(&self, tx: &STx<'_>, v: T) -> StmResult<()> {
        if Self::BOXED {
            return tx.write_boxed::<T>(self.cell.addr(), v);
        }
        tx.write_cell::<T>(self.cell.addr(), PTVAR_MAX_VALUE, v)
    }
}

/// A transactional field embedded in a persistent struct: a lock word and a
/// value of at most 8 bytes, 16 bytes in all. Reach it with
/// [`PTField::at`] from the struct's address and the field's offset
/// (`engram::field!`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default)]
pub struct PTField<T> {
    word: u64,
    value: T,
}

// SAFETY: a u64 and a Persistent value of at most 8 bytes at offset 8.
unsafe impl<T: Persistent> Persistent for PTField<T> {
    fn type_name() -> String {
        format!("engram::PTField<{}>", T::type_name())
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        T::pointer_offsets(out, at + 8);
    }
}

impl<T: Persistent> PTField<T> {
    /// A field holding `v` (for initialising a struct before it is shared).
    /// Fails to compile if `T` is over 8 bytes or 8-aligned.
    pub fn new(v: T) -> Self {
        const { assert!(std::mem::size_of::<T>() <= 8 && std::mem::align_of::<T>() <= 8) };
        PTField { word: 0, value: v }
    }
}

/// A handle to a [`PTField`] at an address in a pool.
pub struct FieldRef<T> {
    addr: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for FieldRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for FieldRef<T> {}

impl<T: Persistent> PTField<T> {
    /// The field at `struct_addr + offset` (validated when used).
    pub fn at(struct_addr: u64, offset: usize) -> FieldRef<T> {
        FieldRef { addr: struct_addr + offset as u64, _t: PhantomData }
    }
}

impl<T> FieldRef<T> {
    /// The field's address (its lock word).
    pub fn addr(&self) -> u64 {
        self.addr
    }
}

impl<T: Persistent + Persist<P = T>> Var for FieldRef<T> {
    type In = T;
    type Out = T;
    fn read_in(&self, tx: &STx<'_>) -> StmResult<T> {
        tx.read_cell::<T>(self.addr, 8)
    }
    fn write_in(&self, tx: &STx<'_>, v: T) -> StmResult<()> {
        tx.write_cell::<T>(self.addr, 8, v)
    }
}

/// `field!(ptr, Type, field)`: the handle of the [`PTField`] `field` of
/// the `Type` that `ptr` (a `PPtr<Type>`) points to: a [`FieldRef`] (read
/// and write) for an ordinary field, an [`ImmutableRef`] (read only, no
/// read-set entry) for one marked `#[immutable]` in `#[derive(Persistent)]`.
/// The value type is the field's own. It does not compile for a field that
/// is not a `PTField`, nor for a struct that does not derive `Persistent`.
#[macro_export]
macro_rules! field {
    ($ptr:expr, $ty:ty, $field:ident) => {
        $crate::stm::field_at::<$ty, _>($ptr, ::core::mem::offset_of!($ty, $field), |f: <$ty as $crate::stm::TFields>::Fields| f.$field)
    };
}

/// What `#[derive(Persistent)]` says about a struct's fields, for
/// [`field!`]: `Fields` is a generated struct with one member per field of
/// `Self`, of type [`Mutable<F>`] or [`Immutable<F>`] (`F` the field's
/// type). It is never built; only its member types are used.
pub trait TFields {
    /// The generated companion (named fields only).
    type Fields;
}

/// The kind of an ordinary field of a derived struct (see [`TFields`]).
pub struct Mutable<F>(PhantomData<fn() -> F>);

/// The kind of a field marked `#[immutable]` (see [`TFields`]).
pub struct Immutable<F>(PhantomData<fn() -> F>);

/// A field kind that has a handle: a `PTField`, mutable or immutable.
pub trait FieldKind {
    /// The handle [`field!`] gives.
    type Ref;
    /// The handle of the field whose lock word is at `addr`.
    fn at(addr: u64) -> Self::Ref;
}

impl<T: Persistent> FieldKind for Mutable<PTField<T>> {
    type Ref = FieldRef<T>;
    fn at(addr: u64) -> FieldRef<T> {
        FieldRef { addr, _t: PhantomData }
    }
}

impl<T: Persistent> FieldKind for Immutable<PTField<T>> {
    type Ref = ImmutableRef<T>;
    fn at(addr: u64) -> ImmutableRef<T> {
        ImmutableRef(FieldRef { addr, _t: PhantomData })
    }
}

/// The handle of the field at offset `off` of the `S` at `p`, of the kind
/// `pick` selects from `S`'s [`TFields`] (never called: it only names the
/// field's kind). Used by [`field!`].
#[doc(hidden)]
pub fn field_at<S: TFields, K: FieldKind>(p: PPtr<S>, off: usize, pick: fn(S::Fields) -> K) -> K::Ref {
    let _ = pick;
    K::at(p.addr() + off as u64)
}

/// A handle to a [`PTField`] marked `#[immutable]`: its value is set when
/// its object is made (`STx::alloc`, `PTVar::new`) and never written by a
/// transaction afterwards, since this handle has no write (`tx.write` on it
/// does not compile). `tx.read` on it costs the seqlock read alone, with no
/// read-set entry ([`STx::read_immutable`]).
///
/// ```compile_fail,E0277
/// use engram::stm::PTField;
/// use engram::{PPtr, Persistent};
/// #[repr(C)]
/// #[derive(Clone, Copy, Persistent)]
/// struct Node {
///     #[immutable]
///     key: PTField<u64>,
///     value: PTField<u64>,
/// }
/// fn set_key(tx: &engram::stm::STx<'_>, n: PPtr<Node>) -> engram::stm::StmResult<()> {
///     tx.write(&engram::field!(n, Node, key), 1) // no write for an immutable field
/// }
/// ```
pub struct ImmutableRef<T>(FieldRef<T>);

impl<T> Clone for ImmutableRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ImmutableRef<T> {}

impl<T> ImmutableRef<T> {
    /// The field's address (its lock word).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }
}

/// Something a transaction can read: every [`Var`], and [`ImmutableRef`].
pub trait ReadVar {
    /// What `read` gives.
    type Out;
    /// Reads it in `tx`.
    fn read_var(&self, tx: &STx<'_>) -> StmResult<Self::Out>;
}

impl<V: Var> ReadVar for V {
    type Out = V::Out;
    fn read_var(&self, tx: &STx<'_>) -> StmResult<V::Out> {
        self.read_in(tx)
    }
}

impl<T: Persist> crate::stm::ReadOnlyVar for PTVar<T> {
    #[inline]
    fn read_ro(&self, tx: &crate::stm::RTx<'_>) -> StmResult<T::P> {
        if Self::BOXED {
            return tx.read_boxed::<T::P>(self.cell.addr());
        }
        tx.read_cell::<T::P>(self.cell.addr(), PTVAR_MAX_VALUE)
    }
}

impl<T: Persistent + Persist<P = T>> crate::stm::ReadOnlyVar for FieldRef<T> {
    #[inline]
    fn read_ro(&self, tx: &crate::stm::RTx<'_>) -> StmResult<T> {
        tx.read_cell::<T>(self.addr, 8)
    }
}

impl<T: Persistent + Persist<P = T>> crate::stm::ReadOnlyVar for ImmutableRef<T> {
    #[inline]
    fn read_ro(&self, tx: &crate::stm::RTx<'_>) -> StmResult<T> {
        tx.read_immutable(&self.0)
    }
}

impl<T: Persistent + Persist<P = T>> ReadVar for ImmutableRef<T> {
    type Out = T;
    fn read_var(&self, tx: &STx<'_>) -> StmResult<T> {
        tx.read_immutable(&self.0)
    }
}

/// The [`FieldRef`] of the `PTField<T>` at offset `off` of the `S` at `p`
/// (`proj` only ties `T` to the field's declared type). Used by [`field!`].
#[doc(hidden)]
pub fn field_of<S, T: Persistent>(p: PPtr<S>, off: usize, proj: fn(&S) -> &PTField<T>) -> FieldRef<T> {
    let _ = proj;
    PTField::at(p.addr(), off)
}
