/* Events through the real libhsakmt: a PM4 RELEASE_MEM that writes memory and raises the
 * interrupt that sets a signal event the program waits on with hsaKmtWaitOnEvent (its event-page
 * slot written first, as amdkfd needs); the same with an SDMA FENCE and TRAP. */
#include "common.h"

static void check_not_signaled(HsaEvent *e, const char *when) {
    HSAKMT_STATUS st = hsaKmtWaitOnEvent(e, 0);
    CHECK(st == HSAKMT_STATUS_WAIT_TIMEOUT, "event %u is not signaled %s (wait 0 ms -> %d)", e->EventId, when, (int)st);
}

static void wait_signaled(HsaEvent *e, const char *what) {
    double t0 = now_s();
    HSAKMT_STATUS st = hsaKmtWaitOnEvent(e, (HSAuint32)(DEVICE_WAIT_S * 1000));
    CHECK(st == HSAKMT_STATUS_SUCCESS, "%s: hsaKmtWaitOnEvent(event %u) -> %d after %.3f s", what, e->EventId, (int)st,
          now_s() - t0);
}

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    volatile uint64_t *out = alloc_mapped(gpu, MEM_GTT, 4096);
    memset((void *)out, 0, 4096);

    HsaEvent *e = create_signal_event(gpu, 0);
    uint64_t slot = e->EventData.HWData2, trigger = e->EventData.HWData3;
    CHECK(slot != 0, "signal event %u has an event-page slot at %#llx, trigger data %#llx", e->EventId,
          (unsigned long long)slot, (unsigned long long)trigger);
    check_not_signaled(e, "when created");

    struct ring pm4;
    ring_create(&pm4, gpu, HSA_QUEUE_COMPUTE);
    uint32_t p[32];
    /* 1: the slot by WRITE_DATA, then a RELEASE_MEM that writes a 64-bit value and interrupts. */
    {
        uint32_t t[2] = {(uint32_t)trigger, (uint32_t)(trigger >> 32)};
        unsigned n = pm4_write_data(p, slot, t, 2);
        n += pm4_release_mem(p + n, (uint64_t)(uintptr_t)&out[0], 0x0123456789abcdefull, 1, e->EventId);
        ring_submit(&pm4, p, n);
        wait_signaled(e, "PM4 RELEASE_MEM with INT_SEL 2");
        CHECK(out[0] == 0x0123456789abcdefull, "RELEASE_MEM wrote %#llx", (unsigned long long)out[0]);
        check_not_signaled(e, "after the wait (auto-reset)");
    }
    /* 2: one RELEASE_MEM that writes the slot itself and interrupts. */
    {
        unsigned n = pm4_release_mem(p, slot, trigger, 1, e->EventId);
        ring_submit(&pm4, p, n);
        wait_signaled(e, "PM4 RELEASE_MEM writing the event slot");
        check_not_signaled(e, "after the second wait");
    }
    /* 3: a RELEASE_MEM without an interrupt writes memory and sets nothing. */
    {
        unsigned n = pm4_release_mem(p, (uint64_t)(uintptr_t)&out[1], 42, 0, e->EventId);
        ring_submit(&pm4, p, n);
        ring_wait_idle(&pm4);
        CHECK(out[1] == 42, "RELEASE_MEM with INT_SEL 0 wrote %llu", (unsigned long long)out[1]);
        check_not_signaled(e, "after a RELEASE_MEM without an interrupt");
    }
    ring_destroy(&pm4);

    /* 4: SDMA: a copy, a FENCE to a flag, FENCEs that write the slot, a TRAP. */
    {
        struct ring sdma;
        ring_create(&sdma, gpu, HSA_QUEUE_SDMA);
        out[8] = 0x5555aaaa5555aaaaull;
        unsigned n = sdma_copy_linear(p, (uint64_t)(uintptr_t)&out[9], (uint64_t)(uintptr_t)&out[8], 8);
        n += sdma_fence(p + n, (uint64_t)(uintptr_t)&out[10], 7);
        n += sdma_fence(p + n, slot, (uint32_t)trigger);
        n += sdma_fence(p + n, slot + 4, (uint32_t)(trigger >> 32));
        n += sdma_trap(p + n, e->EventId);
        ring_submit(&sdma, p, n);
        wait_signaled(e, "SDMA FENCE and TRAP");
        CHECK(out[9] == out[8] && out[10] == 7, "the SDMA copy and the fence before the trap landed");
        ring_wait_idle(&sdma);
        ring_destroy(&sdma);
    }

    CHECK_OK(hsaKmtDestroyEvent(e));
    free_mapped((void *)out, 4096);
    CHECK_OK(hsaKmtCloseKFD());
    PASS("events");
}
