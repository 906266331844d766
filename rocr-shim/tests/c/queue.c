/* Queues: ROCr's size rules, the queue cap, the hsa_queue_t the caller sees, index operations
 * in every memory order, barrier-AND/OR semantics, a ring wrapped three times, and the error
 * callback of a queue the device stops. */
#include "check.h"

static hsa_queue_t* make_queue(hsa_agent_t gpu, uint32_t size) {
  hsa_queue_t* q = NULL;
  OK(hsa_queue_create(gpu, size, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
  return q;
}

static void size_rules(const env_t* e) {
  hsa_queue_t* q = NULL;
  const uint32_t invalid[] = {0, 1, 32, 63, 100, 65, 96, 131071, 200000};
  for (unsigned i = 0; i < sizeof invalid / sizeof *invalid; i++)
    CHECK_STATUS(hsa_queue_create(e->gpu, invalid[i], HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q),
                 HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_queue_create(e->gpu, 262144, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(hsa_queue_create(e->gpu, 1u << 31, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  /* Cooperative queues need global wave sync: the real ROCr gets the GPU's GWS from the device
   * (ALLOC_QUEUE_GWS), the shim does not allocate them and says so. Either way the answer must
   * agree with what the agent reports. */
  bool coop = false;
  OK(hsa_agent_get_info(e->gpu, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_COOPERATIVE_QUEUES, &coop));
#ifdef CUSE_KFD_REAL_ROCR
  CHECK(coop); /* the topology reports num_gws 64 */
#endif
  if (coop) {
    OK(hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_COOPERATIVE, NULL, NULL, 0, 0, &q));
    OK(hsa_queue_destroy(q));
  } else {
    CHECK_STATUS(hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_COOPERATIVE, NULL, NULL, 0, 0, &q),
                 HSA_STATUS_ERROR_INVALID_QUEUE_CREATION);
  }
  /* CPU agents take no queues: ROCr answers with the generic error. */
  CHECK_STATUS(hsa_queue_create(e->cpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q), HSA_STATUS_ERROR);
  CHECK_STATUS(hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, NULL),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const uint32_t valid[] = {64, 128, 4096, 131072};
  for (unsigned i = 0; i < sizeof valid / sizeof *valid; i++) {
    q = make_queue(e->gpu, valid[i]);
    CHECK(q->size == valid[i]);
    CHECK(q->base_address != NULL && ((uintptr_t)q->base_address % 64) == 0);
    CHECK(q->doorbell_signal.handle != 0);
    CHECK(q->type == HSA_QUEUE_TYPE_MULTI);
    CHECK(q->features & HSA_QUEUE_FEATURE_KERNEL_DISPATCH);
#if CHECKS_MISUSE
    /* The doorbell signal belongs to the queue. */
    CHECK_STATUS(hsa_signal_destroy(q->doorbell_signal), HSA_STATUS_ERROR_INVALID_SIGNAL);
#endif
    OK(hsa_queue_destroy(q));
  }
#if CHECKS_MISUSE
  CHECK_STATUS(hsa_queue_destroy(q), HSA_STATUS_ERROR_INVALID_QUEUE);
#endif
}

/* Creates queues until the first failure: it must be OUT_OF_RESOURCES, at no more than
 * QUEUES_MAX queues (the device's own cap, 127 per GPU, may come first), and the queues made
 * before it must still work. */
static void queue_cap(const env_t* e) {
  static hsa_queue_t* qs[130];
  uint32_t max = 0;
  OK(hsa_agent_get_info(e->gpu, HSA_AGENT_INFO_QUEUES_MAX, &max));
  unsigned n = 0;
  hsa_status_t st = HSA_STATUS_SUCCESS;
  for (; n < 130; n++) {
    st = hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &qs[n]);
    if (st != HSA_STATUS_SUCCESS) break;
  }
  CHECK_STATUS(st, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(n >= 126 && n <= max);
  printf("queue cap: %u queues, then OUT_OF_RESOURCES (%s)\n", n, LAST_ERROR());
  hsa_signal_t done = new_signal(2);
  const hsa_signal_t none[5] = {{0}};
  submit_barrier(qs[0], HSA_PACKET_TYPE_BARRIER_AND, none, done);
  submit_barrier(qs[n - 1], HSA_PACKET_TYPE_BARRIER_AND, none, done);
  wait_eq(done, 0);
  OK(hsa_signal_destroy(done));
  for (unsigned i = 0; i < n; i++) OK(hsa_queue_destroy(qs[i]));
}

/* Every index operation in every order, on a queue that never gets a doorbell. */
static void index_ops(const env_t* e) {
  hsa_queue_t* q = make_queue(e->gpu, 64);
  CHECK(hsa_queue_load_write_index_relaxed(q) == 0);
  CHECK(hsa_queue_load_read_index_relaxed(q) == 0);
  hsa_queue_store_write_index_relaxed(q, 5);
  CHECK(hsa_queue_load_write_index_scacquire(q) == 5);
  hsa_queue_store_write_index_screlease(q, 6);
  CHECK(hsa_queue_load_write_index_acquire(q) == 6);
  hsa_queue_store_write_index_release(q, 7);
  CHECK(hsa_queue_add_write_index_relaxed(q, 1) == 7);
  CHECK(hsa_queue_add_write_index_scacquire(q, 1) == 8);
  CHECK(hsa_queue_add_write_index_screlease(q, 1) == 9);
  CHECK(hsa_queue_add_write_index_scacq_screl(q, 1) == 10);
  CHECK(hsa_queue_add_write_index_acquire(q, 1) == 11);
  CHECK(hsa_queue_add_write_index_release(q, 1) == 12);
  CHECK(hsa_queue_add_write_index_acq_rel(q, 1) == 13);
  CHECK(hsa_queue_load_write_index_relaxed(q) == 14);
  CHECK(hsa_queue_cas_write_index_relaxed(q, 14, 20) == 14);
  CHECK(hsa_queue_cas_write_index_scacquire(q, 14, 30) == 20); /* fails, returns what it saw */
  CHECK(hsa_queue_cas_write_index_screlease(q, 20, 21) == 20);
  CHECK(hsa_queue_cas_write_index_scacq_screl(q, 21, 22) == 21);
  CHECK(hsa_queue_cas_write_index_acquire(q, 22, 23) == 22);
  CHECK(hsa_queue_cas_write_index_release(q, 23, 24) == 23);
  CHECK(hsa_queue_cas_write_index_acq_rel(q, 24, 25) == 24);
  CHECK(hsa_queue_load_write_index_relaxed(q) == 25);
#if CHECKS_MISUSE
  /* The device owns the read index: stores are refused (logged), the index stays (ROCr asserts). */
  hsa_queue_store_read_index_relaxed(q, 3);
  hsa_queue_store_read_index_screlease(q, 3);
#endif
  CHECK(hsa_queue_load_read_index_scacquire(q) == 0);
  CHECK(hsa_queue_load_read_index_acquire(q) == 0);
  OK(hsa_queue_destroy(q));
}

static void barriers(hsa_queue_t* q) {
  hsa_signal_t a = new_signal(1), b = new_signal(1), c = new_signal(1), d = new_signal(1);
  hsa_signal_t and_done = new_signal(1), or_done = new_signal(1), null_done = new_signal(1);
  const hsa_signal_t none[5] = {{0}};
  /* AND with only null dependencies is satisfied at once. */
  submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, none, null_done);
  wait_eq(null_done, 0);
  hsa_signal_t deps[5] = {a, {0}, b, {0}, {0}};
  submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, deps, and_done);
  sleep_ms(30);
  CHECK(hsa_signal_load_scacquire(and_done) == 1);
  hsa_signal_store_screlease(a, 0);
  sleep_ms(30);
  CHECK(hsa_signal_load_scacquire(and_done) == 1); /* one of two */
  hsa_signal_store_screlease(b, 0);
  wait_eq(and_done, 0);
  /* OR: nulls never satisfy it; any one dependency at 0 does. */
  hsa_signal_t or_deps[5] = {{0}, c, {0}, d, {0}};
  submit_barrier(q, HSA_PACKET_TYPE_BARRIER_OR, or_deps, or_done);
  sleep_ms(30);
  CHECK(hsa_signal_load_scacquire(or_done) == 1);
  hsa_signal_store_screlease(d, 0);
  wait_eq(or_done, 0);
  CHECK(hsa_signal_load_relaxed(c) == 1);
  hsa_signal_t all[] = {a, b, c, d, and_done, or_done, null_done};
  for (unsigned i = 0; i < 7; i++) OK(hsa_signal_destroy(all[i]));
}

/* More packets than the ring holds, past three full rings: all consumed in order. */
static void wraparound(hsa_queue_t* q) {
  const unsigned n = 3 * 64 + 5;
  uint64_t start = hsa_queue_load_read_index_scacquire(q);
  hsa_signal_t done = new_signal(n);
  hsa_signal_t order = new_signal(0);
  const hsa_signal_t none[5] = {{0}};
  for (unsigned i = 0; i < n; i++) {
    uint64_t idx = submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, none, done);
    CHECK(idx == start + i);
  }
  wait_eq(done, 0);
  uint64_t end = hsa_queue_load_read_index_scacquire(q);
  CHECK(end == start + n);
  CHECK(hsa_queue_load_write_index_relaxed(q) == end);
  /* Consumed slots read INVALID. */
  for (unsigned i = 0; i < q->size; i++) {
    uint16_t h = __atomic_load_n((uint16_t*)((uint8_t*)q->base_address + i * 64), __ATOMIC_ACQUIRE);
    CHECK((h & 0xff) == HSA_PACKET_TYPE_INVALID);
  }
  OK(hsa_signal_destroy(done));
  OK(hsa_signal_destroy(order));
}

static volatile hsa_status_t cb_status;
static volatile hsa_queue_t* cb_queue;
static volatile int cb_calls;

static void on_error(hsa_status_t status, hsa_queue_t* source, void* data) {
  CHECK(data == (void*)&cb_calls);
  cb_status = status;
  cb_queue = source;
  __atomic_add_fetch(&cb_calls, 1, __ATOMIC_SEQ_CST);
}

/* A kernel object of garbage (no soft kernel, and as GFX code a kernel descriptor whose entry is
 * not 256-byte aligned) stops the queue: the callback reports an invalid code object and the
 * completion signal is not decremented. */
static void error_callback(const env_t* e) {
  hsa_queue_t* q = NULL;
  OK(hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_MULTI, on_error, (void*)&cb_calls, 0, 0, &q));
  void* garbage = NULL;
  OK(hsa_memory_allocate(e->kernarg, 4096, &garbage));
  memset(garbage, 0xAB, 4096);
  hsa_signal_t done = new_signal(1);
  submit_dispatch(q, (uint64_t)(uintptr_t)garbage, NULL, 1, 1, done);
  for (int i = 0; i < 500 && !cb_calls; i++) sleep_ms(10);
  CHECK(cb_calls == 1);
  CHECK(cb_status == HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
  CHECK(cb_queue == q);
  sleep_ms(20);
  CHECK(hsa_signal_load_scacquire(done) == 1);
  CHECK(cb_calls == 1);
  OK(hsa_signal_destroy(done));
  OK(hsa_memory_free(garbage));
  OK(hsa_queue_destroy(q));
}

/* An inactivated queue processes nothing more. */
static void inactivate(const env_t* e) {
  hsa_queue_t* q = make_queue(e->gpu, 64);
  hsa_signal_t done = new_signal(1);
  const hsa_signal_t none[5] = {{0}};
  OK(hsa_queue_inactivate(q));
  submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, none, done);
  sleep_ms(50);
  CHECK(hsa_signal_load_scacquire(done) == 1);
  CHECK(hsa_queue_load_read_index_scacquire(q) == 0);
  OK(hsa_signal_destroy(done));
  OK(hsa_queue_destroy(q));
#if CHECKS_MISUSE
  CHECK_STATUS(hsa_queue_inactivate(q), HSA_STATUS_ERROR_INVALID_QUEUE);
#endif
}

int main(void) {
  OK(hsa_init());
  env_t e = find_env();
  size_rules(&e);
  inactivate(&e);
  index_ops(&e);
  hsa_queue_t* q = make_queue(e.gpu, 64);
  barriers(q);
  wraparound(q);
  OK(hsa_queue_destroy(q));
  error_callback(&e);
  queue_cap(&e);
#ifndef CUSE_KFD_REAL_ROCR
  cuse_kfd_shim_counters_t c;
  OK(cuse_kfd_shim_get_counters(&c));
  CHECK(c.live_queues == 0);
#endif
  OK(hsa_shut_down());
  printf("PASS queue\n");
  return 0;
}
