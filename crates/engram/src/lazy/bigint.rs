//! Big natural numbers in the pool: a [`num_bigint::BigUint`] is copied as
//! [`PBigUint`], an immutable array of its 32-bit limbs, least significant
//! first (no trailing zero limb; zero is the empty array). Arithmetic stays
//! with `num-bigint`; the pool only stores limbs.
//!
//! Copies are made at an update (`Persist`) and read back by [`Load`],
//! which checks the array against the allocator before reading it. On a
//! crash: copies are published by the protocol of `publish.rs`, so a
//! reader never sees a partial one.

use super::reader::{Cx, Load};
use crate::error::Result;
use crate::ptr::PArray;
use crate::stm::{CopyCx, Persist};
use crate::Persistent;
use num_bigint::BigUint;

/// The persistent copy of a [`BigUint`]: its 32-bit limbs, little-endian.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PBigUint(PArray<u32>);

// SAFETY: a PBigUint is a PArray<u32>: one pointer at offset 0.
unsafe impl Persistent for PBigUint {
    fn type_name() -> String {
        "engram::lazy::PBigUint".into()
    }
    fn pointer_offsets(out: &mut Vec<u32>, at: u32) {
        out.push(at);
    }
}

impl PBigUint {
    /// The limb array.
    pub fn limbs(&self) -> PArray<u32> {
        self.0
    }
}

impl Persist for BigUint {
    type P = PBigUint;
    fn persist(&self, cx: &mut CopyCx<'_>) -> Result<PBigUint> {
        Ok(PBigUint(cx.alloc_slice(&self.to_u32_digits())?))
    }
}

impl Load for BigUint {
    fn load(p: &PBigUint, cx: &Cx<'_>) -> Result<BigUint> {
        Ok(BigUint::from_slice(cx.slice(p.0)?))
    }
}

impl Persist for PBigUint {
    type P = PBigUint;
    fn persist(&self, _: &mut CopyCx<'_>) -> Result<PBigUint> {
        Ok(*self)
    }
    fn plain(&self) -> Option<PBigUint> {
        Some(*self)
    }
}
