/*
 * cuse_kfd_shim.h: what libhsa-runtime64.so.1 from rocr-shim offers beyond hsa.h and
 * hsa_ext_amd.h (ROCr 5.2.3 as Debian ships them).
 *
 *  1. The batch signal API and the two attributes of ROCr interface 1.36 that Debian's headers
 *     lack (the values are the shim's own choice until upstream headers are public; they are
 *     defined only when hsa_ext_amd.h is older than 1.36).
 *  2. The device's soft kernels: a kernel object per builtin, their argument layouts, and a
 *     synchronous dispatch helper.
 *  3. Debug introspection: counters, per-signal facts, and the reason of the last error.
 *
 * Environment read by hsa_init (besides CUSE_KFD_EMBEDDED=1 / CUSE_KFD_DEVICE=PATH, which pick
 * the device): CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH=0|1 overrides what GPU agents report for
 * HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH (default: 1 for a discrete GPU);
 * CUSE_KFD_SHIM_DEVICE_SIGNALS=0 makes GPU pools not signal-capable.
 */
#ifndef CUSE_KFD_SHIM_H
#define CUSE_KFD_SHIM_H

#include <stdint.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. ROCr interface 1.36: signal batches ------------------------------------------- */

#if !defined(HSA_AMD_INTERFACE_VERSION_MINOR) || HSA_AMD_INTERFACE_VERSION_MINOR < 36

/* hsa_amd_memory_pool_info_t, bool: signals may be placed in this pool. */
#define HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE ((hsa_amd_memory_pool_info_t)0x5E00)
/* hsa_agent_info_t (hsa_amd_agent_info_t), bool: host stores to this agent's device memory
 * travel over PCIe and need one HDP flush to become visible to the agent. */
#define HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH ((hsa_agent_info_t)0xA5E0)

typedef struct hsa_amd_signal_batch_s {
  uint64_t handle;
} hsa_amd_signal_batch_t;

typedef enum {
  HSA_AMD_SIGNAL_PLACEMENT_HOST = 0,
  HSA_AMD_SIGNAL_PLACEMENT_DEVICE = 1,
} hsa_amd_signal_placement_t;

/*
 * Creates `count` signals, all with `initial_value`, from one arena of 128-byte slots in one
 * allocation. `num_consumers`/`consumers`/`attributes` mean what they mean to
 * hsa_amd_signal_create (a batch for GPU consumers only needs no interrupt event; the members of
 * an interrupt batch share one KFD event).
 *
 * `device.handle == 0` places the signals in host memory. A GPU agent asks for its
 * signal-capable device pool; without one, or if that allocation fails, the signals go to host
 * memory instead. `*placement` (may be NULL) says where they went. Host stores to signals in
 * device memory are followed by one HDP flush when the agent reports
 * HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH.
 *
 * `signals` receives `count` handles. Each member is destroyed with hsa_signal_destroy, in any
 * order; the batch handle may be destroyed at once (hsa_amd_signal_batch_destroy) while members
 * live on. The arena is freed exactly once, when the handle and every member are gone (its
 * memory may then serve a later batch of the same size and placement: fresh memory costs a KFD
 * allocation and a page fault per page; hsa_amd_memory_pool_allocate takes it back when short).
 */
hsa_status_t hsa_amd_signal_batch_create(hsa_signal_value_t initial_value, uint32_t count,
                                         uint32_t num_consumers, const hsa_agent_t* consumers,
                                         uint64_t attributes, hsa_agent_t device,
                                         hsa_signal_t* signals, hsa_amd_signal_batch_t* batch,
                                         hsa_amd_signal_placement_t* placement);

/* Releases the batch handle; the members stay valid until each is destroyed. */
hsa_status_t hsa_amd_signal_batch_destroy(hsa_amd_signal_batch_t batch);

#endif /* interface < 1.36 */

/* ---- 2. Soft kernels (uapi/src/soft.rs) ------------------------------------------------- */

