/* Helpers shared by the C tests of the shim: checks, agent/region/pool discovery and AQL
 * packet submission written the way an HSA program writes them.
 *
 * Two modes. By default a program is built for the shim and may use its extensions
 * (cuse_kfd_shim.h). With -DCUSE_KFD_REAL_ROCR it is built against Debian's real ROCr 5.2.3
 * (kfd-tests/tests/shim_programs.rs): the extensions are compiled out, so the same standard-HSA
 * checks hold on both runtimes. */
#ifndef SHIM_TEST_CHECK_H
#define SHIM_TEST_CHECK_H

#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#ifdef CUSE_KFD_REAL_ROCR
#include <dlfcn.h>
/* Real ROCr has no way to say why a call failed beyond its status. */
#define LAST_ERROR() "real ROCr"
/* Misuse the HSA specification leaves undefined (a made-up or destroyed handle, a queue's own
 * doorbell signal destroyed, a copy past the end of an allocation): the shim validates and
 * returns an error status; real ROCr takes handles for object addresses and crashes, aborts on
 * an assertion, or carries on. Such checks are under #if CHECKS_MISUSE: they are the shim's,
 * not a behaviour both runtimes share. */
#define CHECKS_MISUSE 0
#else
#include "cuse_kfd_shim.h"
#define LAST_ERROR() cuse_kfd_shim_last_error()
#define CHECKS_MISUSE 1
#endif

/* Before main: stdout line-buffered, so that a program that crashes still shows how far it got.
 * Built for real ROCr, it must run on it (a library path that puts the shim first would have the
 * checks pass or fail for the wrong runtime): it says which library answers. */
__attribute__((constructor)) static void program_start(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef CUSE_KFD_REAL_ROCR
  Dl_info info;
  if (dladdr((void*)hsa_init, &info) && info.dli_fname) printf("runtime: %s\n", info.dli_fname);
  if (dlsym(RTLD_DEFAULT, "cuse_kfd_shim_last_error") != NULL) {
    fprintf(stderr, "built for the real ROCr (CUSE_KFD_REAL_ROCR), but the shim's library was loaded\n");
    exit(1);
  }
#endif
}

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);         \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

#define CHECK_STATUS(expr, want)                                                       \
  do {                                                                                 \
    hsa_status_t s_ = (expr);                                                          \
    if (s_ != (hsa_status_t)(want)) {                                                  \
      const char* t_ = NULL;                                                           \
      hsa_status_string(s_, &t_);                                                      \
      fprintf(stderr, "%s:%d: %s = %#x (%s) [%s], want %#x\n", __FILE__, __LINE__,     \
              #expr, (unsigned)s_, t_ ? t_ : "?", LAST_ERROR(),                        \
              (unsigned)(want));                                                       \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

#define OK(expr) CHECK_STATUS(expr, HSA_STATUS_SUCCESS)

#define MS 1000000ull /* system timestamp ticks (ns) per millisecond */

static inline uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_BOOTTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline void sleep_ms(unsigned ms) { usleep(ms * 1000u); }

/* A loop count of a stress part divided by $CUSE_KFD_TEST_DIVISOR (default 1): the device tier
 * runs these programs under TCG, where a round trip through CUSE costs milliseconds. */
static inline int scaled(int n) {
  const char* d = getenv("CUSE_KFD_TEST_DIVISOR");
  int k = d ? atoi(d) : 1;
  return k > 1 ? (n / k > 0 ? n / k : 1) : n;
}

typedef struct {
  hsa_agent_t cpu, gpu;
  hsa_region_t system, kernarg, vram;
  hsa_amd_memory_pool_t sys_pool, vram_pool;
} env_t;

static hsa_status_t find_agent(hsa_agent_t a, void* data) {
  env_t* e = data;
  hsa_device_type_t t;
  OK(hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t));
  if (t == HSA_DEVICE_TYPE_CPU && !e->cpu.handle) e->cpu = a;
  if (t == HSA_DEVICE_TYPE_GPU && !e->gpu.handle) e->gpu = a;
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_region(hsa_region_t r, void* data) {
  env_t* e = data;
  uint32_t flags;
  OK(hsa_region_get_info(r, HSA_REGION_INFO_GLOBAL_FLAGS, &flags));
  if ((flags & HSA_REGION_GLOBAL_FLAG_KERNARG) && !e->kernarg.handle) e->kernarg = r;
  else if ((flags & HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED) && !e->vram.handle) e->vram = r;
  else if ((flags & HSA_REGION_GLOBAL_FLAG_FINE_GRAINED) && !e->system.handle) e->system = r;
  return HSA_STATUS_SUCCESS;
}

/* The first global pool with all of the flags in `want`: pools are found by what they are, not
 * by position (ROCr lists three system pools, the shim one). */
typedef struct {
  uint32_t want;
  hsa_amd_memory_pool_t found;
} pool_query_t;

static hsa_status_t find_pool(hsa_amd_memory_pool_t p, void* data) {
  pool_query_t* q = data;
  hsa_amd_segment_t seg;
  uint32_t flags;
  OK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg));
  if (seg != HSA_AMD_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
  OK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
  if ((flags & q->want) != q->want) return HSA_STATUS_SUCCESS;
  q->found = p;
  return HSA_STATUS_INFO_BREAK;
}

static inline env_t find_env(void) {
  env_t e;
  memset(&e, 0, sizeof e);
  OK(hsa_iterate_agents(find_agent, &e));
  CHECK(e.cpu.handle && e.gpu.handle);
  OK(hsa_agent_iterate_regions(e.gpu, find_region, &e));
  CHECK(e.system.handle && e.kernarg.handle && e.vram.handle);
  pool_query_t sys = {HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, {0}};
  pool_query_t vram = {HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, {0}};
  CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(e.cpu, find_pool, &sys), HSA_STATUS_INFO_BREAK);
  CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(e.gpu, find_pool, &vram), HSA_STATUS_INFO_BREAK);
  e.sys_pool = sys.found;
  e.vram_pool = vram.found;
  return e;
}

