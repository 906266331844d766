/* Helpers shared by the ROCr programs of kfd-tests/tests/rocr_programs.rs: each program links the real
 * libhsa-runtime64 (ROCr), prints what it checks, and exits non-zero on the first failure. */
#ifndef ROCR_COMMON_H
#define ROCR_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <link.h>

#include <hsa.h>
#include <hsa_ext_amd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                    \
        printf(__VA_ARGS__);                                                                                           \
        printf("\n");                                                                                                  \
        fflush(stdout);                                                                                                \
        exit(1);                                                                                                       \
    } while (0)

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            FAIL(__VA_ARGS__);                                                                                         \
    } while (0)

/* An HSA call that must succeed. */
#define HSA(call)                                                                                                      \
    do {                                                                                                               \
        hsa_status_t s_ = (call);                                                                                      \
        if (s_ != HSA_STATUS_SUCCESS)                                                                                  \
            FAIL("%s -> %s", #call, status_name(s_));                                                                  \
    } while (0)

#define OK(...)                                                                                                        \
    do {                                                                                                               \
        printf("ok: ");                                                                                                \
        printf(__VA_ARGS__);                                                                                           \
        printf("\n");                                                                                                  \
        fflush(stdout);                                                                                                \
    } while (0)

static inline const char *status_name(hsa_status_t s) {
    const char *text = NULL;
    if (hsa_status_string(s, &text) != HSA_STATUS_SUCCESS || text == NULL)
        text = "?";
    static char buf[256];
    snprintf(buf, sizeof buf, "%#x (%s)", (unsigned)s, text);
    return buf;
}

/* The body of the find_*_cb callbacks: `agent` into `*data`, ending the iteration, if it is a
 * device of type `want`. */
static inline hsa_status_t take_agent_of(hsa_agent_t agent, void *data, hsa_device_type_t want) {
    hsa_device_type_t type;
    if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS)
        return HSA_STATUS_ERROR;
    if (type != want)
        return HSA_STATUS_SUCCESS;
    *(hsa_agent_t *)data = agent;
    return HSA_STATUS_INFO_BREAK;
}

/* hsa_iterate_agents callback: the first GPU agent. */
static hsa_status_t find_gpu_cb(hsa_agent_t agent, void *data) {
    return take_agent_of(agent, data, HSA_DEVICE_TYPE_GPU);
}

/* hsa_iterate_agents callback: the CPU agent (whose pools hold system memory). */
static inline hsa_status_t find_cpu_cb(hsa_agent_t agent, void *data) {
    return take_agent_of(agent, data, HSA_DEVICE_TYPE_CPU);
}

/* The body of the *_pool_cb callbacks: `pool` into `*data`, ending the iteration, if it is a
 * global-segment pool that programs may allocate from with `flag`
 * (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*) among its flags. */
static inline hsa_status_t take_global_pool_with(hsa_amd_memory_pool_t pool, void *data, uint32_t flag) {
    hsa_amd_segment_t segment;
    uint32_t flags = 0;
    bool alloc = false;
    HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment));
    if (segment != HSA_AMD_SEGMENT_GLOBAL)
        return HSA_STATUS_SUCCESS;
    HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
    HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc));
    if (!alloc || !(flags & flag))
        return HSA_STATUS_SUCCESS;
    *(hsa_amd_memory_pool_t *)data = pool;
    return HSA_STATUS_INFO_BREAK;
}

/* hsa_amd_agent_iterate_memory_pools callback: the first allocatable fine-grained global pool
 * (the CPU agent's system memory). */
static inline hsa_status_t fine_pool_cb(hsa_amd_memory_pool_t pool, void *data) {
    return take_global_pool_with(pool, data, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED);
}

/* The same for the first coarse-grained one (a GPU agent's VRAM). */
static inline hsa_status_t coarse_pool_cb(hsa_amd_memory_pool_t pool, void *data) {
    return take_global_pool_with(pool, data, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
}

static int find_hsakmt_cb(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    if (strstr(info->dlpi_name, "libhsakmt.so")) {
        *(const char **)out = info->dlpi_name;
        return 1;
    }
    return 0;
}

/* hsa_init and the first GPU agent (its name printed), and the libhsakmt that ROCr loaded: the
 * tests check it is the thunk they asked for. */
static inline hsa_agent_t init_gpu(void) {
    HSA(hsa_init());
    const char *thunk = NULL;
    dl_iterate_phdr(find_hsakmt_cb, &thunk);
    CHECK(thunk != NULL, "ROCr loaded a libhsakmt.so");
    printf("libhsakmt: %s\n", thunk);
    hsa_agent_t gpu = {0};
    hsa_status_t s = hsa_iterate_agents(find_gpu_cb, &gpu);
    CHECK(s == HSA_STATUS_INFO_BREAK && gpu.handle != 0, "no GPU agent (hsa_iterate_agents -> %s)", status_name(s));
    char name[64] = {0};
    HSA(hsa_agent_get_info(gpu, HSA_AGENT_INFO_NAME, name));
    OK("hsa_init; GPU agent %s", name);
    return gpu;
}

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* System timestamp ticks per second (HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY). */
static inline uint64_t tick_hz(void) {
    uint64_t hz = 0;
    HSA(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &hz));
    CHECK(hz != 0, "timestamp frequency 0");
    return hz;
}

/* Writes a barrier packet's body into the next slot of `q` and publishes its header last (one
 * 32-bit release store of header | reserved << 16), then rings the doorbell. Returns its index. */
static inline uint64_t submit_barrier(hsa_queue_t *q, hsa_packet_type_t type, const hsa_signal_t deps[5],
                                      hsa_signal_t completion) {
    uint64_t index = hsa_queue_add_write_index_scacq_screl(q, 1);
    /* A full ring: wait (10 s at most) for the device to consume a slot. */
    double t0 = now_s();
    while (index - hsa_queue_load_read_index_scacquire(q) >= q->size)
        CHECK(now_s() - t0 < 10, "packet %lu: the ring stayed full for 10 s (read index %lu)", (unsigned long)index,
              (unsigned long)hsa_queue_load_read_index_scacquire(q));
    hsa_barrier_and_packet_t *slot = (hsa_barrier_and_packet_t *)q->base_address + (index & (q->size - 1));
    hsa_barrier_and_packet_t p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 5; i++)
        p.dep_signal[i] = deps ? deps[i] : (hsa_signal_t){0};
    p.completion_signal = completion;
    /* Body first (everything after the header word), then the header. */
    memcpy((char *)slot + 4, (char *)&p + 4, sizeof p - 4);
    uint16_t header = (uint16_t)((type << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
    __atomic_store_n((uint32_t *)slot, (uint32_t)header, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)index);
    return index;
}

#endif
