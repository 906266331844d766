/* Signals: every value operation in every memory order; waits with every condition, both
 * hints and both orders: satisfied at once, timed out, woken by a host store from another
 * thread and by the device; groups; hsa_amd_signal_wait_any; consumers and interrupts; a
 * destroyed signal wakes its waiter. */
#include "check.h"

static void ops(void) {
  hsa_signal_t s = new_signal(10);
  CHECK(hsa_signal_load_relaxed(s) == 10 && hsa_signal_load_scacquire(s) == 10);
  hsa_signal_store_relaxed(s, 1);
  CHECK(hsa_signal_load_acquire(s) == 1);
  hsa_signal_store_screlease(s, 2);
  CHECK(hsa_signal_load_relaxed(s) == 2);
  hsa_signal_store_release(s, 3);
  hsa_signal_silent_store_relaxed(s, 4);
  CHECK(hsa_signal_load_relaxed(s) == 4);
  hsa_signal_silent_store_screlease(s, 5);
  CHECK(hsa_signal_load_relaxed(s) == 5);
  /* add/subtract: 5 + 1+2+3+4+5+6+7 - (1+1+1+1+1+1+1) */
  hsa_signal_add_relaxed(s, 1);
  hsa_signal_add_scacquire(s, 2);
  hsa_signal_add_screlease(s, 3);
  hsa_signal_add_scacq_screl(s, 4);
  hsa_signal_add_acquire(s, 5);
  hsa_signal_add_release(s, 6);
  hsa_signal_add_acq_rel(s, 7);
  CHECK(hsa_signal_load_relaxed(s) == 33);
  hsa_signal_subtract_relaxed(s, 1);
  hsa_signal_subtract_scacquire(s, 1);
  hsa_signal_subtract_screlease(s, 1);
  hsa_signal_subtract_scacq_screl(s, 1);
  hsa_signal_subtract_acquire(s, 1);
  hsa_signal_subtract_release(s, 1);
  hsa_signal_subtract_acq_rel(s, 1);
  CHECK(hsa_signal_load_relaxed(s) == 26);
  hsa_signal_store_relaxed(s, 0xFF);
  hsa_signal_and_relaxed(s, 0x7F);
  hsa_signal_and_scacquire(s, 0x3F);
  hsa_signal_and_screlease(s, 0x1F);
  hsa_signal_and_scacq_screl(s, 0x0F);
  hsa_signal_and_acquire(s, 0x0F);
  hsa_signal_and_release(s, 0x0F);
  hsa_signal_and_acq_rel(s, 0x07);
  CHECK(hsa_signal_load_relaxed(s) == 0x07);
  hsa_signal_or_relaxed(s, 0x10);
  hsa_signal_or_scacquire(s, 0x20);
  hsa_signal_or_screlease(s, 0x40);
  hsa_signal_or_scacq_screl(s, 0x80);
  hsa_signal_or_acquire(s, 0x100);
  hsa_signal_or_release(s, 0x200);
  hsa_signal_or_acq_rel(s, 0x400);
  CHECK(hsa_signal_load_relaxed(s) == 0x7F7);
  hsa_signal_xor_relaxed(s, 0x1);
  hsa_signal_xor_scacquire(s, 0x2);
  hsa_signal_xor_screlease(s, 0x4);
  hsa_signal_xor_scacq_screl(s, 0x1);
  hsa_signal_xor_acquire(s, 0x2);
  hsa_signal_xor_release(s, 0x4);
  hsa_signal_xor_acq_rel(s, 0x800);
  CHECK(hsa_signal_load_relaxed(s) == 0xFF7);
  CHECK(hsa_signal_exchange_relaxed(s, 1) == 0xFF7);
  CHECK(hsa_signal_exchange_scacquire(s, 2) == 1);
  CHECK(hsa_signal_exchange_screlease(s, 3) == 2);
  CHECK(hsa_signal_exchange_scacq_screl(s, 4) == 3);
  CHECK(hsa_signal_exchange_acquire(s, 5) == 4);
  CHECK(hsa_signal_exchange_release(s, 6) == 5);
  CHECK(hsa_signal_exchange_acq_rel(s, -7) == 6);
  CHECK(hsa_signal_cas_relaxed(s, -7, 8) == -7);
  CHECK(hsa_signal_cas_scacquire(s, 0, 9) == 8); /* fails: returns what it saw */
  CHECK(hsa_signal_cas_screlease(s, 8, 9) == 8);
  CHECK(hsa_signal_cas_scacq_screl(s, 9, 10) == 9);
  CHECK(hsa_signal_cas_acquire(s, 10, 11) == 10);
  CHECK(hsa_signal_cas_release(s, 11, 12) == 11);
  CHECK(hsa_signal_cas_acq_rel(s, 12, 13) == 12);
  CHECK(hsa_signal_load_relaxed(s) == 13);
  OK(hsa_signal_destroy(s));
#if CHECKS_MISUSE
  CHECK_STATUS(hsa_signal_destroy(s), HSA_STATUS_ERROR_INVALID_SIGNAL);
#endif
  hsa_signal_t zero = {0};
  CHECK_STATUS(hsa_signal_destroy(zero), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

typedef struct {
  hsa_signal_t s;
  hsa_signal_value_t value;
  unsigned delay_ms;
} store_job_t;

static void* store_later(void* arg) {
  store_job_t* j = arg;
  sleep_ms(j->delay_ms);
  hsa_signal_store_screlease(j->s, j->value);
  return NULL;
}

typedef hsa_signal_value_t (*wait_fn)(hsa_signal_t, hsa_signal_condition_t, hsa_signal_value_t, uint64_t,
                                      hsa_wait_state_t);

/* For each condition: an unsatisfying value next to the boundary, the compare value, and a
 * satisfying one (on the boundary where the condition includes it). */
static const struct {
  hsa_signal_condition_t cond;
  hsa_signal_value_t initial, compare, satisfying;
} CASES[] = {
    {HSA_SIGNAL_CONDITION_EQ, 1, 0, 0},
    {HSA_SIGNAL_CONDITION_NE, 5, 5, 6},
    {HSA_SIGNAL_CONDITION_LT, 0, 0, -1},
    {HSA_SIGNAL_CONDITION_GTE, 9, 10, 10},
};

static void waits(void) {
  const wait_fn fns[] = {hsa_signal_wait_scacquire, hsa_signal_wait_relaxed};
  const hsa_wait_state_t hints[] = {HSA_WAIT_STATE_BLOCKED, HSA_WAIT_STATE_ACTIVE};
  for (unsigned f = 0; f < 2; f++)
    for (unsigned h = 0; h < 2; h++)
      for (unsigned c = 0; c < 4; c++) {
        hsa_signal_t s = new_signal(CASES[c].satisfying);
        /* Satisfied already: returns at once with the value. */
        uint64_t t0 = now_ns();
        CHECK(fns[f](s, CASES[c].cond, CASES[c].compare, 10000 * MS, hints[h]) == CASES[c].satisfying);
        CHECK(now_ns() - t0 < 5000 * MS);
        /* Timeout honoured: the unsatisfied value comes back after it. */
        hsa_signal_store_relaxed(s, CASES[c].initial);
        t0 = now_ns();
        CHECK(fns[f](s, CASES[c].cond, CASES[c].compare, 20 * MS, hints[h]) == CASES[c].initial);
        uint64_t took = now_ns() - t0;
        CHECK(took >= 20 * MS && took < 5000 * MS); /* a loaded machine may be slow to return */
        /* Timeout 0 polls once. */
        CHECK(fns[f](s, CASES[c].cond, CASES[c].compare, 0, hints[h]) == CASES[c].initial);
        /* A host store from another thread wakes it (a BLOCKED waiter is asleep by then). */
        store_job_t j = {s, CASES[c].satisfying, 30};
        pthread_t t;
        t0 = now_ns(); /* before the thread exists: its 30 ms start after this */
        CHECK(pthread_create(&t, NULL, store_later, &j) == 0);
        CHECK(fns[f](s, CASES[c].cond, CASES[c].compare, UINT64_MAX, hints[h]) == CASES[c].satisfying);
        CHECK(now_ns() - t0 >= 30 * MS);
        pthread_join(t, NULL);
        OK(hsa_signal_destroy(s));
      }
}

typedef struct {
  hsa_queue_t* q;
  hsa_signal_t s;
  uint64_t kernel; /* a soft kernel (shim only) */
  void* kernarg;
} device_job_t;

static void* barrier_later(void* arg) {
  device_job_t* j = arg;
  sleep_ms(30);
  const hsa_signal_t none[5] = {{0}};
  submit_barrier(j->q, HSA_PACKET_TYPE_BARRIER_AND, none, j->s);
  return NULL;
}

#ifndef CUSE_KFD_REAL_ROCR
static void* kernel_later(void* arg) {
  device_job_t* j = arg;
  sleep_ms(30);
  hsa_signal_t no = {0};
  submit_dispatch(j->q, j->kernel, j->kernarg, 1, 1, no);
  return NULL;
}
#endif

/* The device decrementing a completion signal, and (shim: its soft kernels) a SIGNAL_STORE
 * kernel, wake both kinds of waiter. */
static void device_wakes(const env_t* e) {
  hsa_queue_t* q = NULL;
  OK(hsa_queue_create(e->gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  device_job_t j = {q, {0}, 0, NULL};
#ifndef CUSE_KFD_REAL_ROCR
  uint32_t size;
  OK(cuse_kfd_shim_soft_kernel(e->gpu, CUSE_KFD_SOFT_KERNEL_SIGNAL_STORE, &j.kernel, &size));
  CHECK(size == sizeof(cuse_kfd_signal_store_args_t));
  cuse_kfd_signal_store_args_t* args = NULL;
  OK(hsa_memory_allocate(e->kernarg, sizeof *args, (void**)&args));
  j.kernarg = args;
#endif
  const hsa_wait_state_t hints[] = {HSA_WAIT_STATE_BLOCKED, HSA_WAIT_STATE_ACTIVE};
  for (unsigned h = 0; h < 2; h++) {
    hsa_signal_t s = new_signal(1);
    j.s = s;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, barrier_later, &j) == 0);
    CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, 10000 * MS, hints[h]) == 0);
    pthread_join(t, NULL);
#ifndef CUSE_KFD_REAL_ROCR
    args->signal = s;
    args->value = 42;
    CHECK(pthread_create(&t, NULL, kernel_later, &j) == 0);
    CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 42, 10000 * MS, hints[h]) == 42);
    pthread_join(t, NULL);
