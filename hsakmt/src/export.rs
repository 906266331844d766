//! The C names of the API, versioned `HSAKMT_1`.
//!
//! rustc links a cdylib with its own anonymous version script that lists every `#[no_mangle]`
//! function; an exact name there takes precedence over `hsakmt.ver`, and the symbols would come
//! out unversioned. So the `api` functions keep Rust (mangled, unexported) names, and each C name
//! is defined here as a tail jump to its function: rustc does not know these symbols, and
//! `hsakmt.ver` alone exports them, at version HSAKMT_1. A `jmp` leaves every argument register
//! and the stack as the caller set them, so the trampoline is ABI-transparent.

use crate::api::*;

#[cfg(not(target_arch = "x86_64"))]
compile_error!("the export trampolines are x86-64 code (a jmp); other architectures need their own branch");

/// Defines each `module::name` as a global function symbol `name` jumping to `api::module::name`.
macro_rules! export_c {
    ($($module:ident :: $name:ident),* $(,)?) => {
        std::arch::global_asm!(
            ".pushsection .text",
            $(
                concat!(".globl ", stringify!($name)),
                concat!(".type ", stringify!($name), ", @function"),
                concat!(".p2align 4"),
                concat!(stringify!($name), ":"),
                concat!("jmp {", stringify!($name), "}"),
                concat!(".size ", stringify!($name), ", . - ", stringify!($name)),
            )*
            ".popsection",
            $($name = sym $module::$name,)*
        );
    };
}

export_c!(
    system::hsaKmtAcquireSystemProperties,
    memory::hsaKmtAllocMemory,
    queues::hsaKmtAllocQueueGWS,
    system::hsaKmtCloseKFD,
    events::hsaKmtCreateEvent,
    queues::hsaKmtCreateQueue,
    debug::hsaKmtDbgAddressWatch,
    debug::hsaKmtDbgRegister,
    debug::hsaKmtDbgUnregister,
    debug::hsaKmtDbgWavefrontControl,
    memory::hsaKmtDeregisterMemory,
    events::hsaKmtDestroyEvent,
    queues::hsaKmtDestroyQueue,
    memory::hsaKmtFreeMemory,
    system::hsaKmtGetClockCounters,
    debug::hsaKmtGetKernelDebugTrapVersionInfo,
    system::hsaKmtGetNodeCacheProperties,
    system::hsaKmtGetNodeIoLinkProperties,
    system::hsaKmtGetNodeMemoryProperties,
    system::hsaKmtGetNodeProperties,
    queues::hsaKmtGetQueueInfo,
    system::hsaKmtGetTileConfig,
    system::hsaKmtGetVersion,
    system::hsaKmtGetXNACKMode,
    memory::hsaKmtMapGraphicHandle,
    memory::hsaKmtMapMemoryToGPU,
    memory::hsaKmtMapMemoryToGPUNodes,
    system::hsaKmtOpenKFD,
    profiling::hsaKmtPmcAcquireTraceAccess,
    profiling::hsaKmtPmcGetCounterProperties,
    profiling::hsaKmtPmcQueryTrace,
    profiling::hsaKmtPmcRegisterTrace,
    profiling::hsaKmtPmcReleaseTraceAccess,
    profiling::hsaKmtPmcStartTrace,
    profiling::hsaKmtPmcStopTrace,
    profiling::hsaKmtPmcUnregisterTrace,
    memory::hsaKmtProcessVMRead,
    memory::hsaKmtProcessVMWrite,
    events::hsaKmtQueryEventState,
    memory::hsaKmtQueryPointerInfo,
    memory::hsaKmtRegisterGraphicsHandleToNodes,
    memory::hsaKmtRegisterMemory,
    memory::hsaKmtRegisterMemoryToNodes,
    memory::hsaKmtRegisterMemoryWithFlags,
    memory::hsaKmtRegisterSharedHandle,
    memory::hsaKmtRegisterSharedHandleToNodes,
    system::hsaKmtReleaseSystemProperties,
    events::hsaKmtResetEvent,
    system::hsaKmtRuntimeDisable,
    system::hsaKmtRuntimeEnable,
    profiling::hsaKmtSPMAcquire,
    profiling::hsaKmtSPMRelease,
    profiling::hsaKmtSPMSetDestBuffer,
    system::hsaKmtSVMGetAttr,
    system::hsaKmtSVMSetAttr,
    events::hsaKmtSetEvent,
    system::hsaKmtSetMemoryPolicy,
    memory::hsaKmtSetMemoryUserData,
    queues::hsaKmtSetQueueCUMask,
    system::hsaKmtSetTrapHandler,
    system::hsaKmtSetXNACKMode,
    memory::hsaKmtShareMemory,
    memory::hsaKmtUnmapGraphicHandle,
    memory::hsaKmtUnmapMemoryToGPU,
    queues::hsaKmtUpdateQueue,
    events::hsaKmtWaitOnEvent,
    events::hsaKmtWaitOnMultipleEvents,
);
