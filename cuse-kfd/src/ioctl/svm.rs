//! AMDKFD_IOC_SVM: shared virtual memory attributes (linux v6.1 and later, kfd_chardev.c
//! kfd_ioctl_svm and kfd_svm.c svm_ioctl, svm_range_set_attr, svm_range_get_attr).
//!
//! The request is variable-size: `nattr` attributes follow the 24-byte `kfd_ioctl_svm_args`
//! inline, and libhsakmt adds their size to the request's size field, so they arrive with the
//! arguments and GET_ATTR's answers go back the same way.
//!
//! How the device learns that SVM memory went away: amdkfd registers an MMU interval notifier
//! per range and drops the unmapped pages when the CPU unmaps them. A device outside the kernel
//! gets no such call. Here every SVM request first reads the owner's mappings
//! (/proc/<pid>/maps, [`crate::owner::OwnerProcess::mappings`]) and drops the pages of every
//! range that are no longer mapped; between two requests a GPU access to an unmapped page
//! faults, because the owner's memory file refuses it (a VM fault, as amdkfd's failed fault-in).
//! The same reading notes the pages the CPU may not write: the GPU's writes there fault
//! read-only, as amdkfd maps them (its MMU notifier also sees a later mprotect; here the next SVM
//! request does). What this cannot see: memory unmapped and mapped again, or protected anew,
//! between two SVM requests keeps its ranges and attributes here, where amdkfd would have
//! dropped them, and the GPU reaches the new pages with the old attributes. VM_IO/VM_PFNMAP mappings (which amdkfd refuses with EFAULT)
//! cannot be told apart in /proc/<pid>/maps and count as mapped.
//!
//! Locations: the soft GPU's VRAM and system memory are both this host's RAM, so PREFERRED_LOC
//! and PREFETCH_LOC are recorded and answered and no byte moves; nothing is ever evicted, and
//! the VRAM the device reports as used does not count SVM ranges prefetched to a GPU.

use super::Ctx;
use crate::memory::svm::{Attr, Attrs};
use crate::memory::PAGE_SIZE;
use crate::owner::Mapping;
use nix::errno::Errno;
use uapi::kfd::*;
use uapi::{FromBytes, IntoBytes};

const HEAD: usize = std::mem::size_of::<SvmArgs>();
const ATTR: usize = std::mem::size_of::<SvmAttribute>();

/// The handler of the table's SVM row: `buf` holds the request's arguments, attributes included.
pub fn svm(ctx: &Ctx, buf: &mut [u8]) -> Result<(), Errno> {
    let (head, tail) = buf.split_at_mut(HEAD);
    let a = SvmArgs::read_from_bytes(head).map_err(|_| Errno::EINVAL)?;
    // kfd_ioctl_svm: page-aligned, non-zero start and size.
    if !a.start_addr.is_multiple_of(PAGE_SIZE) || !a.size.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    if a.start_addr == 0 || a.size == 0 {
        return Err(Errno::EINVAL);
    }
    // amdkfd reads `nattr` attributes whatever the request's size (past its copy of the
    // arguments); attributes the caller did not send are refused here.
    let n = a.nattr as usize;
    if n.checked_mul(ATTR).is_none_or(|len| len > tail.len()) {
        return Err(Errno::EINVAL);
    }
    let attrs = &mut tail[..n * ATTR];
    let mut list: Vec<SvmAttribute> =
        attrs.chunks_exact(ATTR).map(|c| SvmAttribute::read_from_bytes(c).expect("8 bytes")).collect();
    let start = a.start_addr / PAGE_SIZE;
    let last = start + a.size / PAGE_SIZE - 1;
    let r = match a.op {
        KFD_IOCTL_SVM_OP_SET_ATTR => set_attr(ctx, a.start_addr, a.size, start, last, &list),
        KFD_IOCTL_SVM_OP_GET_ATTR => get_attr(ctx, a.start_addr, a.size, start, last, &mut list),
        // svm_ioctl answers an unknown op with a positive EINVAL (a sign slip), which the ioctl
        // returns as its value without failing; a failure with EINVAL is what the code meant.
        _ => Err(Errno::EINVAL),
    };
    if r.is_ok() {
        attrs.copy_from_slice(list.as_bytes());
    }
    r
}

