/* Signal wait timeouts, given in system timestamp ticks (HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY),
 * are honoured: an unsatisfied wait returns after roughly the timeout with the old value, in both
 * wait states, for every condition, on a host signal and on a completion signal whose barrier is
 * held; a BLOCKED timed wait sleeps through it; a wait satisfied before its timeout returns early
 * with the new value; timeout 0 returns at once. */
#define _GNU_SOURCE
#include "common.h"
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

static uint64_t hz;
/* Voluntary context switches of the last times_out wait (a sleep blocks at least once). */
static long last_nvcsw;

/* Waits on `sig` (holding `old`) with an unsatisfied condition for `ms`; checks the time taken
 * and the value returned; returns the waiting thread's CPU fraction. */
static double times_out(hsa_signal_t sig, hsa_signal_condition_t cond, hsa_signal_value_t compare,
                        hsa_signal_value_t old, unsigned ms, hsa_wait_state_t hint, const char *what) {
    uint64_t ticks = hz / 1000 * ms;
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    double c0 = thread_cpu_s(), t0 = now_s();
    hsa_signal_value_t v = hsa_signal_wait_scacquire(sig, cond, compare, ticks, hint);
    double wall = now_s() - t0, cpu = thread_cpu_s() - c0;
    getrusage(RUSAGE_THREAD, &r1);
    last_nvcsw = r1.ru_nvcsw - r0.ru_nvcsw;
    /* The upper bound only tells a timeout honoured from one ignored: the tier runs under TCG
     * emulation, where a wake-up through CUSE can take a few hundred ms on a busy host. */
    double want = ms / 1e3, slack = 0.5 + want;
    printf("  %s: %u ms timeout (%lu ticks) %s -> %ld after %.1f ms, CPU %.1f%%\n", what, ms, (unsigned long)ticks,
           hint == HSA_WAIT_STATE_BLOCKED ? "BLOCKED" : "ACTIVE", (long)v, wall * 1e3, 100 * cpu / wall);
    CHECK(v == old, "%s: the timed-out wait returned %ld, want the old value %ld", what, (long)v, (long)old);
    CHECK(wall >= want * 0.95, "%s: returned after %.1f ms, before the %u ms timeout", what, wall * 1e3, ms);
    CHECK(wall <= want + slack, "%s: returned after %.1f ms, long after the %u ms timeout", what, wall * 1e3, ms);
    return cpu / wall;
}

struct store {
    hsa_signal_t sig;
    hsa_signal_value_t value;
    unsigned delay_ms;
};

static void *store_later(void *arg) {
    struct store *s = arg;
    usleep(s->delay_ms * 1000);
    hsa_signal_store_screlease(s->sig, s->value);
    return NULL;
}

