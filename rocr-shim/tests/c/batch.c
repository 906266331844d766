/* The batch signal API: one arena per batch; the handle released first, members destroyed in
 * random order, the arena freed exactly once; device-memory placement with one HDP flush per
 * store when the agent needs it, and the fallbacks to host memory (no signal-capable pool, a
 * full device pool) that the caller is told about. */
#include "check.h"

#define N 1000

static cuse_kfd_shim_counters_t counters(void) {
  cuse_kfd_shim_counters_t c;
  OK(cuse_kfd_shim_get_counters(&c));
  return c;
}

static void shuffle(hsa_signal_t* s, unsigned n, unsigned seed) {
  for (unsigned i = n - 1; i > 0; i--) {
    unsigned j = (unsigned)(rand_r(&seed) % (i + 1));
    hsa_signal_t t = s[i];
    s[i] = s[j];
    s[j] = t;
  }
}

static void* store_later(void* arg) {
  sleep_ms(30);
  hsa_signal_store_screlease(*(hsa_signal_t*)arg, 0);
  return NULL;
}

/* Handle first, members in random order; the arena goes with the last member, once. */
static void lifetime(void) {
  static hsa_signal_t s[N];
  cuse_kfd_shim_counters_t c0 = counters();
  hsa_amd_signal_batch_t b;
  hsa_amd_signal_placement_t where = (hsa_amd_signal_placement_t)99;
  hsa_agent_t host = {0};
  OK(hsa_amd_signal_batch_create(7, N, 0, NULL, 0, host, s, &b, &where));
  CHECK(where == HSA_AMD_SIGNAL_PLACEMENT_HOST);
  cuse_kfd_shim_counters_t c = counters();
  CHECK(c.batch_arenas_created == c0.batch_arenas_created + 1);
  CHECK(c.live_signals == c0.live_signals + N);
  /* One arena of 128-byte slots; members share one event. */
  for (unsigned i = 1; i < N; i++) CHECK(s[i].handle == s[0].handle + 128 * i);
  cuse_kfd_shim_signal_info_t i0, i1;
  OK(cuse_kfd_shim_signal_get_info(s[0], &i0));
  OK(cuse_kfd_shim_signal_get_info(s[N - 1], &i1));
  CHECK(i0.batch_member && i0.interrupt && i0.event_id == i1.event_id && !i0.needs_flush);
  for (unsigned i = 0; i < N; i++) CHECK(hsa_signal_load_relaxed(s[i]) == 7);

  OK(hsa_amd_signal_batch_destroy(b));
  CHECK_STATUS(hsa_amd_signal_batch_destroy(b), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(counters().batch_arenas_freed == c0.batch_arenas_freed);
  /* Members live on: a sleeping waiter on one wakes from a store to it. */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, store_later, &s[N / 2]) == 0);
  CHECK(hsa_signal_wait_scacquire(s[N / 2], HSA_SIGNAL_CONDITION_EQ, 0, 10000 * MS, HSA_WAIT_STATE_BLOCKED) == 0);
  pthread_join(t, NULL);

  shuffle(s, N, 42);
  for (unsigned i = 0; i < N; i++) {
    CHECK(counters().batch_arenas_freed == c0.batch_arenas_freed);
    OK(hsa_signal_destroy(s[i]));
  }
  c = counters();
  CHECK(c.batch_arenas_freed == c0.batch_arenas_freed + 1);
  CHECK(c.arena_double_frees == 0);
  CHECK(c.live_signals == c0.live_signals);
  CHECK_STATUS(hsa_signal_destroy(s[0]), HSA_STATUS_ERROR_INVALID_SIGNAL);

  /* The other order: members first, then the handle frees it. */
  OK(hsa_amd_signal_batch_create(0, 16, 0, NULL, 0, host, s, &b, NULL));
  shuffle(s, 16, 7);
  for (unsigned i = 0; i < 16; i++) OK(hsa_signal_destroy(s[i]));
  CHECK(counters().batch_arenas_freed == c0.batch_arenas_freed + 1);
  OK(hsa_amd_signal_batch_destroy(b));
  c = counters();
  CHECK(c.batch_arenas_freed == c0.batch_arenas_freed + 2 && c.arena_double_frees == 0);
  CHECK_STATUS(hsa_amd_signal_batch_create(0, 0, 0, NULL, 0, host, s, &b, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

/* Device placement: stores are followed by exactly one HDP flush each when the agent reports
 * PCIE_STORES_NEED_FLUSH, none otherwise; the GPU sees the signals (a barrier on one). */
static void device_placement(const env_t* e, int expect_flush) {
  hsa_signal_t s[64];
  hsa_amd_signal_batch_t b;
  hsa_amd_signal_placement_t where;
  bool need = !expect_flush;
  OK(hsa_agent_get_info(e->gpu, HSA_AMD_AGENT_INFO_PCIE_STORES_NEED_FLUSH, &need));
  CHECK(need == (expect_flush != 0));
  OK(hsa_amd_signal_batch_create(1, 64, 0, NULL, 0, e->gpu, s, &b, &where));
  CHECK(where == HSA_AMD_SIGNAL_PLACEMENT_DEVICE);
  cuse_kfd_shim_signal_info_t info;
  OK(cuse_kfd_shim_signal_get_info(s[5], &info));
  CHECK(info.placement == HSA_AMD_SIGNAL_PLACEMENT_DEVICE && info.needs_flush == (uint32_t)(expect_flush != 0));
  uint64_t f0 = counters().hdp_flushes;
  hsa_signal_store_screlease(s[0], 2);
  hsa_signal_silent_store_relaxed(s[1], 2);
  hsa_signal_add_relaxed(s[2], 1);
  CHECK(hsa_signal_exchange_scacq_screl(s[3], 4) == 1);
  CHECK(hsa_signal_cas_screlease(s[4], 1, 5) == 1);
  uint64_t writes = 5;
  CHECK(counters().hdp_flushes == f0 + (expect_flush ? writes : 0));
  CHECK(hsa_signal_load_scacquire(s[0]) == 2);          /* loads do not flush */
  CHECK(hsa_signal_cas_screlease(s[4], 1, 6) == 5);     /* a failed cas writes nothing */
  CHECK(counters().hdp_flushes == f0 + (expect_flush ? writes : 0));

  hsa_queue_t* q = NULL;
  OK(hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  hsa_signal_t deps[5] = {s[10], {0}, {0}, {0}, {0}};
  submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, deps, s[11]);
  sleep_ms(20);
  CHECK(hsa_signal_load_scacquire(s[11]) == 1);
  hsa_signal_store_screlease(s[10], 0);
  wait_eq(s[11], 0);
  OK(hsa_queue_destroy(q));
  OK(hsa_amd_signal_batch_destroy(b));
  for (int i = 0; i < 64; i++) OK(hsa_signal_destroy(s[i]));
}

/* A full device pool: the batch goes to host memory, and says so. */
static void full_pool_fallback(const env_t* e) {
  size_t size = 0;
  OK(hsa_amd_memory_pool_get_info(e->vram_pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size));
  void* hog = NULL;
  OK(hsa_amd_memory_pool_allocate(e->vram_pool, size - 64 * 1024, 0, &hog));
  hsa_signal_t s[N];
  hsa_amd_signal_batch_t b;
  hsa_amd_signal_placement_t where;
  OK(hsa_amd_signal_batch_create(3, N, 0, NULL, 0, e->gpu, s, &b, &where));
  CHECK(where == HSA_AMD_SIGNAL_PLACEMENT_HOST);
  for (unsigned i = 0; i < N; i++) OK(hsa_signal_destroy(s[i]));
  OK(hsa_amd_signal_batch_destroy(b));
  OK(hsa_amd_memory_pool_free(hog));
  OK(hsa_amd_signal_batch_create(3, N, 0, NULL, 0, e->gpu, s, &b, &where));
  CHECK(where == HSA_AMD_SIGNAL_PLACEMENT_DEVICE);
  OK(hsa_amd_signal_batch_destroy(b));
  for (unsigned i = 0; i < N; i++) OK(hsa_signal_destroy(s[i]));
}

/* No signal-capable pool (CUSE_KFD_SHIM_DEVICE_SIGNALS=0): the batch goes to host memory. */
static void no_pool_fallback(const env_t* e) {
  bool capable = true;
  OK(hsa_amd_memory_pool_get_info(e->vram_pool, HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE, &capable));
  CHECK(!capable);
  hsa_signal_t s[8];
  hsa_amd_signal_batch_t b;
  hsa_amd_signal_placement_t where;
  OK(hsa_amd_signal_batch_create(0, 8, 0, NULL, 0, e->gpu, s, &b, &where));
  CHECK(where == HSA_AMD_SIGNAL_PLACEMENT_HOST);
  OK(hsa_amd_signal_batch_destroy(b));
  for (int i = 0; i < 8; i++) OK(hsa_signal_destroy(s[i]));
}

/* A GPU-only batch needs no event. */
static void gpu_only(const env_t* e) {
  hsa_signal_t s[4];
  hsa_amd_signal_batch_t b;
  OK(hsa_amd_signal_batch_create(0, 4, 1, &e->gpu, 0, e->gpu, s, &b, NULL));
  cuse_kfd_shim_signal_info_t info;
  OK(cuse_kfd_shim_signal_get_info(s[0], &info));
  CHECK(!info.interrupt);
  OK(hsa_amd_signal_batch_destroy(b));
  for (int i = 0; i < 4; i++) OK(hsa_signal_destroy(s[i]));
}

int main(void) {
  OK(hsa_init());
  env_t e = find_env();
  lifetime();
  device_placement(&e, 1);
  full_pool_fallback(&e);
  gpu_only(&e);
  OK(hsa_shut_down());

  setenv("CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH", "0", 1);
  OK(hsa_init());
  e = find_env();
  device_placement(&e, 0);
  OK(hsa_shut_down());
  unsetenv("CUSE_KFD_SHIM_PCIE_STORES_NEED_FLUSH");

  setenv("CUSE_KFD_SHIM_DEVICE_SIGNALS", "0", 1);
  OK(hsa_init());
  e = find_env();
  no_pool_fallback(&e);
  OK(hsa_shut_down());
  printf("PASS batch\n");
  return 0;
}
