/* hsa_init/hsa_shut_down reference counting, system info, agents, regions and pools,
 * status strings, and errors (never a fake success) for what the shim does not support. */
#include "check.h"

static hsa_status_t count_agents(hsa_agent_t a, void* data) {
  (void)a;
  ++*(int*)data;
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t break_first(hsa_agent_t a, void* data) {
  (void)a;
  ++*(int*)data;
  return HSA_STATUS_INFO_BREAK;
}

static void agent_name(hsa_agent_t a, hsa_agent_info_t attr, char out[64]) {
  memset(out, 0x7f, 64);
  OK(hsa_agent_get_info(a, attr, out));
  CHECK(memchr(out, 0, 64) != NULL);
}

static void check_gpu(hsa_agent_t gpu) {
  char name[64];
  agent_name(gpu, HSA_AGENT_INFO_NAME, name);
  CHECK(strcmp(name, "gfx90a") == 0);
  agent_name(gpu, HSA_AGENT_INFO_VENDOR_NAME, name);
  CHECK(strcmp(name, "AMD") == 0);
  uint32_t u;
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &u));
  CHECK(u == 64);
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &u));
  CHECK(u == 131072);
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_QUEUES_MAX, &u));
  CHECK(u == 128);
  hsa_agent_feature_t f;
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_FEATURE, &f));
  CHECK(f == HSA_AGENT_FEATURE_KERNEL_DISPATCH);
  hsa_profile_t p;
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_PROFILE, &p));
  CHECK(p == HSA_PROFILE_BASE);
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_WAVEFRONT_SIZE, &u));
  CHECK(u == 64);
  uint16_t dims[3];
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_WORKGROUP_MAX_DIM, dims));
  CHECK(dims[0] == 1024 && dims[2] == 1024);
  OK(hsa_agent_get_info(gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, &u));
  CHECK(u > 0);
  uint32_t caches[4];
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_CACHE_SIZE, caches));
  CHECK(caches[0] > 0);
#ifndef CUSE_KFD_REAL_ROCR /* an attribute of ROCr interface 1.36 (cuse_kfd_shim.h) */
  bool flush = false;
  OK(hsa_agent_get_info(gpu, HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH, &flush));
  CHECK(flush); /* a discrete GPU behind PCIe */
#endif
  hsa_amd_hdp_flush_t hdp;
  OK(hsa_agent_get_info(gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_HDP_FLUSH, &hdp));
  CHECK(hdp.HDP_MEM_FLUSH_CNTL && hdp.HDP_REG_FLUSH_CNTL);
  *hdp.HDP_MEM_FLUSH_CNTL = 1; /* the register page is really mapped */
  char uuid[21];
  OK(hsa_agent_get_info(gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID, uuid));
  CHECK(strncmp(uuid, "GPU-", 4) == 0);
  hsa_isa_t isa = {0};
#ifdef CUSE_KFD_REAL_ROCR
  /* Real ROCr has a code-object loader (the device still cannot run what it loads). */
  OK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_ISA, &isa));
  CHECK(isa.handle != 0);
#else
  /* No code-object loader: ISA handles are refused with a reason (README: what it does not do). */
  CHECK_STATUS(hsa_agent_get_info(gpu, HSA_AGENT_INFO_ISA, &isa), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cuse_kfd_shim_last_error(), "loader") != NULL);
#endif
  CHECK_STATUS(hsa_agent_get_info(gpu, (hsa_agent_info_t)0x7777, &u), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static void check_cpu(hsa_agent_t cpu) {
  uint32_t u;
  OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUES_MAX, &u));
  CHECK(u == 0);
  hsa_device_type_t t;
  OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_DEVICE, &t));
  CHECK(t == HSA_DEVICE_TYPE_CPU);
#ifndef CUSE_KFD_REAL_ROCR
  bool flush = true;
  OK(hsa_agent_get_info(cpu, HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH, &flush));
  CHECK(!flush);
#endif
}

