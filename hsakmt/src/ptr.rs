//! Every access to memory the C caller passes by pointer. Each function states what the caller
//! must guarantee; C structs are read and written unaligned (hsakmttypes.h packs them to 4).

use thunk::hsakmt::{Result, Status};

/// Writes `v` to `*p`; `InvalidParameter` for a null `p`.
///
/// # Safety
/// `p` is null or valid for writing a `T`.
pub unsafe fn write<T>(p: *mut T, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Status::InvalidParameter);
    }
    // SAFETY: non-null and, by the caller's contract, writable for a `T`; unaligned writes need
    // no alignment.
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Reads `*p`; `None` for a null `p`.
///
/// # Safety
/// `p` is null or valid for reading a `T`.
pub unsafe fn read<T: Copy>(p: *const T) -> Option<T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and readable by the caller's contract; no alignment needed.
    Some(unsafe { p.read_unaligned() })
}

/// Copies `n` elements from `p`; `None` for a null `p` (an empty array for `n == 0`).
///
/// # Safety
/// `p` is null, or valid for reading `n` consecutive `T`s.
pub unsafe fn read_array<T: Copy>(p: *const T, n: usize) -> Option<Vec<T>> {
    if n == 0 {
        return Some(Vec::new());
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: element `i < n` of an array the caller says is readable.
    Some((0..n).map(|i| unsafe { p.add(i).read_unaligned() }).collect())
}

/// Writes `items` to consecutive elements from `p` on; `InvalidParameter` for a null `p`
/// with something to write.
///
/// # Safety
/// `p` is null or valid for writing as many `T`s as `items` yields.
pub unsafe fn write_array<T>(p: *mut T, items: impl IntoIterator<Item = T>) -> Result<()> {
    for (i, item) in items.into_iter().enumerate() {
        if p.is_null() {
            return Err(Status::InvalidParameter);
        }
        // SAFETY: element `i` of an array the caller says holds every item.
        unsafe { p.add(i).write_unaligned(item) };
    }
    Ok(())
}
