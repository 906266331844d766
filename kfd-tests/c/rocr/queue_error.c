/* A packet the device cannot run is a queue error that ROCr reports through the queue's callback
 * (the device writes the error code to amd_queue_t's queue_inactive_signal), never a silent
 * completion: an undefined packet type is INVALID_PACKET_FORMAT; a kernel dispatch of a code
 * object that cannot be GFX code (here a zeroed one: its entry would be the descriptor itself) is
 * INVALID_CODE_OBJECT. The completion signal keeps its value, the read index stops at the bad
 * packet, packets behind it do not run, and other queues keep working. */
#include "common.h"
#include <unistd.h>

struct report {
    int calls;
    hsa_status_t status;
    hsa_queue_t *queue;
};

static void on_error(hsa_status_t status, hsa_queue_t *q, void *data) {
    struct report *r = data;
    r->status = status;
    r->queue = q;
    __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELEASE);
    printf("  queue callback: %s\n", status_name(status));
    fflush(stdout);
}

/* Waits up to 10 s for the callback of `r`. */
static void await_callback(struct report *r, hsa_status_t want, hsa_queue_t *q, const char *what) {
    for (int i = 0; i < 1000 && !__atomic_load_n(&r->calls, __ATOMIC_ACQUIRE); i++)
        usleep(10 * 1000);
    CHECK(r->calls >= 1, "%s: no queue error reported in 10 s", what);
    CHECK(r->status == want, "%s: the callback got %s, want %#x", what, status_name(r->status), (unsigned)want);
    CHECK(r->queue == q, "%s: the callback named queue %p, not %p", what, (void *)r->queue, (void *)q);
}

static hsa_status_t find_kernarg_pool(hsa_amd_memory_pool_t pool, void *data) {
    hsa_amd_segment_t segment;
    uint32_t flags = 0;
    if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) != HSA_STATUS_SUCCESS ||
        segment != HSA_AMD_SEGMENT_GLOBAL)
        return HSA_STATUS_SUCCESS;
    hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
    if (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) {
        *(hsa_amd_memory_pool_t *)data = pool;
        return HSA_STATUS_INFO_BREAK;
    }
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_cpu(hsa_agent_t agent, void *data) {
    hsa_device_type_t type;
    if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS && type == HSA_DEVICE_TYPE_CPU) {
        *(hsa_agent_t *)data = agent;
        return HSA_STATUS_INFO_BREAK;
    }
    return HSA_STATUS_SUCCESS;
}

/* The bad packet must not have completed, nor the one behind it; the read index stays put. */
static void stopped_at(hsa_queue_t *q, uint64_t bad, hsa_signal_t sig, hsa_signal_t behind, const char *what) {
    usleep(50 * 1000);
    CHECK(hsa_signal_load_scacquire(sig) == 1, "%s: the bad packet's completion signal is %ld", what,
          (long)hsa_signal_load_scacquire(sig));
    CHECK(hsa_signal_load_scacquire(behind) == 1, "%s: the packet behind it ran", what);
    uint64_t rd = hsa_queue_load_read_index_scacquire(q);
    CHECK(rd == bad, "%s: read index %lu, want it stopped at %lu", what, (unsigned long)rd, (unsigned long)bad);
}

