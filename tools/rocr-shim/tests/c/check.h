/* Helpers shared by the C tests of the shim: checks, agent/region/pool discovery and AQL
 * packet submission written the way an HSA program writes them. */
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

#include "cuse_kfd_shim.h"

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
              #expr, (unsigned)s_, t_ ? t_ : "?", cuse_kfd_shim_last_error(),          \
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

static hsa_status_t first_pool(hsa_amd_memory_pool_t p, void* data) {
  *(hsa_amd_memory_pool_t*)data = p;
  return HSA_STATUS_INFO_BREAK;
}

static inline env_t find_env(void) {
  env_t e;
  memset(&e, 0, sizeof e);
  OK(hsa_iterate_agents(find_agent, &e));
  CHECK(e.cpu.handle && e.gpu.handle);
  OK(hsa_agent_iterate_regions(e.gpu, find_region, &e));
  CHECK(e.system.handle && e.kernarg.handle && e.vram.handle);
  CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(e.cpu, first_pool, &e.sys_pool), HSA_STATUS_INFO_BREAK);
  CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(e.gpu, first_pool, &e.vram_pool), HSA_STATUS_INFO_BREAK);
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
