/* Memory and soft kernels: region and pool allocation, hsa_memory_copy by the device's
 * COPY_BYTES kernel checked byte for byte by the host, soft kernels dispatched with AQL packets
 * this program writes itself, and the dispatch helper. On real ROCr (CUSE_KFD_REAL_ROCR) the
 * allocation and host-memory copy parts run; VRAM copies and soft kernels are the shim's. */
#include "check.h"

static void fill_pattern(uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 31 + seed + (i >> 8));
}

/* Allocation, access and freeing, with the statuses ROCr gives for bad requests. */
static void allocations(const env_t* e) {
  uint8_t *sys = NULL, *vram = NULL;
  OK(hsa_memory_allocate(e->system, 4096, (void**)&sys));
  OK(hsa_amd_memory_pool_allocate(e->vram_pool, 4096, 0, (void**)&vram));
  /* The CPU is granted VRAM it is not allowed by default; foreign memory is refused. */
  uint8_t* host = malloc(4096);
  OK(hsa_amd_agents_allow_access(1, &e->cpu, NULL, vram));
  CHECK_STATUS(hsa_amd_agents_allow_access(1, &e->cpu, NULL, host), HSA_STATUS_ERROR);
  free(host);
  OK(hsa_memory_free(sys));
  OK(hsa_amd_memory_pool_free(vram));
  CHECK_STATUS(hsa_memory_free(sys), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  OK(hsa_memory_free(NULL));
  void* p = NULL;
  CHECK_STATUS(hsa_memory_allocate(e->system, 0, &p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  size_t vsize = 0;
  OK(hsa_region_get_info(e->vram, HSA_REGION_INFO_ALLOC_MAX_SIZE, &vsize));
  CHECK_STATUS(hsa_memory_allocate(e->vram, vsize + 4096, &p), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(hsa_amd_memory_pool_allocate(e->vram_pool, 4096, 1, &p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

/* hsa_memory_copy between host memory: the shim's device copies its own allocations, ROCr
 * copies with the CPU; memory neither runtime allocated is copied by the CPU on both. */
static void host_copies(const env_t* e) {
  const size_t N = 33 * 4096; /* > 2 x 65537, whole pages: the allocation ends where the buffer does */
  uint8_t *sys = NULL, *back = NULL;
  OK(hsa_memory_allocate(e->system, N, (void**)&sys));
  OK(hsa_amd_memory_pool_allocate(e->sys_pool, N, 0, (void**)&back));
  fill_pattern(sys, N, 2);
  /* Odd sizes and offsets. */
  const size_t sizes[] = {1, 3, 4097, 65537};
  for (unsigned i = 0; i < 4; i++) {
    memset(back, 0xEE, N);
    OK(hsa_memory_copy(back + 5, sys + 11, sizes[i]));
    CHECK(memcmp(back + 5, sys + 11, sizes[i]) == 0);
    CHECK(back[4] == 0xEE && back[5 + sizes[i]] == 0xEE);
  }
  OK(hsa_memory_copy(back, sys, 0));
  uint8_t* host = malloc(4096);
  fill_pattern(host, 4096, 3);
  OK(hsa_memory_copy(back, host, 4096));
  CHECK(memcmp(back, host, 4096) == 0);
  OK(hsa_memory_copy(host + 1, sys, 64));
  CHECK(memcmp(host + 1, sys, 64) == 0);
#if CHECKS_MISUSE
  /* Past the end of an allocation (ROCr copies whatever lies there). */
  CHECK_STATUS(hsa_memory_copy(back + N - 8, sys, 64), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cuse_kfd_shim_last_error(), "not inside memory this runtime allocated") != NULL);
  CHECK_STATUS(hsa_memory_copy(back + N - 8, host, 64), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cuse_kfd_shim_last_error(), "past the end") != NULL);
#endif
  free(host);
  OK(hsa_memory_free(sys));
  OK(hsa_amd_memory_pool_free(back));
}

#ifndef CUSE_KFD_REAL_ROCR
/* Copies to and from VRAM, done by the device's COPY_BYTES kernel. Shim only: ROCr copies VRAM
 * with its blit kernels, GFX code the device cannot run. */
static void vram_copies(const env_t* e) {
  const size_t MB = 1 << 20;
  uint8_t *sys = NULL, *back = NULL, *vram = NULL;
  OK(hsa_memory_allocate(e->system, MB, (void**)&sys));
  OK(hsa_amd_memory_pool_allocate(e->sys_pool, MB, 0, (void**)&back));
  OK(hsa_amd_memory_pool_allocate(e->vram_pool, MB, 0, (void**)&vram));
  fill_pattern(sys, MB, 1);
  memset(back, 0, MB);
  uint64_t t0 = now_ns();
  OK(hsa_memory_copy(vram, sys, MB));
  OK(hsa_memory_copy(back, vram, MB));
  printf("2 x 1 MiB copies: %.2f ms\n", (now_ns() - t0) / 1e6);
  CHECK(memcmp(back, sys, MB) == 0);
  OK(hsa_memory_free(sys));
  OK(hsa_amd_memory_pool_free(back));
  OK(hsa_amd_memory_pool_free(vram));
}

/* FILL_U32, ATOMIC_ADD_U64 and WRITE_FLAT_ID through packets written here. */
static void soft_kernels(const env_t* e) {
  hsa_queue_t* q = NULL;
  OK(hsa_queue_create(e->gpu, 128, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
  const uint32_t n = 4096;
  uint32_t *vram = NULL, *host = NULL;
  OK(hsa_amd_memory_pool_allocate(e->vram_pool, n * 4, 0, (void**)&vram));
  OK(hsa_memory_allocate(e->system, n * 4, (void**)&host));
  uint64_t fill, add, flat;
  uint32_t size;
  OK(cuse_kfd_shim_soft_kernel(e->gpu, CUSE_KFD_SOFT_KERNEL_FILL_U32, &fill, &size));
  CHECK(size == sizeof(cuse_kfd_fill_args_t));
  OK(cuse_kfd_shim_soft_kernel(e->gpu, CUSE_KFD_SOFT_KERNEL_ATOMIC_ADD_U64, &add, NULL));
  OK(cuse_kfd_shim_soft_kernel(e->gpu, CUSE_KFD_SOFT_KERNEL_WRITE_FLAT_ID, &flat, NULL));
  CHECK_STATUS(cuse_kfd_shim_soft_kernel(e->gpu, 99, &fill, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cuse_kfd_shim_soft_kernel(e->cpu, 1, &fill, NULL), HSA_STATUS_ERROR_INVALID_AGENT);

  cuse_kfd_fill_args_t* fa = NULL;
  cuse_kfd_atomic_add_args_t* aa = NULL;
  cuse_kfd_flat_id_args_t* ia = NULL;
  OK(hsa_memory_allocate(e->kernarg, sizeof *fa, (void**)&fa));
  OK(hsa_memory_allocate(e->kernarg, sizeof *aa, (void**)&aa));
  OK(hsa_memory_allocate(e->kernarg, sizeof *ia, (void**)&ia));
  uint64_t* counter = NULL;
  OK(hsa_memory_allocate(e->system, 8, (void**)&counter));
  *counter = 5;
  fa->dst = (uint64_t)(uintptr_t)vram;
  fa->value = 0xFEEDF00D;
  aa->addr = (uint64_t)(uintptr_t)counter;
  aa->value = 3;
  ia->dst = (uint64_t)(uintptr_t)host;
  ia->wg_dst = 0;
  hsa_signal_t done = new_signal(3);
  submit_dispatch(q, fill, fa, n, 256, done);
  submit_dispatch(q, add, aa, 1000, 100, done);
  submit_dispatch(q, flat, ia, n, 64, done);
  wait_eq(done, 0);
  CHECK(*counter == 5 + 3000);
  for (uint32_t i = 0; i < n; i++) CHECK(host[i] == i);
  OK(hsa_memory_copy(host, vram, n * 4));
  for (uint32_t i = 0; i < n; i++) CHECK(host[i] == 0xFEEDF00D);

  /* The dispatch helper, and a queue error coming back as its status. */
  cuse_kfd_copy_args_t ca = {(uint64_t)(uintptr_t)vram, (uint64_t)(uintptr_t)counter};
  OK(cuse_kfd_shim_dispatch_sync(q, CUSE_KFD_SOFT_KERNEL_COPY_BYTES, &ca, sizeof ca, 8, 8, 10000 * MS));
  uint64_t got = 0;
  OK(hsa_memory_copy(host, vram, 8));
  memcpy(&got, host, 8);
  CHECK(got == 3005);
  CHECK_STATUS(cuse_kfd_shim_dispatch_sync(q, CUSE_KFD_SOFT_KERNEL_COPY_BYTES, &ca, 4, 8, 8, 10000 * MS),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  OK(hsa_signal_destroy(done));
  OK(hsa_memory_free(fa));
  OK(hsa_memory_free(aa));
  OK(hsa_memory_free(ia));
  OK(hsa_memory_free(counter));
  OK(hsa_memory_free(host));
  OK(hsa_amd_memory_pool_free(vram));
  OK(hsa_queue_destroy(q));
}

#endif /* !CUSE_KFD_REAL_ROCR */

int main(void) {
  OK(hsa_init());
  env_t e = find_env();
  allocations(&e);
  host_copies(&e);
#ifndef CUSE_KFD_REAL_ROCR
  vram_copies(&e);
  soft_kernels(&e);
  cuse_kfd_shim_counters_t c;
  OK(cuse_kfd_shim_get_counters(&c));
  CHECK(c.live_allocations == 0 && c.live_queues == 0);
#endif
  OK(hsa_shut_down());
  printf("PASS copy\n");
  return 0;
}