int main(void) {
    hsa_agent_t gpu = init_gpu();
    uint64_t hz = tick_hz();
    hsa_signal_t done, behind, ok;
    HSA(hsa_signal_create(1, 0, NULL, &done));
    HSA(hsa_signal_create(1, 0, NULL, &behind));
    HSA(hsa_signal_create(1, 0, NULL, &ok));

    /* 1. An undefined packet type (7). */
    struct report r1 = {0};
    hsa_queue_t *q1;
    HSA(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, on_error, &r1, UINT32_MAX, UINT32_MAX, &q1));
    submit_barrier(q1, HSA_PACKET_TYPE_BARRIER_AND, NULL, ok);
    CHECK(hsa_signal_wait_scacquire(ok, HSA_SIGNAL_CONDITION_EQ, 0, hz * 10, HSA_WAIT_STATE_BLOCKED) == 0,
          "a barrier before the bad packet did not complete");
    uint64_t bad = submit_barrier(q1, (hsa_packet_type_t)7, NULL, done);
    submit_barrier(q1, HSA_PACKET_TYPE_BARRIER_AND, NULL, behind);
    await_callback(&r1, HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, q1, "packet type 7");
    stopped_at(q1, bad, done, behind, "packet type 7");
    OK("packet type 7: INVALID_PACKET_FORMAT through the queue callback; nothing completed; read index %lu",
       (unsigned long)bad);

    /* 2. A kernel dispatch whose kernel object is not a soft kernel (GPU-visible, zeroed). */
    hsa_agent_t cpu = {0};
    hsa_amd_memory_pool_t pool = {0};
    CHECK(hsa_iterate_agents(find_cpu, &cpu) == HSA_STATUS_INFO_BREAK, "no CPU agent");
    CHECK(hsa_amd_agent_iterate_memory_pools(cpu, find_kernarg_pool, &pool) == HSA_STATUS_INFO_BREAK,
          "no kernarg pool");
    void *object = NULL;
    HSA(hsa_amd_memory_pool_allocate(pool, 4096, 0, &object));
    memset(object, 0, 4096);
    HSA(hsa_amd_agents_allow_access(1, &gpu, NULL, object));
    struct report r2 = {0};
    hsa_queue_t *q2;
    HSA(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, on_error, &r2, UINT32_MAX, UINT32_MAX, &q2));
    hsa_signal_store_relaxed(done, 1);
    hsa_signal_store_relaxed(behind, 1);
    bad = hsa_queue_add_write_index_scacq_screl(q2, 1);
    hsa_kernel_dispatch_packet_t *p = (hsa_kernel_dispatch_packet_t *)q2->base_address + (bad & (q2->size - 1));
    memset((char *)p + 4, 0, sizeof *p - 4);
    p->workgroup_size_x = p->workgroup_size_y = p->workgroup_size_z = 1;
    p->grid_size_x = p->grid_size_y = p->grid_size_z = 1;
    p->kernel_object = (uint64_t)(uintptr_t)object;
    p->completion_signal = done;
    uint16_t header = (uint16_t)((HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                                 (1 << HSA_PACKET_HEADER_BARRIER) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
    uint32_t setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
    __atomic_store_n((uint32_t *)p, header | setup << 16, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q2->doorbell_signal, (hsa_signal_value_t)bad);
    submit_barrier(q2, HSA_PACKET_TYPE_BARRIER_AND, NULL, behind);
    await_callback(&r2, HSA_STATUS_ERROR_INVALID_CODE_OBJECT, q2, "a zeroed kernel object");
    stopped_at(q2, bad, done, behind, "a zeroed kernel object");
    CHECK(r1.calls == 1, "the first queue's callback ran %d times", r1.calls);
    OK("a dispatch of a zeroed kernel object: INVALID_CODE_OBJECT, not a silent completion");

    /* 3. The process and other queues keep working. */
    hsa_queue_t *q3;
    HSA(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q3));
    hsa_signal_store_relaxed(ok, 1);
    submit_barrier(q3, HSA_PACKET_TYPE_BARRIER_AND, NULL, ok);
    CHECK(hsa_signal_wait_scacquire(ok, HSA_SIGNAL_CONDITION_EQ, 0, hz * 10, HSA_WAIT_STATE_BLOCKED) == 0,
          "a barrier on a healthy queue did not complete");
    OK("a new queue beside the two failed ones runs its barrier");

    HSA(hsa_queue_destroy(q1));
    HSA(hsa_queue_destroy(q2));
    HSA(hsa_queue_destroy(q3));
    HSA(hsa_amd_memory_pool_free(object));
    HSA(hsa_signal_destroy(done));
    HSA(hsa_signal_destroy(behind));
    HSA(hsa_signal_destroy(ok));
    HSA(hsa_shut_down());
    printf("PASS queue_error\n");
    return 0;
}