/* Builtins; each is defined per work-item over a 1-D grid (flat id i). */
#define CUSE_KFD_SOFT_KERNEL_NOP 0            /* no arguments */
#define CUSE_KFD_SOFT_KERNEL_FILL_U32 1       /* u32 at dst + 4i = value */
#define CUSE_KFD_SOFT_KERNEL_COPY_BYTES 2     /* byte at dst + i = byte at src + i */
#define CUSE_KFD_SOFT_KERNEL_ATOMIC_ADD_U64 3 /* every item: atomic u64 add of value at addr */
#define CUSE_KFD_SOFT_KERNEL_WRITE_FLAT_ID 4  /* u32 at dst + 4i = i (and its workgroup id) */
#define CUSE_KFD_SOFT_KERNEL_SLEEP 5          /* completes after `nanoseconds` */
#define CUSE_KFD_SOFT_KERNEL_SIGNAL_STORE 6   /* device store of value to a signal (wakes it) */

typedef struct { uint64_t dst; uint32_t value; uint32_t reserved; } cuse_kfd_fill_args_t;
typedef struct { uint64_t dst; uint64_t src; } cuse_kfd_copy_args_t;
typedef struct { uint64_t addr; uint64_t value; } cuse_kfd_atomic_add_args_t;
typedef struct { uint64_t dst; uint64_t wg_dst; } cuse_kfd_flat_id_args_t;
typedef struct { uint64_t nanoseconds; } cuse_kfd_sleep_args_t;
typedef struct { hsa_signal_t signal; hsa_signal_value_t value; } cuse_kfd_signal_store_args_t;

/*
 * The kernel_object a kernel dispatch packet names to run `builtin` on GPU `agent`, and the
 * bytes of kernel arguments it reads from kernarg_address (may be NULL). Allocate kernel
 * arguments from the kernarg region (or a pool); this device runs no GFX code objects.
 */
hsa_status_t cuse_kfd_shim_soft_kernel(hsa_agent_t agent, uint32_t builtin, uint64_t* kernel_object,
                                       uint32_t* kernarg_size);

/*
 * Writes a kernel dispatch packet for `builtin` with a copy of `args` (in runtime-owned kernarg
 * memory) on `queue`, rings its doorbell and waits at most `timeout` ns for it. A queue error
 * (the device stopped the queue) is returned as its status.
 */
hsa_status_t cuse_kfd_shim_dispatch_sync(hsa_queue_t* queue, uint32_t builtin, const void* args,
                                         uint32_t args_size, uint32_t grid_size_x,
                                         uint16_t workgroup_size_x, uint64_t timeout);

/* ---- 3. Debug introspection ------------------------------------------------------------- */

typedef struct {
  uint64_t live_signals;         /* created and not yet destroyed (queue signals included) */
  uint64_t pool_arenas;          /* arenas of 512 slots serving single creates */
  uint64_t batch_arenas_created;
  uint64_t batch_arenas_freed;   /* each batch arena counts here once, when its last user goes */
  uint64_t arena_double_frees;   /* arenas found released twice: must stay 0 */
  uint64_t hdp_flushes;          /* process-wide HDP flushes after device-memory signal stores */
  uint64_t events_created;       /* KFD signal events made for interrupt signals (pooled) */
  uint64_t live_queues;
  uint64_t live_allocations;
  uint64_t arena_memory_reused;  /* batches whose arena memory was a released batch's (recycled) */
} cuse_kfd_shim_counters_t;

hsa_status_t cuse_kfd_shim_get_counters(cuse_kfd_shim_counters_t* counters);

typedef struct {
  uint32_t interrupt;     /* 1: a KFD event wakes its waiters */
  uint32_t event_id;
  uint32_t placement;     /* hsa_amd_signal_placement_t */
  uint32_t needs_flush;   /* 1: host stores are followed by an HDP flush */
  uint32_t batch_member;
  uint32_t reserved;
} cuse_kfd_shim_signal_info_t;

hsa_status_t cuse_kfd_shim_signal_get_info(hsa_signal_t signal, cuse_kfd_shim_signal_info_t* info);

/* Why the last call that returned an error status on this thread failed ("" if none). */
const char* cuse_kfd_shim_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CUSE_KFD_SHIM_H */
