//! Validation of the raw arguments C hands us: null and misaligned pointers,
//! strings that are not UTF-8. Everything that reads or writes through a
//! caller's pointer goes through here, so the checks live in one place.

use crate::{invalid, FfiResult};
use std::ffi::{c_char, CStr};

/// A C string argument as `&str`.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that stays valid and
/// unchanged for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null, NUL-terminated and alive for 'a (caller's contract).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

/// An optional C string (NULL = none).
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn opt_text<'a>(p: *const c_char, what: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { text(p, what) }.map(Some)
}

/// An out-parameter as `&mut T`.
///
/// # Safety
/// `p` is null or points to writable memory for a `T` that nothing else
/// accesses during the call.
pub(crate) unsafe fn out<'a, T>(p: *mut T, what: &str) -> FfiResult<&'a mut T> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(invalid(format!("{what} is misaligned")));
    }
    // SAFETY: non-null, aligned, writable and unaliased (caller's contract).
    Ok(unsafe { &mut *p })
}

/// An in-parameter struct as `&T`.
///
/// # Safety
/// `p` is null or points to an initialised `T` valid for the call.
pub(crate) unsafe fn input<'a, T>(p: *const T, what: &str) -> FfiResult<&'a T> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(invalid(format!("{what} is misaligned")));
    }
    // SAFETY: non-null, aligned and initialised (caller's contract).
    Ok(unsafe { &*p })
}

/// An array argument of `n` elements (NULL is allowed when `n` is 0).
///
/// # Safety
/// `p` is null or points to `n` initialised `T`s valid for the call.
pub(crate) unsafe fn array<'a, T>(p: *const T, n: usize, what: &str) -> FfiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL with {n} elements")));
    }
    if !p.is_aligned() || n.checked_mul(std::mem::size_of::<T>()).is_none_or(|b| b > isize::MAX as usize) {
        return Err(invalid(format!("{what}: misaligned or too long ({n} elements)")));
    }
    // SAFETY: non-null, aligned, n elements initialised (caller's contract),
    // total size fits isize.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Copies `s` into a fixed C buffer, NUL-terminated, truncated if needed.
pub(crate) fn fill(buf: &mut [c_char], s: &str) {
    let n = s.len().min(buf.len().saturating_sub(1));
    for (d, &b) in buf.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as c_char;
    }
    if let Some(end) = buf.get_mut(n) {
        *end = 0;
    }
}