/// svm_range_check_attr: every attribute's type is known and every GPU it names is the
/// process's; the attributes with GPUs turned into indices.
fn check_attrs(ctx: &Ctx, list: &[SvmAttribute]) -> Result<Vec<Attr>, Errno> {
    let vm = ctx.process.vm();
    let idx = |gpu: u32| vm.svm.index(gpu).ok_or(Errno::EINVAL);
    list.iter()
        .map(|at| {
            let v = at.value;
            Ok(match at.type_ {
                KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => {
                    if v != KFD_IOCTL_SVM_LOCATION_SYSMEM && v != KFD_IOCTL_SVM_LOCATION_UNDEFINED {
                        idx(v)?;
                    }
                    Attr::PreferredLoc(v)
                }
                KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => {
                    if v != KFD_IOCTL_SVM_LOCATION_SYSMEM {
                        idx(v)?;
                    }
                    Attr::PrefetchLoc(v)
                }
                KFD_IOCTL_SVM_ATTR_ACCESS => Attr::Access(idx(v)?),
                KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => Attr::AccessInPlace(idx(v)?),
                KFD_IOCTL_SVM_ATTR_NO_ACCESS => Attr::NoAccess(idx(v)?),
                KFD_IOCTL_SVM_ATTR_SET_FLAGS => Attr::SetFlags(v),
                KFD_IOCTL_SVM_ATTR_CLR_FLAGS => Attr::ClrFlags(v),
                KFD_IOCTL_SVM_ATTR_GRANULARITY => Attr::Granularity(v),
                _ => return Err(Errno::EINVAL),
            })
        })
        .collect()
}

/// Drops unmapped pages from the ranges (see the module documentation), then
/// svm_range_is_valid: every page of `[addr, addr + size)` is mapped by the owner (EFAULT), no
/// buffer is mapped on a GPU there (EADDRINUSE), and the span does not wrap (EOVERFLOW, linux
/// v6.10 and later).
fn revalidate(ctx: &Ctx, addr: u64, size: u64) -> Result<(), Errno> {
    let end = addr.checked_add(size).ok_or(Errno::EOVERFLOW)?;
    let maps = refresh(ctx).map_err(|_| Errno::EFAULT)?;
    let mut cur = addr;
    for m in &maps {
        if m.start <= cur && cur < m.end {
            cur = m.end.min(end);
        }
        if cur >= end {
            break;
        }
    }
    if cur < end {
        return Err(Errno::EFAULT);
    }
    if ctx.process.vm().any_buffer_in(addr, end) {
        return Err(Errno::EADDRINUSE);
    }
    Ok(())
}

/// Reads the owner's mappings: drops the unmapped pages of every range and notes the read-only
/// ones for the GPU (see the module documentation).
fn refresh(ctx: &Ctx) -> Result<Vec<Mapping>, Errno> {
    let maps = ctx.process.memory.mappings()?;
    let pages = |m: &Mapping| (m.start.div_ceil(PAGE_SIZE), m.end / PAGE_SIZE);
    let mut mapped: Vec<(u64, u64)> = Vec::new();
    for (s, e) in maps.iter().map(pages).filter(|(s, e)| s < e) {
        match mapped.last_mut() {
            Some(last) if last.1 == s => last.1 = e,
            _ => mapped.push((s, e)),
        }
    }
    let read_only = maps.iter().filter(|m| !m.writable).map(pages).filter(|(s, e)| s < e).collect();
    let mut vm = ctx.process.vm_mut();
    vm.svm.ranges.retain_mapped(&mapped);
    vm.svm.read_only = read_only;
    Ok(maps)
}