#endif
    OK(hsa_signal_destroy(s));
  }
#ifndef CUSE_KFD_REAL_ROCR
  OK(hsa_memory_free(args));
#endif
  OK(hsa_queue_destroy(q));
}

static void groups(const env_t* e) {
  hsa_signal_t s[3] = {new_signal(1), new_signal(1), new_signal(1)};
  hsa_signal_group_t g;
  OK(hsa_signal_group_create(3, s, 1, &e->cpu, &g));
  hsa_signal_condition_t conds[3] = {HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_EQ};
  hsa_signal_value_t vals[3] = {0, 7, 0};
  store_job_t j = {s[1], 7, 30};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, store_later, &j) == 0);
  hsa_signal_t which = {0};
  hsa_signal_value_t v = 0;
  OK(hsa_signal_group_wait_any_scacquire(g, conds, vals, HSA_WAIT_STATE_BLOCKED, &which, &v));
  CHECK(which.handle == s[1].handle && v == 7);
  pthread_join(t, NULL);
  hsa_signal_store_relaxed(s[2], 0);
  OK(hsa_signal_group_wait_any_relaxed(g, conds, vals, HSA_WAIT_STATE_ACTIVE, &which, &v));
  CHECK((which.handle == s[1].handle && v == 7) || (which.handle == s[2].handle && v == 0));
  OK(hsa_signal_group_destroy(g));
  CHECK_STATUS(hsa_signal_group_destroy(g), HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP);