static void check_memory(const env_t* e) {
  uint32_t flags, seg;
  size_t size, granule;
  bool b;
  OK(hsa_region_get_info(e->vram, HSA_REGION_INFO_GLOBAL_FLAGS, &flags));
  CHECK(flags == HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED);
  OK(hsa_region_get_info(e->kernarg, HSA_REGION_INFO_GLOBAL_FLAGS, &flags));
  CHECK(flags & HSA_REGION_GLOBAL_FLAG_KERNARG);
  OK(hsa_region_get_info(e->system, HSA_REGION_INFO_SEGMENT, &seg));
  CHECK(seg == HSA_REGION_SEGMENT_GLOBAL);
  OK(hsa_region_get_info(e->vram, HSA_REGION_INFO_SIZE, &size));
  CHECK(size >= (1ull << 30));
  OK(hsa_region_get_info(e->system, HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED, &b));
  CHECK(b);
  OK(hsa_region_get_info(e->system, HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE, &granule));
  CHECK(granule == 4096);
  OK(hsa_amd_memory_pool_get_info(e->vram_pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg));
  CHECK(seg == HSA_AMD_SEGMENT_GLOBAL);
  OK(hsa_amd_memory_pool_get_info(e->vram_pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
  CHECK(flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
#ifndef CUSE_KFD_REAL_ROCR /* ROCr interface 1.36 */
  b = false;
  OK(hsa_amd_memory_pool_get_info(e->vram_pool, HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE, &b));
  CHECK(b);
#endif
  OK(hsa_amd_memory_pool_get_info(e->sys_pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
  CHECK(flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT);
  /* An agent's own pools are open to it; the other agent's must be granted (ROCr's answers). */
  hsa_amd_memory_pool_access_t access;
  OK(hsa_amd_agent_memory_pool_get_info(e->cpu, e->sys_pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
  CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT);
  OK(hsa_amd_agent_memory_pool_get_info(e->gpu, e->vram_pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
  CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT);
  OK(hsa_amd_agent_memory_pool_get_info(e->cpu, e->vram_pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
  CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
  OK(hsa_amd_agent_memory_pool_get_info(e->gpu, e->sys_pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
  CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
#if CHECKS_MISUSE
  hsa_amd_memory_pool_t bogus = {0x1234};
  CHECK_STATUS(hsa_amd_memory_pool_get_info(bogus, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size),
               HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
#endif
}

int main(void) {
  int n = 0;
  CHECK_STATUS(hsa_iterate_agents(count_agents, &n), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  OK(hsa_init());
  OK(hsa_init());

  uint16_t major = 0, minor = 0;
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major));
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MINOR, &minor));
  CHECK(major == 1 && minor == 1);
  uint64_t freq = 0, t1 = 0, t2 = 0, max_wait = 0;
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq));
  CHECK(freq == 1000000000ull);
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t1));
  sleep_ms(2);
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t2));
  CHECK(t2 > t1 && t2 - t1 >= 2 * MS && t2 - t1 < 2000 * MS);
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT, &max_wait));
  CHECK(max_wait == UINT64_MAX);
  hsa_endianness_t endian;
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_ENDIANNESS, &endian));
  CHECK(endian == HSA_ENDIANNESS_LITTLE);
  hsa_machine_model_t model;
  OK(hsa_system_get_info(HSA_SYSTEM_INFO_MACHINE_MODEL, &model));
  CHECK(model == HSA_MACHINE_MODEL_LARGE);
  /* Neither runtime has the performance counter extension. */
  bool ext = true;
  OK(hsa_system_extension_supported(HSA_EXTENSION_PERFORMANCE_COUNTERS, 1, 0, &ext));
  CHECK(!ext);
#ifndef CUSE_KFD_REAL_ROCR
  /* The shim has no extensions at all; real ROCr has images and the finalizer. */
  ext = true;
  OK(hsa_system_extension_supported(HSA_EXTENSION_IMAGES, 1, 0, &ext));
  CHECK(!ext);
#endif

  n = 0;
  OK(hsa_iterate_agents(count_agents, &n));
  CHECK(n == 2);
  n = 0;
  CHECK_STATUS(hsa_iterate_agents(break_first, &n), HSA_STATUS_INFO_BREAK);
  CHECK(n == 1);
  env_t e = find_env();
  check_gpu(e.gpu);
  check_cpu(e.cpu);
  check_memory(&e);

  const char* text = NULL;
  OK(hsa_status_string(HSA_STATUS_ERROR_INVALID_ARGUMENT, &text));
  CHECK(text && strstr(text, "INVALID_ARGUMENT"));
  CHECK_STATUS(hsa_status_string((hsa_status_t)0x4242, &text), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  /* Registration is a no-op in the base profile (HSA 1.1), as in ROCr; size 0 is refused. */
  char host[64];
  OK(hsa_memory_register(host, sizeof host));
  CHECK_STATUS(hsa_memory_register(host, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  OK(hsa_memory_deregister(host, sizeof host));
  hsa_signal_t s;
#ifndef CUSE_KFD_REAL_ROCR
  /* No IPC signals in the shim (README: what it does not do); ROCr makes them. */
  CHECK_STATUS(hsa_amd_signal_create(0, 0, NULL, HSA_AMD_SIGNAL_IPC, &s), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cuse_kfd_shim_last_error(), "IPC") != NULL);
#endif

  /* Reference counting: the second shut down releases; a third is an error. */
  OK(hsa_shut_down());
  OK(hsa_signal_create(1, 0, NULL, &s));
  OK(hsa_signal_destroy(s));
  OK(hsa_shut_down());
  CHECK_STATUS(hsa_signal_create(1, 0, NULL, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  /* And it comes back. */
  OK(hsa_init());
  e = find_env();
  check_gpu(e.gpu);
  OK(hsa_shut_down());
  printf("PASS info\n");
  return 0;
}