int main(void) {
    hsa_agent_t gpu = init_gpu();
    hz = tick_hz();
    uint64_t max_wait = 0;
    HSA(hsa_system_get_info(HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT, &max_wait));
    OK("timestamp frequency %lu Hz, longest wait %#lx ticks", (unsigned long)hz, (unsigned long)max_wait);

    hsa_signal_t sig;
    HSA(hsa_signal_create(7, 0, NULL, &sig));

    /* 1. Timeout 0: at once, the current value. */
    double t0 = now_s();
    hsa_signal_value_t v = hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, 0, 0, HSA_WAIT_STATE_BLOCKED);
    double dt = now_s() - t0;
    CHECK(v == 7 && dt < 0.25, "timeout 0: %ld after %.1f ms", (long)v, dt * 1e3);
    OK("timeout 0 returned the current value 7 after %.2f ms", dt * 1e3);

    /* 2. Unsatisfied waits, each condition, both hints, several lengths. */
    unsigned lengths[] = {10, 50, 200};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        times_out(sig, HSA_SIGNAL_CONDITION_EQ, 0, 7, lengths[i], HSA_WAIT_STATE_BLOCKED, "EQ 0");
        times_out(sig, HSA_SIGNAL_CONDITION_EQ, 0, 7, lengths[i], HSA_WAIT_STATE_ACTIVE, "EQ 0");
    }
    times_out(sig, HSA_SIGNAL_CONDITION_NE, 7, 7, 100, HSA_WAIT_STATE_BLOCKED, "NE 7");
    times_out(sig, HSA_SIGNAL_CONDITION_LT, 7, 7, 100, HSA_WAIT_STATE_BLOCKED, "LT 7");
    times_out(sig, HSA_SIGNAL_CONDITION_GTE, 8, 7, 100, HSA_WAIT_STATE_ACTIVE, "GTE 8");
    OK("unsatisfied waits of 10..200 ms returned the old value after their timeout (EQ, NE, LT, GTE; both hints)");

    /* 3. A long BLOCKED timed wait sleeps through its timeout. */
    double frac = times_out(sig, HSA_SIGNAL_CONDITION_EQ, 0, 7, 1000, HSA_WAIT_STATE_BLOCKED, "EQ 0, long");
    CHECK(frac < 0.2, "a 1 s BLOCKED timed wait used %.1f%% CPU", 100 * frac);
    CHECK(last_nvcsw >= 1 && last_nvcsw < 1000, "a 1 s BLOCKED timed wait made %ld voluntary switches", last_nvcsw);
    OK("a 1 s BLOCKED wait timed out having slept (%.2f%% CPU, %ld voluntary switch(es))", 100 * frac, last_nvcsw);

    /* 4. Stores that do not satisfy the condition do not end the wait early. */
    struct store s = {sig, 3, 100};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, store_later, &s) == 0, "pthread_create");
    times_out(sig, HSA_SIGNAL_CONDITION_EQ, 0, 3, 400, HSA_WAIT_STATE_BLOCKED, "EQ 0, 3 stored at 100 ms");
    pthread_join(th, NULL);
    OK("a store of 3 at 100 ms woke the waiter, which slept again until its 400 ms timeout and returned 3");

    /* 5. Satisfied before the timeout: returns early with the new value. */
    s = (struct store){sig, 0, 200};
    CHECK(pthread_create(&th, NULL, store_later, &s) == 0, "pthread_create");
    t0 = now_s();
    v = hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, 0, hz * 5, HSA_WAIT_STATE_BLOCKED);
    dt = now_s() - t0;
    pthread_join(th, NULL);
    CHECK(v == 0 && dt >= 0.15 && dt < 2, "a 5 s wait satisfied at 200 ms: %ld after %.1f ms", (long)v, dt * 1e3);
    OK("a 5 s wait satisfied by a store at 200 ms returned 0 after %.1f ms", dt * 1e3);

    /* 6. The device's side: a completion signal whose barrier is held times out, then completes. */
    hsa_queue_t *q;
    HSA(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
    hsa_signal_t gate, done;
    HSA(hsa_signal_create(1, 0, NULL, &gate));
    HSA(hsa_signal_create(1, 0, NULL, &done));
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, (hsa_signal_t[5]){gate}, done);
    times_out(done, HSA_SIGNAL_CONDITION_EQ, 0, 1, 300, HSA_WAIT_STATE_BLOCKED, "held barrier");
    times_out(done, HSA_SIGNAL_CONDITION_LT, 1, 1, 50, HSA_WAIT_STATE_ACTIVE, "held barrier");
    hsa_signal_store_screlease(gate, 0);
    v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, hz * 10, HSA_WAIT_STATE_BLOCKED);
    CHECK(v == 0, "the released barrier: %ld", (long)v);
    OK("waits on a held barrier's completion signal timed out with 1; released, it completed");

    HSA(hsa_queue_destroy(q));
    HSA(hsa_signal_destroy(gate));
    HSA(hsa_signal_destroy(done));
    HSA(hsa_signal_destroy(sig));
    HSA(hsa_shut_down());
    printf("PASS wait_timeout\n");
    return 0;
}
