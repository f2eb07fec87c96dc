//! The one link from the pool to subsystems that keep durable state of
//! their own inside it (today: the STM's redo logs and clock reservation).
//!
//! The pool does not know what such a subsystem is. It calls each
//! [`Layer`] listed in `crate::LAYERS` at two points:
//!
//! - `recover`, on open: after interrupted regions are rolled back and
//!   before the recovery GC (a layer's records may reference objects that
//!   only they keep alive until replayed);
//! - `quiesce`, before an online collection and on the clean close, with
//!   the GC gate held exclusively (no region or transaction runs): the
//!   layer makes its state durable and needs nothing replayed.
//!
//! A layer keeps its volatile per-pool state in [`PoolInner::layer_state`]
//! (created on first use, type-erased so the pool need not name it).

use super::space::Space;
use super::{OpenReport, PoolInner};
use crate::error::Result;

/// Maps a pointer written before a relocation to where it points now.
pub(crate) type Translate<'a> = &'a dyn Fn(u64) -> u64;

/// A subsystem layered on the pool (see the module comment).
pub(crate) struct Layer {
    /// Open: replays what the layer's records say, fills its part of the
    /// report. `translate` maps pointers written before a relocation.
    pub recover: fn(space: &Space, translate: Translate<'_>, report: &mut OpenReport) -> Result<()>,
    /// GC and close (gate held exclusively): makes the layer's state durable.
    pub quiesce: fn(inner: &PoolInner) -> Result<()>,
}

/// Runs every layer's recovery.
pub(super) fn recover_all(space: &Space, translate: &dyn Fn(u64) -> u64, report: &mut OpenReport) -> Result<()> {
    crate::LAYERS.iter().try_for_each(|l| (l.recover)(space, translate, report))
}

/// Quiesces every layer.
pub(super) fn quiesce_all(inner: &PoolInner) -> Result<()> {
    crate::LAYERS.iter().try_for_each(|l| (l.quiesce)(inner))
}
