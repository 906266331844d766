/* 8 threads x 32 signals created and destroyed concurrently, round after round: every handle
 * unique while live, every value its own, nothing leaked. Then no lost wake-ups: pairs of
 * threads ping-pong through BLOCKED waits, on single signals and (shim: its batch API) on
 * members of one batch, which share a KFD event. */
#include "check.h"

#define THREADS 8
#define SIGNALS 32
#define ROUNDS 40 /* rounds and bounces: scaled() */

static hsa_signal_t live[THREADS][SIGNALS];
static int rounds, bounces;
static pthread_barrier_t barrier;

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void* worker(void* arg) {
  int t = (int)(intptr_t)arg;
  unsigned seed = 1234u + (unsigned)t;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < SIGNALS; i++) {
      hsa_signal_value_t v = t * 100000 + r * 100 + i;
      OK(hsa_signal_create(v, 0, NULL, &live[t][i]));
    }
    for (int i = 0; i < SIGNALS; i++) {
      hsa_signal_value_t v = t * 100000 + r * 100 + i;
      CHECK(hsa_signal_load_scacquire(live[t][i]) == v);
      hsa_signal_add_scacq_screl(live[t][i], 1);
      CHECK(hsa_signal_wait_scacquire(live[t][i], HSA_SIGNAL_CONDITION_EQ, v + 1, 1000 * MS, HSA_WAIT_STATE_ACTIVE) == v + 1);
    }
    pthread_barrier_wait(&barrier);
    if (t == 0) {
      /* All 256 live handles are distinct. */
      uint64_t all[THREADS * SIGNALS];
      for (int a = 0; a < THREADS; a++)
        for (int i = 0; i < SIGNALS; i++) all[a * SIGNALS + i] = live[a][i].handle;
      qsort(all, THREADS * SIGNALS, sizeof all[0], cmp_u64);
      for (int i = 1; i < THREADS * SIGNALS; i++) CHECK(all[i] != all[i - 1]);
    }
    pthread_barrier_wait(&barrier);
    /* Destroy in a random order. */
    int order[SIGNALS];
    for (int i = 0; i < SIGNALS; i++) order[i] = i;
    for (int i = SIGNALS - 1; i > 0; i--) {
      int j = (int)(rand_r(&seed) % (unsigned)(i + 1));
      int tmp = order[i];
      order[i] = order[j];
      order[j] = tmp;
    }
    for (int i = 0; i < SIGNALS; i++) OK(hsa_signal_destroy(live[t][order[i]]));
  }
  return NULL;
}

#define PAIRS 4
#define BOUNCES 400

typedef struct {
  hsa_signal_t ping, pong;
} pair_t;

static void* bounce(void* arg) {
  pair_t* p = arg;
  for (hsa_signal_value_t i = 1; i <= bounces; i++) {
    CHECK(hsa_signal_wait_scacquire(p->ping, HSA_SIGNAL_CONDITION_EQ, i, 10000 * MS, HSA_WAIT_STATE_BLOCKED) == i);
    if (i % 7 == 0) usleep(50); /* now and then the other side goes to sleep first */
    hsa_signal_store_screlease(p->pong, i);
  }
  return NULL;
}

static void* serve(void* arg) {
  pair_t* p = arg;
  for (hsa_signal_value_t i = 1; i <= bounces; i++) {
    if (i % 5 == 0) usleep(60);
    hsa_signal_store_screlease(p->ping, i);
    CHECK(hsa_signal_wait_scacquire(p->pong, HSA_SIGNAL_CONDITION_GTE, i, 10000 * MS, HSA_WAIT_STATE_BLOCKED) == i);
  }
  return NULL;
}

static void ping_pong(hsa_signal_t* sigs) {
  pair_t pairs[PAIRS];
  pthread_t t[2 * PAIRS];
  for (int i = 0; i < PAIRS; i++) {
    pairs[i].ping = sigs[2 * i];
    pairs[i].pong = sigs[2 * i + 1];
    CHECK(pthread_create(&t[2 * i], NULL, bounce, &pairs[i]) == 0);
    CHECK(pthread_create(&t[2 * i + 1], NULL, serve, &pairs[i]) == 0);
  }
  for (int i = 0; i < 2 * PAIRS; i++) pthread_join(t[i], NULL);
}

int main(void) {
  rounds = scaled(ROUNDS);
  bounces = scaled(BOUNCES);
  OK(hsa_init());
#ifndef CUSE_KFD_REAL_ROCR
  cuse_kfd_shim_counters_t before, after;
  OK(cuse_kfd_shim_get_counters(&before));
#endif
  pthread_barrier_init(&barrier, NULL, THREADS);
  pthread_t th[THREADS];
  uint64_t t0 = now_ns();
  for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, (void*)(intptr_t)t) == 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  uint64_t took = now_ns() - t0;
#ifndef CUSE_KFD_REAL_ROCR
  OK(cuse_kfd_shim_get_counters(&after));
  CHECK(after.live_signals == before.live_signals);
  /* Single creates come from pooled slots and pooled events: 256 live at most. */
  CHECK(after.events_created - before.events_created <= THREADS * SIGNALS);
  printf("%d x %d signals x %d rounds in %.1f ms; %lu events, %lu pool arenas\n", THREADS, SIGNALS, rounds,
         took / 1e6, (unsigned long)after.events_created, (unsigned long)after.pool_arenas);
#else
  printf("%d x %d signals x %d rounds in %.1f ms\n", THREADS, SIGNALS, rounds, took / 1e6);
#endif

  hsa_signal_t sigs[2 * PAIRS];
  for (int i = 0; i < 2 * PAIRS; i++) OK(hsa_signal_create(0, 0, NULL, &sigs[i]));
  t0 = now_ns();
  ping_pong(sigs);
  printf("%d BLOCKED ping-pong pairs x %d on single signals: %.1f ms\n", PAIRS, bounces, (now_ns() - t0) / 1e6);
  for (int i = 0; i < 2 * PAIRS; i++) OK(hsa_signal_destroy(sigs[i]));
#ifndef CUSE_KFD_REAL_ROCR
  hsa_amd_signal_batch_t b;
  hsa_agent_t host = {0};
  OK(hsa_amd_signal_batch_create(0, 2 * PAIRS, 0, NULL, 0, host, sigs, &b, NULL));
  OK(hsa_amd_signal_batch_destroy(b));
  t0 = now_ns();
  ping_pong(sigs);
  printf("%d BLOCKED ping-pong pairs x %d on one batch (one shared event): %.1f ms\n", PAIRS, bounces,
         (now_ns() - t0) / 1e6);
  for (int i = 0; i < 2 * PAIRS; i++) OK(hsa_signal_destroy(sigs[i]));
#endif
  OK(hsa_shut_down());
  printf("PASS threads\n");
  return 0;
}
