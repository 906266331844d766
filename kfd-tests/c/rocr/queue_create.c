/* hsa_queue_create on the GPU agent and ROCr's size rules: a ring is a power of two of
 * HSA_AGENT_INFO_QUEUE_MIN_SIZE (64) .. HSA_AGENT_INFO_QUEUE_MAX_SIZE (131072) packets; smaller or
 * not a power of two is INVALID_ARGUMENT, larger is an error too. Each accepted queue is a real
 * KFD queue: its fields are checked, one barrier packet runs on it, and it is destroyed. */
#include "common.h"

static void run_one_barrier(hsa_queue_t *q) {
    hsa_signal_t done;
    HSA(hsa_signal_create(1, 0, NULL, &done));
    uint64_t index = submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, NULL, done);
    hsa_signal_value_t v =
        hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, tick_hz() * 10, HSA_WAIT_STATE_ACTIVE);
    CHECK(v == 0, "barrier on a %u-packet queue: completion signal %ld", q->size, (long)v);
    uint64_t rd = hsa_queue_load_read_index_scacquire(q);
    CHECK(rd == index + 1, "read index %lu after packet %lu", (unsigned long)rd, (unsigned long)index);
    HSA(hsa_signal_destroy(done));
}

int main(void) {
    hsa_agent_t gpu = init_gpu();
    uint32_t min = 0, max = 0, qmax = 0;
    HSA(hsa_agent_get_info(gpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &min));
    HSA(hsa_agent_get_info(gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &max));
    HSA(hsa_agent_get_info(gpu, HSA_AGENT_INFO_QUEUES_MAX, &qmax));
    CHECK(min == 64 && max == 131072, "queue sizes %u..%u, want 64..131072", min, max);
    OK("GPU agent queue sizes %u..%u, at most %u queues", min, max, qmax);

    /* Refused sizes: none of them may yield a queue. */
    struct {
        uint32_t size;
        hsa_status_t want; /* 0: any error */
    } bad[] = {
        {0, HSA_STATUS_ERROR_INVALID_ARGUMENT},   {1, HSA_STATUS_ERROR_INVALID_ARGUMENT},
        {32, HSA_STATUS_ERROR_INVALID_ARGUMENT},  {63, HSA_STATUS_ERROR_INVALID_ARGUMENT},
        {100, HSA_STATUS_ERROR_INVALID_ARGUMENT}, {4095, HSA_STATUS_ERROR_INVALID_ARGUMENT},
        {65537, HSA_STATUS_ERROR_INVALID_ARGUMENT}, {262144, 0},
        {1u << 31, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hsa_queue_t *q = NULL;
        hsa_status_t s =
            hsa_queue_create(gpu, bad[i].size, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q);
        CHECK(s != HSA_STATUS_SUCCESS, "a %u-packet queue was created", bad[i].size);
        CHECK(bad[i].want == 0 || s == bad[i].want, "size %u -> %s, want %#x", bad[i].size, status_name(s),
              (unsigned)bad[i].want);
        OK("size %u refused: %s", bad[i].size, status_name(s));
    }

    /* Every power of two 64..131072, both queue types. */
    for (uint32_t size = 64; size <= 131072; size *= 2) {
        hsa_queue_type32_t type = (__builtin_ctz(size) & 1) ? HSA_QUEUE_TYPE_SINGLE : HSA_QUEUE_TYPE_MULTI;
        hsa_queue_t *q = NULL;
        HSA(hsa_queue_create(gpu, size, type, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
        CHECK(q != NULL && q->size == size, "queue of %u packets has size %u", size, q ? q->size : 0);
        CHECK(q->base_address != NULL && ((uintptr_t)q->base_address & 63) == 0, "ring at %p", q->base_address);
        CHECK(q->doorbell_signal.handle != 0, "no doorbell signal");
        /* ROCr's AQL queues report MULTI whatever was asked (amd_aql_queue.cpp). */
        CHECK(q->type == HSA_QUEUE_TYPE_MULTI, "type %u, want MULTI", q->type);
        CHECK(q->features & HSA_QUEUE_FEATURE_KERNEL_DISPATCH, "features %#x", q->features);
        CHECK(hsa_queue_load_read_index_relaxed(q) == 0 && hsa_queue_load_write_index_relaxed(q) == 0,
              "fresh queue's indices not 0");
        /* A fresh ring is all INVALID packets. */
        const hsa_kernel_dispatch_packet_t *ring = q->base_address;
        for (uint32_t i = 0; i < size; i += size / 8) {
            uint16_t type_bits = (ring[i].header >> HSA_PACKET_HEADER_TYPE) & ((1 << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
            CHECK(type_bits == HSA_PACKET_TYPE_INVALID, "slot %u of a fresh ring has type %u", i, type_bits);
        }
        run_one_barrier(q);
        uint64_t id = q->id;
        HSA(hsa_queue_destroy(q));
        OK("size %u (%s): created, id %lu, one barrier ran, destroyed", size,
           type == HSA_QUEUE_TYPE_SINGLE ? "single" : "multi", (unsigned long)id);
    }

    /* Several queues alive at once, each working. */
    hsa_queue_t *qs[8];
    for (int i = 0; i < 8; i++)
        HSA(hsa_queue_create(gpu, 256, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &qs[i]));
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < i; j++)
            CHECK(qs[i]->id != qs[j]->id && qs[i]->base_address != qs[j]->base_address, "queues %d and %d alias", i, j);
        run_one_barrier(qs[i]);
    }
    for (int i = 0; i < 8; i++)
        HSA(hsa_queue_destroy(qs[i]));
    OK("8 queues alive at once, each ran a barrier");

    HSA(hsa_shut_down());
    OK("hsa_shut_down");
    printf("PASS queue_create\n");
    return 0;
}