static inline uint16_t packet_header(hsa_packet_type_t type, int barrier) {
  return (uint16_t)(type | (barrier ? 1 << HSA_PACKET_HEADER_BARRIER : 0) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
}

/* Reserves a slot, writes the body, publishes header and setup with one release store and
 * rings the doorbell; returns the packet's index. */
static inline uint64_t submit(hsa_queue_t* q, const void* packet) {
  uint64_t idx = hsa_queue_add_write_index_scacq_screl(q, 1);
  while (idx - hsa_queue_load_read_index_scacquire(q) >= q->size) sched_yield();
  uint8_t* slot = (uint8_t*)q->base_address + (idx % q->size) * 64;
  memcpy(slot + 4, (const uint8_t*)packet + 4, 60);
  uint32_t head;
  memcpy(&head, packet, 4);
  __atomic_store_n((uint32_t*)slot, head, __ATOMIC_RELEASE);
  hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)idx);
  return idx;
}

static inline uint64_t submit_barrier(hsa_queue_t* q, hsa_packet_type_t type, const hsa_signal_t deps[5],
                                      hsa_signal_t completion) {
  hsa_barrier_and_packet_t p;
  memset(&p, 0, sizeof p);
  p.header = packet_header(type, 0);
  for (int i = 0; i < 5; i++) p.dep_signal[i] = deps[i];
  p.completion_signal = completion;
  return submit(q, &p);
}

static inline uint64_t submit_dispatch(hsa_queue_t* q, uint64_t kernel_object, void* kernarg, uint32_t grid,
                                       uint16_t wg, hsa_signal_t completion) {
  hsa_kernel_dispatch_packet_t p;
  memset(&p, 0, sizeof p);
  p.header = packet_header(HSA_PACKET_TYPE_KERNEL_DISPATCH, 1);
  p.setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
  p.workgroup_size_x = wg;
  p.workgroup_size_y = p.workgroup_size_z = 1;
  p.grid_size_x = grid;
  p.grid_size_y = p.grid_size_z = 1;
  p.kernel_object = kernel_object;
  p.kernarg_address = kernarg;
  p.completion_signal = completion;
  return submit(q, &p);
}

/* Waits (BLOCKED) for `s` to reach `value`, failing the test after 10 s. */
static inline void wait_eq(hsa_signal_t s, hsa_signal_value_t value) {
  hsa_signal_value_t v = hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, value, 10000 * MS, HSA_WAIT_STATE_BLOCKED);
  if (v != value) {
    fprintf(stderr, "signal %#lx: %ld after 10 s, want %ld\n", (unsigned long)s.handle, (long)v, (long)value);
    exit(1);
  }
}

static inline hsa_signal_t new_signal(hsa_signal_value_t v) {
  hsa_signal_t s;
  OK(hsa_signal_create(v, 0, NULL, &s));
  return s;
}

#endif