/// Whether SVM ranges hold any of pages `[start, last]` (an ALLOC there is EADDRINUSE), once
/// the pages the owner has unmapped are dropped: they are only looked up when a range is in the
/// way, as the ALLOC would otherwise find a stale range amdkfd's notifier would have removed.
///
/// A buffer's address is reserved by the runtime (libhsakmt, this project's thunk) with a
/// PROT_NONE mapping before its ALLOC, often right where freed SVM memory was, so that memory
/// is mapped again before any request could see it gone. Range pages found PROT_NONE under an
/// ALLOC are taken for such a reservation and dropped. (A live range the program itself made
/// PROT_NONE and then allocated a buffer over would be refused by amdkfd and is not here.)
pub(super) fn holds(ctx: &Ctx, start: u64, last: u64) -> bool {
    if !ctx.process.vm().svm.ranges.overlaps(start, last) {
        return false;
    }
    if let Ok(maps) = refresh(ctx) {
        let mut vm = ctx.process.vm_mut();
        for m in maps.iter().filter(|m| m.inaccessible) {
            let (s, e) = (m.start.div_ceil(PAGE_SIZE).max(start), (m.end / PAGE_SIZE).min(last.saturating_add(1)));
            if s < e {
                vm.svm.ranges.remove(s, e - 1);
            }
        }
    }
    ctx.process.vm().svm.ranges.overlaps(start, last)
}

fn set_attr(ctx: &Ctx, addr: u64, size: u64, start: u64, last: u64, list: &[SvmAttribute]) -> Result<(), Errno> {
    let attrs = check_attrs(ctx, list)?;
    revalidate(ctx, addr, size)?;
    let mut vm = ctx.process.vm_mut();
    let new_range = Attrs::new_range(vm.svm.xnack, vm.svm.supported());
    vm.svm.ranges.set_attr(start, last, &attrs, new_range);
    Ok(())
}

fn get_attr(ctx: &Ctx, addr: u64, size: u64, start: u64, last: u64, list: &mut [SvmAttribute]) -> Result<(), Errno> {
    revalidate(ctx, addr, size)?;
    // Only the attributes a range has can be asked for (ACCESS answers for the GPU its value
    // names with one of the three access types).
    let known = [
        KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
        KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
        KFD_IOCTL_SVM_ATTR_ACCESS,
        KFD_IOCTL_SVM_ATTR_SET_FLAGS,
        KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
        KFD_IOCTL_SVM_ATTR_GRANULARITY,
    ];
    if list.iter().any(|at| !known.contains(&at.type_)) {
        return Err(Errno::EINVAL);
    }
    let vm = ctx.process.vm();
    let s = vm.svm.ranges.get_attr(start, last, vm.svm.xnack, vm.svm.supported());
    for at in list.iter_mut() {
        match at.type_ {
            KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => at.value = s.preferred_loc,
            KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => at.value = s.prefetch_loc,
            KFD_IOCTL_SVM_ATTR_ACCESS => {
                let bit = 1u64.checked_shl(vm.svm.index(at.value).ok_or(Errno::EINVAL)? as u32).unwrap_or(0);
                at.type_ = if s.access & bit != 0 {
                    KFD_IOCTL_SVM_ATTR_ACCESS
                } else if s.access_in_place & bit != 0 {
                    KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
                } else {
                    KFD_IOCTL_SVM_ATTR_NO_ACCESS
                };
            }
            KFD_IOCTL_SVM_ATTR_SET_FLAGS => at.value = s.flags_and,
            KFD_IOCTL_SVM_ATTR_CLR_FLAGS => at.value = !s.flags_or,
            KFD_IOCTL_SVM_ATTR_GRANULARITY => at.value = u32::from(s.granularity),
            _ => unreachable!("checked above"),
        }
    }
    Ok(())
}
