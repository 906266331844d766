/* Shared by the programs of kfd-tests/c/hsakmt: built against Debian's hsakmt.h, linked with the real
 * libhsakmt (5.2.3), run on our device by `cuse-kfd run --thunk system`. Each check prints what
 * it checks; the first failure exits 1; a program that reaches its end prints `PASS <name>`. */
#ifndef CUSE_KFD_HSAKMT_COMMON_H
#define CUSE_KFD_HSAKMT_COMMON_H

#include <errno.h>
#include <hsakmt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Condition `c`, described by the printf arguments that follow it. */
#define CHECK(c, ...)                                                                                              \
    do {                                                                                                           \
        int ok_ = !!(c);                                                                                           \
        printf("%s: ", ok_ ? "ok" : "FAIL");                                                                       \
        printf(__VA_ARGS__);                                                                                       \
        printf(ok_ ? "\n" : " [%s:%d: %s]\n", __FILE__, __LINE__, #c);                                             \
        fflush(stdout);                                                                                            \
        if (!ok_)                                                                                                  \
            exit(1);                                                                                               \
    } while (0)

/* A libhsakmt call that must return HSAKMT_STATUS_SUCCESS. */
#define CHECK_OK(call)                                                                                             \
    do {                                                                                                           \
        HSAKMT_STATUS st_ = (call);                                                                                \
        CHECK(st_ == HSAKMT_STATUS_SUCCESS, "%s -> status %d", #call, (int)st_);                                   \
    } while (0)

#define PASS(name)                                                                                                 \
    do {                                                                                                           \
        printf("PASS %s\n", name);                                                                                 \
        fflush(stdout);                                                                                            \
        return 0;                                                                                                  \
    } while (0)

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* How long the programs wait for the device (TCG is slow). */
#define DEVICE_WAIT_S 30.0

/* Opens KFD and returns the topology node id of the first GPU node. */
static inline HSAuint32 open_and_find_gpu(void) {
    HsaSystemProperties sp;
    CHECK_OK(hsaKmtOpenKFD());
    CHECK_OK(hsaKmtAcquireSystemProperties(&sp));
    for (HSAuint32 n = 0; n < sp.NumNodes; n++) {
        HsaNodeProperties np;
        CHECK_OK(hsaKmtGetNodeProperties(n, &np));
        if (np.NumFComputeCores != 0)
            return n;
    }
    CHECK(0, "a GPU node among %u nodes", sp.NumNodes);
    return 0;
}

enum mem_kind { MEM_SYSTEM, MEM_GTT, MEM_VRAM };

static inline const char *mem_kind_name(enum mem_kind k) {
    return k == MEM_SYSTEM ? "system (userptr)" : k == MEM_GTT ? "GTT" : "VRAM";
}

/* `size` bytes of memory of kind `k`, host accessible, mapped to the GPU. */
static inline void *alloc_mapped(HSAuint32 gpu, enum mem_kind k, HSAuint64 size) {
    HsaMemFlags f;
    memset(&f, 0, sizeof f);
    f.ui32.HostAccess = 1;
    f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
    f.ui32.ExecuteAccess = 1;
    HSAuint32 node = 0;
    if (k == MEM_GTT)
        f.ui32.NonPaged = 1;
    if (k == MEM_VRAM) {
        f.ui32.NonPaged = 1;
        f.ui32.NoSubstitute = 1;
        f.ui32.ExecuteAccess = 0;
        node = gpu;
    }
    void *p = NULL;
    HSAKMT_STATUS st = hsaKmtAllocMemory(node, size, f, &p);
    CHECK(st == HSAKMT_STATUS_SUCCESS && p != NULL, "allocate %llu bytes of %s memory on node %u (status %d, %p)",
          (unsigned long long)size, mem_kind_name(k), node, (int)st, p);
    HSAuint64 alt = 0;
    CHECK_OK(hsaKmtMapMemoryToGPU(p, size, &alt));
    return p;
}

static inline void free_mapped(void *p, HSAuint64 size) {
    CHECK_OK(hsaKmtUnmapMemoryToGPU(p));
    CHECK_OK(hsaKmtFreeMemory(p, size));
}

/* A PM4 or SDMA ring: the client side of the queue, as AMD's kfdtest drives it (gfx9+: 64-bit
 * write pointer and doorbell; PM4 counts dwords, SDMA bytes). */
struct ring {
    HSA_QUEUE_TYPE type;
    uint32_t *buf;
    HSAuint64 size;
    HSAuint64 *ptrs; /* [0] read pointer, [8] write pointer (64-byte apart) */
    HsaQueueResource qr;
    uint64_t wptr_dw; /* dwords written so far */
};

#define RING_BYTES 65536

static inline void ring_create(struct ring *r, HSAuint32 gpu, HSA_QUEUE_TYPE type) {
    memset(r, 0, sizeof *r);
    r->type = type;
    r->size = RING_BYTES;
    r->buf = alloc_mapped(gpu, MEM_SYSTEM, r->size);
    memset(r->buf, 0, r->size);
    r->ptrs = alloc_mapped(gpu, MEM_SYSTEM, 4096);
    memset(r->ptrs, 0, 4096);
    r->qr.Queue_read_ptr_aql = &r->ptrs[0];
    r->qr.Queue_write_ptr_aql = &r->ptrs[8];
    CHECK_OK(hsaKmtCreateQueue(gpu, type, 100, HSA_QUEUE_PRIORITY_NORMAL, r->buf, r->size, NULL, &r->qr));
    CHECK(r->qr.QueueId != 0 && r->qr.Queue_DoorBell_aql != NULL, "queue type %d: id %#llx doorbell %p", (int)type,
          (unsigned long long)r->qr.QueueId, (void *)r->qr.Queue_DoorBell_aql);
}

static inline void ring_destroy(struct ring *r) {
    CHECK_OK(hsaKmtDestroyQueue(r->qr.QueueId));
    free_mapped(r->ptrs, 4096);
    free_mapped(r->buf, r->size);
}

/* The write pointer in the queue's unit. */
static inline uint64_t ring_wptr(const struct ring *r) {
    return r->type == HSA_QUEUE_SDMA ? r->wptr_dw * 4 : r->wptr_dw;
}

/* Writes `n` dwords of packets (no wrap: the programs use a fraction of the ring), then
 * publishes the write pointer and rings the doorbell. */
static inline void ring_submit(struct ring *r, const uint32_t *p, unsigned n) {
    uint64_t slots = r->size / 4;
    CHECK(r->wptr_dw + n <= slots, "%u dwords fit in the ring", n);
    for (unsigned i = 0; i < n; i++)
        r->buf[r->wptr_dw + i] = p[i];
    r->wptr_dw += n;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(r->qr.Queue_write_ptr_aql, ring_wptr(r), __ATOMIC_RELEASE);
    __atomic_store_n((volatile HSAuint64 *)r->qr.Queue_DoorBell_aql, ring_wptr(r), __ATOMIC_RELEASE);
}

/* Waits until the device's read pointer reaches the write pointer. */
static inline void ring_wait_idle(struct ring *r) {
    double t0 = now_s();
    uint64_t want = r->type == HSA_QUEUE_SDMA ? ring_wptr(r) : (ring_wptr(r) % (r->size / 4));
    uint64_t got = 0;
    while (now_s() - t0 < DEVICE_WAIT_S) {
        got = __atomic_load_n(r->qr.Queue_read_ptr_aql, __ATOMIC_ACQUIRE);
        if (r->type != HSA_QUEUE_SDMA)
            got &= 0xffffffffu;
        if (got == want)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(got == want, "the queue's read pointer reached %llu (it is at %llu)", (unsigned long long)want,
          (unsigned long long)got);
}

/* Waits for the 32-bit word at `p` to become `v`. */
static inline void wait_u32(volatile uint32_t *p, uint32_t v, const char *what) {
    double t0 = now_s();
    while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v && now_s() - t0 < DEVICE_WAIT_S) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(*p == v, "%s: %#x (it is %#x)", what, v, *p);
}

/* SDMA packets (gfx9 encoding). */
static inline unsigned sdma_copy_linear(uint32_t *p, uint64_t dst, uint64_t src, uint32_t bytes) {
    p[0] = 1; /* COPY, sub-op LINEAR */
    p[1] = bytes - 1;
    p[2] = 0;
    p[3] = (uint32_t)src;
    p[4] = (uint32_t)(src >> 32);
    p[5] = (uint32_t)dst;
    p[6] = (uint32_t)(dst >> 32);
    return 7;
}

static inline unsigned sdma_fence(uint32_t *p, uint64_t addr, uint32_t value) {
    p[0] = 5;
    p[1] = (uint32_t)addr;
    p[2] = (uint32_t)(addr >> 32);
    p[3] = value;
    return 4;
}

static inline unsigned sdma_trap(uint32_t *p, uint32_t context) {
    p[0] = 6;
    p[1] = context & 0x0fffffff;
    return 2;
}

/* PM4 type-3 packets (gfx9 encoding). */
#define PM4_HDR(op, body_dwords) ((3u << 30) | (((uint32_t)(body_dwords)-1) << 16) | ((uint32_t)(op) << 8))

static inline unsigned pm4_write_data(uint32_t *p, uint64_t addr, const uint32_t *data, unsigned n) {
    p[0] = PM4_HDR(0x37, 3 + n);
    p[1] = (5u << 8) | (1u << 20); /* DST_SEL memory, WR_CONFIRM */
    p[2] = (uint32_t)addr;
    p[3] = (uint32_t)(addr >> 32);
    for (unsigned i = 0; i < n; i++)
        p[4 + i] = data[i];
    return 4 + n;
}

/* RELEASE_MEM: end-of-pipe write of the 64-bit `data` to `addr`, then (int_sel 2) an interrupt with
 * context id `ctx`. */
static inline unsigned pm4_release_mem(uint32_t *p, uint64_t addr, uint64_t data, int interrupt, uint32_t ctx) {
    p[0] = PM4_HDR(0x49, 7);
    p[1] = 0x14 | (5u << 8); /* CACHE_FLUSH_AND_INV_TS_EVENT, EVENT_INDEX 5 */
    p[2] = (2u << 29) | ((interrupt ? 2u : 0u) << 24); /* DATA_SEL 64-bit, INT_SEL, DST_SEL memory */
    p[3] = (uint32_t)addr;
    p[4] = (uint32_t)(addr >> 32);
    p[5] = (uint32_t)data;
    p[6] = (uint32_t)(data >> 32);
    p[7] = ctx;
    return 8;
}

static inline HsaEvent *create_signal_event(HSAuint32 gpu, int manual_reset) {
    HsaEventDescriptor d;
    memset(&d, 0, sizeof d);
    d.EventType = HSA_EVENTTYPE_SIGNAL;
    d.NodeId = gpu;
    d.SyncVar.SyncVar.UserData = NULL;
    d.SyncVar.SyncVarSize = sizeof(HSAuint64);
    HsaEvent *e = NULL;
    CHECK_OK(hsaKmtCreateEvent(&d, manual_reset, false, &e));
    return e;
}

#endif
