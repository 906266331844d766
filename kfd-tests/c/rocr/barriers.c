/* Barrier-AND and barrier-OR packets on a ROCr queue, their dependencies set from the host, their
 * completion signals waited on with hsa_signal_wait_scacquire (both wait hints). AND completes
 * only when every dependency is 0 (a null handle counts as satisfied); OR completes when any is 0
 * (a null handle never satisfies it). The completion signal is decremented by exactly 1, packets
 * complete in order, and a barrier on one queue can wait for a barrier on another. */
#include "common.h"

static uint64_t hz;

/* `sig` keeps the value `v` for `ms` milliseconds: a timed wait for 0 returns the old value. */
static void stays(hsa_signal_t sig, hsa_signal_value_t v, unsigned ms, const char *what) {
    hsa_signal_value_t got =
        hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, 0, hz / 1000 * ms, HSA_WAIT_STATE_BLOCKED);
    CHECK(got == v, "%s: completion signal %ld, want %ld (still pending)", what, (long)got, (long)v);
    CHECK(hsa_signal_load_scacquire(sig) == v, "%s: completion signal changed", what);
}

/* `sig` reaches `want` (waited on with `hint`) within 10 s. */
static void reaches(hsa_signal_t sig, hsa_signal_value_t want, hsa_wait_state_t hint, const char *what) {
    hsa_signal_value_t got = hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, want, hz * 10, hint);
    CHECK(got == want, "%s: completion signal %ld, want %ld", what, (long)got, (long)want);
}

static hsa_signal_t signal(hsa_signal_value_t v) {
    hsa_signal_t s;
    HSA(hsa_signal_create(v, 0, NULL, &s));
    return s;
}

