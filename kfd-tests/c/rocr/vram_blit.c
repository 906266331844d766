/* ROCr's own blit kernels on the shader core: with HSA_ENABLE_SDMA=0 ROCr copies and fills with
 * kernels on its utility queue (ROCR-Runtime rocm-5.2.3 amd_gpu_agent.cpp: BlitKernel for every
 * direction when SDMA is off; amd_blit_kernel.cpp: CopyAligned, CopyMisaligned, Fill). On a
 * 4 MiB VRAM buffer: hsa_amd_memory_fill whole and in part, and hsa_memory_copy VRAM->VRAM of a
 * pattern that came from the host; every byte is checked on the host, read back through system
 * memory (also a blit). */
#include "common.h"

#define SIZE (4u << 20)
#define WORDS (SIZE / 4)

/* A word of the pattern the copies carry: different in every word and every byte lane. */
static uint32_t pattern(uint32_t i) {
    uint32_t x = i * 2654435761u ^ 0x5bd1e995u;
    return x ^ (x >> 15);
}

/* Copies the VRAM buffer `src` back to host memory `host` (a blit) and returns it. */
static const uint32_t *read_back(uint32_t *host, const void *src) {
    memset(host, 0, SIZE);
    HSA(hsa_memory_copy(host, src, SIZE));
    return host;
}

int main(void) {
    const char *sdma = getenv("HSA_ENABLE_SDMA");
    CHECK(sdma && strcmp(sdma, "0") == 0, "HSA_ENABLE_SDMA=0 must be set (so ROCr blits with kernels), not %s",
          sdma ? sdma : "unset");
    hsa_agent_t gpu = init_gpu(), cpu = {0};
    CHECK(hsa_iterate_agents(find_cpu_cb, &cpu) == HSA_STATUS_INFO_BREAK, "no CPU agent");
    hsa_amd_memory_pool_t vram = {0}, system = {0};
    CHECK(hsa_amd_agent_iterate_memory_pools(gpu, coarse_pool_cb, &vram) == HSA_STATUS_INFO_BREAK, "no VRAM pool");
    CHECK(hsa_amd_agent_iterate_memory_pools(cpu, fine_pool_cb, &system) == HSA_STATUS_INFO_BREAK,
          "no fine-grained system pool");

    void *a = NULL, *b = NULL;
    uint32_t *host = NULL, *back = NULL;
    HSA(hsa_amd_memory_pool_allocate(vram, SIZE, 0, &a));
    HSA(hsa_amd_memory_pool_allocate(vram, SIZE, 0, &b));
    HSA(hsa_amd_memory_pool_allocate(system, SIZE, 0, (void **)&host));
    HSA(hsa_amd_memory_pool_allocate(system, SIZE, 0, (void **)&back));
    hsa_agent_t both[2] = {gpu, cpu};
    HSA(hsa_amd_agents_allow_access(2, both, NULL, host));
    HSA(hsa_amd_agents_allow_access(2, both, NULL, back));
    OK("two 4 MiB VRAM buffers at %p and %p, two 4 MiB system buffers", a, b);

    /* Fill the whole of `a`, then a part that starts and ends inside it. */
    const uint32_t v1 = 0xA5C3E10Fu, v2 = 0x0123FEDCu;
    const uint32_t from = 1027, to = WORDS - 4093; /* words [from, to) */
    HSA(hsa_amd_memory_fill(a, v1, WORDS));
    const uint32_t *got = read_back(back, a);
    for (uint32_t i = 0; i < WORDS; i++)
        CHECK(got[i] == v1, "after the whole fill, word %u is %#x, want %#x", i, got[i], v1);
    OK("hsa_amd_memory_fill of 4 MiB: every byte %#x", v1);
    HSA(hsa_amd_memory_fill((uint32_t *)a + from, v2, to - from));
    got = read_back(back, a);
    for (uint32_t i = 0; i < WORDS; i++) {
        uint32_t want = (i >= from && i < to) ? v2 : v1;
        CHECK(got[i] == want, "after the partial fill of words [%u, %u), word %u is %#x, want %#x", from, to, i,
              got[i], want);
    }
    OK("hsa_amd_memory_fill of words [%u, %u): only those changed", from, to);

    /* A pattern from the host into `b`, then VRAM->VRAM from `b` over the filled `a`. */
    for (uint32_t i = 0; i < WORDS; i++)
        host[i] = pattern(i);
    HSA(hsa_memory_copy(b, host, SIZE));
    HSA(hsa_memory_copy(a, b, SIZE));
    got = read_back(back, a);
    for (uint32_t i = 0; i < WORDS; i++)
        CHECK(got[i] == pattern(i), "after the VRAM->VRAM copy, word %u is %#x, want %#x", i, got[i], pattern(i));
    OK("hsa_memory_copy of 4 MiB VRAM->VRAM: every byte of the pattern");
    got = read_back(back, b);
    for (uint32_t i = 0; i < WORDS; i++)
        CHECK(got[i] == pattern(i), "the copy's source changed: word %u is %#x, want %#x", i, got[i], pattern(i));
    OK("the source is unchanged");

    HSA(hsa_amd_memory_pool_free(a));
    HSA(hsa_amd_memory_pool_free(b));
    HSA(hsa_amd_memory_pool_free(host));
    HSA(hsa_amd_memory_pool_free(back));
    HSA(hsa_shut_down());
    printf("PASS vram_blit\n");
    return 0;
}
