/* Several rings' worth of barrier packets through a 64-slot ROCr queue, across the wrap: each
 * packet waited in turn; a burst whose producer waits for free slots with only the last packet
 * waited; a full ring held behind a gate and then drained. The read index, the write index, the
 * consumed slots' headers (INVALID) and every completion signal are checked. */
#include "common.h"

#define SIZE 64
#define COUNT 300

static uint64_t hz;

static void wait_zero(hsa_signal_t s, const char *what, int i) {
    hsa_signal_value_t v = hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, hz * 10, HSA_WAIT_STATE_BLOCKED);
    CHECK(v == 0, "%s %d: completion signal %ld after 10 s", what, i, (long)v);
}

static uint16_t slot_type(hsa_queue_t *q, uint64_t index) {
    const hsa_barrier_and_packet_t *ring = q->base_address;
    uint16_t h = __atomic_load_n(&ring[index % q->size].header, __ATOMIC_ACQUIRE);
    return (h >> HSA_PACKET_HEADER_TYPE) & ((1 << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
}

static void all_slots_invalid(hsa_queue_t *q, const char *what) {
    for (uint64_t i = 0; i < q->size; i++)
        CHECK(slot_type(q, i) == HSA_PACKET_TYPE_INVALID, "%s: slot %lu type %u after consumption", what,
              (unsigned long)i, slot_type(q, i));
}

int main(void) {
    hsa_agent_t gpu = init_gpu();
    hz = tick_hz();
    hsa_queue_t *q;
    HSA(hsa_queue_create(gpu, SIZE, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
    CHECK(q->size == SIZE, "size %u", q->size);

    /* 1. Each packet waited: the read index follows one by one across four wraps. */
    hsa_signal_t done, zero;
    HSA(hsa_signal_create(1, 0, NULL, &done));
    HSA(hsa_signal_create(0, 0, NULL, &zero));
    for (int i = 0; i < COUNT; i++) {
        hsa_signal_store_relaxed(done, 1);
        hsa_packet_type_t type = i % 3 == 2 ? HSA_PACKET_TYPE_BARRIER_OR : HSA_PACKET_TYPE_BARRIER_AND;
        hsa_signal_t deps[5] = {{0}};
        if (type == HSA_PACKET_TYPE_BARRIER_OR) {
            /* An OR needs one satisfied dependency. */
            deps[i % 5] = zero;
        }
        uint64_t index = submit_barrier(q, type, deps, done);
        CHECK(index == (uint64_t)i, "packet %d got index %lu", i, (unsigned long)index);
        wait_zero(done, "waited packet", i);
        uint64_t rd = hsa_queue_load_read_index_scacquire(q);
        CHECK(rd == index + 1, "after packet %d the read index is %lu", i, (unsigned long)rd);
        CHECK(slot_type(q, index) == HSA_PACKET_TYPE_INVALID, "packet %d's slot not INVALID after it ran", i);
    }
    all_slots_invalid(q, "one by one");
    OK("%d packets one by one through a %d-slot ring (%d wraps): read index %lu", COUNT, SIZE, COUNT / SIZE,
       (unsigned long)hsa_queue_load_read_index_scacquire(q));

    /* 2. A burst: the producer only waits for free slots; each packet its own signal, the last waited. */
    uint64_t base = hsa_queue_load_write_index_relaxed(q);
    hsa_signal_t sig[COUNT];
    for (int i = 0; i < COUNT; i++)
        HSA(hsa_signal_create(1, 0, NULL, &sig[i]));
    for (int i = 0; i < COUNT; i++)
        submit_barrier(q, i % 2 ? HSA_PACKET_TYPE_BARRIER_AND : HSA_PACKET_TYPE_BARRIER_OR,
                       i % 2 ? NULL : (hsa_signal_t[5]){{0}, {0}, {0}, {0}, done}, sig[i]);
    wait_zero(sig[COUNT - 1], "burst packet", COUNT - 1);
    for (int i = 0; i < COUNT; i++)
        CHECK(hsa_signal_load_scacquire(sig[i]) == 0, "burst packet %d incomplete after the last", i);
    uint64_t rd = hsa_queue_load_read_index_scacquire(q), wr = hsa_queue_load_write_index_scacquire(q);
    CHECK(rd == base + COUNT && wr == rd, "after the burst read %lu write %lu, want %lu", (unsigned long)rd,
          (unsigned long)wr, (unsigned long)(base + COUNT));
    all_slots_invalid(q, "burst");
    for (int i = 0; i < COUNT; i++)
        HSA(hsa_signal_destroy(sig[i]));
    OK("a burst of %d packets, last waited, every completion 1 -> 0: read index %lu = write index", COUNT,
       (unsigned long)rd);

    /* 3. A full ring behind a gate: 64 packets wait, none is consumed, then all drain. */
    hsa_signal_t gate, count;
    HSA(hsa_signal_create(1, 0, NULL, &gate));
    HSA(hsa_signal_create(SIZE, 0, NULL, &count));
    base = hsa_queue_load_write_index_relaxed(q);
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, (hsa_signal_t[5]){gate}, count);
    for (int i = 1; i < SIZE; i++)
        submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, NULL, count);
    hsa_signal_value_t v =
        hsa_signal_wait_scacquire(count, HSA_SIGNAL_CONDITION_LT, SIZE, hz / 10, HSA_WAIT_STATE_BLOCKED);
    CHECK(v == SIZE, "a gated full ring: count %ld", (long)v);
    rd = hsa_queue_load_read_index_scacquire(q);
    wr = hsa_queue_load_write_index_scacquire(q);
    CHECK(rd == base && wr == base + SIZE, "gated full ring: read %lu write %lu", (unsigned long)rd, (unsigned long)wr);
    for (int i = 0; i < SIZE; i++)
        CHECK(slot_type(q, base + i) == HSA_PACKET_TYPE_BARRIER_AND, "gated slot %d consumed", i);
    hsa_signal_store_screlease(gate, 0);
    wait_zero(count, "gated ring count", 0);
    rd = hsa_queue_load_read_index_scacquire(q);
    CHECK(rd == base + SIZE, "after the gate read %lu", (unsigned long)rd);
    all_slots_invalid(q, "gated ring");
    OK("a full ring of %d held behind a gate (read index stayed %lu), drained when the host opened it (%lu)", SIZE,
       (unsigned long)base, (unsigned long)rd);

    HSA(hsa_signal_destroy(gate));
    HSA(hsa_signal_destroy(count));
    HSA(hsa_signal_destroy(done));
    HSA(hsa_signal_destroy(zero));
    HSA(hsa_queue_destroy(q));
    HSA(hsa_shut_down());
    printf("PASS ring_wrap\n");
    return 0;
}