int main(void) {
    hsa_agent_t gpu = init_gpu();
    hz = tick_hz();
    hsa_queue_t *q;
    HSA(hsa_queue_create(gpu, 256, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
    hsa_signal_t none = {0};

    /* 1. Barrier-AND, no dependencies at all: completes at once. */
    hsa_signal_t done = signal(1);
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, NULL, done);
    reaches(done, 0, HSA_WAIT_STATE_ACTIVE, "AND without dependencies");
    OK("barrier-AND with five null dependencies completed");

    /* 2. Barrier-AND on three host signals (and two nulls): held until the last is 0. */
    hsa_signal_t d[5];
    for (int i = 0; i < 5; i++)
        d[i] = signal(1);
    hsa_signal_t deps[5] = {d[0], none, d[1], none, d[2]};
    HSA(hsa_signal_destroy(done));
    done = signal(1);
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, deps, done);
    stays(done, 1, 50, "AND, no dependency met");
    hsa_signal_store_screlease(d[0], 0);
    stays(done, 1, 50, "AND, one of three met");
    hsa_signal_store_screlease(d[2], 0);
    stays(done, 1, 50, "AND, two of three met");
    hsa_signal_store_screlease(d[1], 5);
    stays(done, 1, 50, "AND, the third dependency 5");
    hsa_signal_subtract_screlease(d[1], 5);
    reaches(done, 0, HSA_WAIT_STATE_BLOCKED, "AND, all met");
    OK("barrier-AND held until all three dependencies were 0 (nulls satisfied)");

    /* 3. Completion decremented by exactly 1; a packet behind a held one waits for it. */
    for (int i = 0; i < 5; i++)
        hsa_signal_store_relaxed(d[i], 1);
    hsa_signal_t done2 = signal(3);
    hsa_signal_store_relaxed(done, 7);
    hsa_signal_t all5[5] = {d[0], d[1], d[2], d[3], d[4]};
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, all5, done);
    uint64_t second = submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, NULL, done2);
    stays(done, 7, 30, "AND on five, none met");
    stays(done2, 3, 30, "the packet behind a held barrier");
    for (int i = 4; i >= 0; i--) {
        if (i < 4)
            stays(done, 7, 20, "AND on five, some met");
        hsa_signal_store_screlease(d[i], 0);
    }
    reaches(done, 6, HSA_WAIT_STATE_ACTIVE, "AND on five, all met");
    reaches(done2, 2, HSA_WAIT_STATE_ACTIVE, "the packet behind it");
    stays(done, 6, 20, "decremented once");
    stays(done2, 2, 20, "decremented once");
    uint64_t rd = hsa_queue_load_read_index_scacquire(q);
    CHECK(rd == second + 1, "read index %lu, want %lu", (unsigned long)rd, (unsigned long)second + 1);
    OK("barrier-AND on five dependencies; completion 7 -> 6 and 3 -> 2 exactly; in order; read index %lu",
       (unsigned long)rd);

    /* 4. Barrier-OR: one dependency of three reaching 0 is enough; nulls never satisfy. */
    for (int i = 0; i < 5; i++)
        hsa_signal_store_relaxed(d[i], 1);
    hsa_signal_store_relaxed(done, 1);
    hsa_signal_t or_deps[5] = {none, d[0], none, d[1], d[2]};
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_OR, or_deps, done);
    stays(done, 1, 50, "OR, none met (two nulls)");
    hsa_signal_store_screlease(d[1], 0);
    reaches(done, 0, HSA_WAIT_STATE_BLOCKED, "OR, one met");
    CHECK(hsa_signal_load_relaxed(d[0]) == 1 && hsa_signal_load_relaxed(d[2]) == 1, "OR changed its dependencies");
    OK("barrier-OR completed on the second of three dependencies; nulls did not satisfy it");

    /* 5. Barrier-OR with every dependency already 0 and one AND mixing satisfied ones. */
    hsa_signal_store_relaxed(done, 1);
    hsa_signal_t zero = signal(0);
    hsa_signal_t or_zero[5] = {zero, zero, zero, zero, zero};
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_OR, or_zero, done);
    reaches(done, 0, HSA_WAIT_STATE_ACTIVE, "OR, all met already");
    OK("barrier-OR with every dependency already 0 completed");

    /* 6. Across queues: q2's AND waits for q's OR, which waits for the host. */
    hsa_queue_t *q2;
    HSA(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q2));
    hsa_signal_t link = signal(1), end = signal(1), gate = signal(1);
    hsa_signal_t on_link[5] = {link, none, none, none, none};
    hsa_signal_t on_gate[5] = {gate, none, none, none, none};
    submit_barrier(q2, HSA_PACKET_TYPE_BARRIER_AND, on_link, end);
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_OR, on_gate, link);
    stays(end, 1, 50, "q2's barrier on q's");
    stays(link, 1, 1, "q's barrier on the host");
    hsa_signal_store_screlease(gate, 0);
    reaches(end, 0, HSA_WAIT_STATE_BLOCKED, "q2's barrier after the host opened the gate");
    CHECK(hsa_signal_load_scacquire(link) == 0, "q's barrier did not complete");
    OK("a barrier-AND on a second queue waited for a barrier-OR on the first, which waited for the host");

    /* 7. Wait conditions on a completion signal the device decrements. */
    hsa_signal_store_relaxed(done, 2);
    hsa_signal_store_relaxed(gate, 1);
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, on_gate, done);
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, NULL, done);
    hsa_signal_value_t v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 2, hz / 20, HSA_WAIT_STATE_BLOCKED);
    CHECK(v == 2, "LT 2 before the gate: %ld", (long)v);
    hsa_signal_store_screlease(gate, 0);
    v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, hz * 10, HSA_WAIT_STATE_BLOCKED);
    CHECK(v == 0, "LT 1: %ld", (long)v);
    v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_NE, 2, hz * 10, HSA_WAIT_STATE_ACTIVE);
    CHECK(v == 0, "NE 2: %ld", (long)v);
    v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_GTE, 0, hz * 10, HSA_WAIT_STATE_ACTIVE);
    CHECK(v == 0, "GTE 0: %ld", (long)v);
    OK("LT / NE / GTE waits on a device-decremented signal (2 -> 0 by two barriers)");

    HSA(hsa_queue_destroy(q2));
    HSA(hsa_queue_destroy(q));
    hsa_signal_t all[] = {done, done2, zero, link, end, gate, d[0], d[1], d[2], d[3], d[4]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        HSA(hsa_signal_destroy(all[i]));
    HSA(hsa_shut_down());
    printf("PASS barriers\n");
    return 0;
}
