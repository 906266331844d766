/* Queues through the real libhsakmt: an AQL queue and a PM4 queue created and destroyed (the PM4
 * queue runs a WRITE_DATA first, so its ring, write pointer and doorbell are the ones the device
 * reads), an SDMA queue that runs a FENCE, and a queue id that is gone after its destroy. */
#include "common.h"

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    volatile uint32_t *out = alloc_mapped(gpu, MEM_GTT, 4096);
    memset((void *)out, 0, 4096);

    /* AQL: created on a ring of 64-byte packet slots, destroyed. */
    {
        HSAuint64 size = 64 * 1024;
        void *ring = alloc_mapped(gpu, MEM_SYSTEM, size);
        HSAuint64 *ptrs = alloc_mapped(gpu, MEM_SYSTEM, 4096);
        memset(ring, 0, size);
        memset(ptrs, 0, 4096);
        HsaQueueResource qr;
        memset(&qr, 0, sizeof qr);
        qr.Queue_read_ptr_aql = &ptrs[0];
        qr.Queue_write_ptr_aql = &ptrs[8];
        CHECK_OK(hsaKmtCreateQueue(gpu, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, size, NULL, &qr));
        CHECK(qr.QueueId != 0 && qr.Queue_DoorBell_aql != NULL, "AQL queue id %#llx, doorbell %p",
              (unsigned long long)qr.QueueId, (void *)qr.Queue_DoorBell_aql);
        CHECK_OK(hsaKmtDestroyQueue(qr.QueueId));
        free_mapped(ptrs, 4096);
        free_mapped(ring, size);
    }

    /* PM4: a WRITE_DATA of three dwords, then destroyed. */
    {
        struct ring q;
        ring_create(&q, gpu, HSA_QUEUE_COMPUTE);
        uint32_t data[3] = {0x11111111, 0x22222222, 0x33333333}, p[16];
        unsigned n = pm4_write_data(p, (uint64_t)(uintptr_t)out, data, 3);
        ring_submit(&q, p, n);
        ring_wait_idle(&q);
        CHECK(out[0] == data[0] && out[1] == data[1] && out[2] == data[2], "PM4 WRITE_DATA wrote %#x %#x %#x", out[0],
              out[1], out[2]);
        /* A second batch after the first: the doorbell is read again. */
        uint32_t more = 0x44444444;
        n = pm4_write_data(p, (uint64_t)(uintptr_t)(out + 3), &more, 1);
        ring_submit(&q, p, n);
        ring_wait_idle(&q);
        CHECK(out[3] == more, "a second PM4 submission wrote %#x", out[3]);
        ring_destroy(&q);
    }

    /* SDMA: a FENCE, destroyed. */
    {
        struct ring q;
        ring_create(&q, gpu, HSA_QUEUE_SDMA);
        uint32_t p[8];
        unsigned n = sdma_fence(p, (uint64_t)(uintptr_t)(out + 16), 0xfeedf00d);
        ring_submit(&q, p, n);
        wait_u32(out + 16, 0xfeedf00d, "SDMA FENCE value");
        ring_wait_idle(&q);
        ring_destroy(&q);
    }

    /* Several queues at once, destroyed in another order. */
    {
        struct ring a, b, c;
        ring_create(&a, gpu, HSA_QUEUE_COMPUTE);
        ring_create(&b, gpu, HSA_QUEUE_SDMA);
        ring_create(&c, gpu, HSA_QUEUE_COMPUTE);
        CHECK(a.qr.QueueId != b.qr.QueueId && b.qr.QueueId != c.qr.QueueId, "three live queues, three ids");
        ring_destroy(&b);
        ring_destroy(&a);
        ring_destroy(&c);
    }

    free_mapped((void *)out, 4096);
    CHECK_OK(hsaKmtCloseKFD());
    PASS("queues");
}