#if CHECKS_MISUSE
  hsa_signal_t bad[2] = {s[0], {0x4000}};
  CHECK_STATUS(hsa_signal_group_create(2, bad, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
#endif
  hsa_signal_t with_null[2] = {s[0], {0}};
  CHECK_STATUS(hsa_signal_group_create(2, with_null, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_signal_group_create(0, s, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* hsa_amd_signal_wait_any: UINT32_MAX after the timeout, else the index and its value. */
  hsa_signal_store_relaxed(s[1], 1);
  hsa_signal_store_relaxed(s[2], 1);
  hsa_signal_value_t got = -1;
  uint64_t t0 = now_ns();
  CHECK(hsa_amd_signal_wait_any(3, s, conds, vals, 20 * MS, HSA_WAIT_STATE_BLOCKED, &got) == UINT32_MAX);
  CHECK(now_ns() - t0 >= 20 * MS);
  store_job_t j2 = {s[2], 0, 30};
  CHECK(pthread_create(&t, NULL, store_later, &j2) == 0);
  CHECK(hsa_amd_signal_wait_any(3, s, conds, vals, UINT64_MAX, HSA_WAIT_STATE_BLOCKED, &got) == 2);
  CHECK(got == 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 3; i++) OK(hsa_signal_destroy(s[i]));
}

/* Interrupt or not by consumer (what the shim says through cuse_kfd_shim_signal_get_info); on
 * both runtimes every kind of signal can be waited on. */
static void consumers(const env_t* e) {
#ifndef CUSE_KFD_REAL_ROCR
  cuse_kfd_shim_signal_info_t info;
#define INFO(s, cond)                              \
  do {                                             \
    OK(cuse_kfd_shim_signal_get_info((s), &info)); \
    CHECK(cond);                                   \
  } while (0)
#else
#define INFO(s, cond) ((void)(s))
#endif
  hsa_signal_t s;
  OK(hsa_signal_create(1, 0, NULL, &s));
  INFO(s, info.interrupt == 1 && info.event_id != 0 && info.placement == HSA_AMD_SIGNAL_PLACEMENT_HOST);
  OK(hsa_signal_destroy(s));
  OK(hsa_signal_create(1, 1, &e->cpu, &s));
  INFO(s, info.interrupt == 1);
  OK(hsa_signal_destroy(s));
  /* Consumed by the GPU only: polled, no event; waits still work. */
  OK(hsa_signal_create(1, 1, &e->gpu, &s));
  INFO(s, info.interrupt == 0);
  store_job_t j = {s, 0, 30};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, store_later, &j) == 0);
  CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, 10000 * MS, HSA_WAIT_STATE_BLOCKED) == 0);
  pthread_join(t, NULL);
  OK(hsa_signal_destroy(s));
  OK(hsa_amd_signal_create(1, 0, NULL, HSA_AMD_SIGNAL_AMD_GPU_ONLY, &s));
  INFO(s, info.interrupt == 0);
  OK(hsa_signal_destroy(s));
#undef INFO
#if CHECKS_MISUSE
  hsa_agent_t bogus = {0x99};
  CHECK_STATUS(hsa_signal_create(1, 1, &bogus, &s), HSA_STATUS_ERROR_INVALID_AGENT);
#endif
}

static volatile int waiter_done;
static void* wait_forever(void* arg) {
  hsa_signal_t s = *(hsa_signal_t*)arg;
  hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
  __atomic_store_n(&waiter_done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Destroying a signal wakes a waiter sleeping on it. */
static void destroy_wakes(void) {
  hsa_signal_t s = new_signal(1);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_forever, &s) == 0);
  sleep_ms(50);
  CHECK(!waiter_done);
  OK(hsa_signal_destroy(s));
  for (int i = 0; i < 500 && !waiter_done; i++) sleep_ms(10);
  CHECK(waiter_done);
  pthread_join(t, NULL);
}

int main(void) {
  OK(hsa_init());
  env_t e = find_env();
#ifndef CUSE_KFD_REAL_ROCR
  cuse_kfd_shim_counters_t before, after;
  OK(cuse_kfd_shim_get_counters(&before));
#endif
  ops();
  waits();
  device_wakes(&e);
  groups(&e);
  consumers(&e);
  destroy_wakes();
#ifndef CUSE_KFD_REAL_ROCR
  OK(cuse_kfd_shim_get_counters(&after));
  CHECK(after.live_signals == before.live_signals);
#endif
  OK(hsa_shut_down());
  printf("PASS signals\n");
  return 0;
}
