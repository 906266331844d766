/* Allocate, map, write from the host and read back through a device copy, for system (userptr),
 * GTT and VRAM buffers: the host fills a buffer, an SDMA COPY_LINEAR on an SDMA queue copies it
 * to another buffer, a FENCE that follows tells the host the copy is done, and the host reads the
 * copy back. Then copies between the kinds, and unmap and free. */
#include "common.h"

#define SIZE (64 * 1024)

static uint32_t pattern(unsigned kind, unsigned i) { return 0x9e3779b9u * (i + 1) ^ (kind << 28); }

static void copy_and_fence(struct ring *q, volatile uint32_t *fence, uint32_t seq, void *dst, const void *src,
                           uint32_t bytes) {
    uint32_t p[16];
    unsigned n = sdma_copy_linear(p, (uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, bytes);
    n += sdma_fence(p + n, (uint64_t)(uintptr_t)fence, seq);
    ring_submit(q, p, n);
    wait_u32(fence, seq, "the fence after the copy");
}

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    struct ring q;
    ring_create(&q, gpu, HSA_QUEUE_SDMA);
    volatile uint32_t *fence = alloc_mapped(gpu, MEM_GTT, 4096);
    uint32_t seq = 0;
    *fence = 0;

    uint32_t *bufs[3][2];
    for (unsigned k = MEM_SYSTEM; k <= MEM_VRAM; k++) {
        const char *name = mem_kind_name(k);
        uint32_t *a = alloc_mapped(gpu, k, SIZE), *b = alloc_mapped(gpu, k, SIZE);
        bufs[k][0] = a;
        bufs[k][1] = b;
        for (unsigned i = 0; i < SIZE / 4; i++) {
            a[i] = pattern(k, i);
            b[i] = 0;
        }
        unsigned bad = 0;
        for (unsigned i = 0; i < SIZE / 4; i++)
            bad += a[i] != pattern(k, i);
        CHECK(bad == 0, "%s: the host reads back what it wrote", name);
        copy_and_fence(&q, fence, ++seq, b, a, SIZE);
        for (unsigned i = 0; i < SIZE / 4; i++)
            bad += b[i] != pattern(k, i);
        CHECK(bad == 0, "%s: %u bytes written by the host, copied by SDMA, read back by the host (%u words differ)",
              name, SIZE, bad);
        /* A copy at an odd offset and length within the buffer. */
        memset(b, 0, SIZE);
        copy_and_fence(&q, fence, ++seq, (char *)b + 4096 + 3, (char *)a + 5, 1001);
        const unsigned char *ab = (const unsigned char *)a, *bb = (const unsigned char *)b;
        for (unsigned i = 0; i < 1001; i++)
            bad += bb[4096 + 3 + i] != ab[5 + i];
        bad += bb[4096 + 2] != 0 || bb[4096 + 3 + 1001] != 0;
        CHECK(bad == 0, "%s: 1001 bytes at unaligned offsets, and nothing around them", name);
    }
    /* Across kinds: system -> VRAM -> GTT -> system. */
    memset(bufs[MEM_SYSTEM][1], 0, SIZE);
    copy_and_fence(&q, fence, ++seq, bufs[MEM_VRAM][1], bufs[MEM_SYSTEM][0], SIZE);
    copy_and_fence(&q, fence, ++seq, bufs[MEM_GTT][1], bufs[MEM_VRAM][1], SIZE);
    copy_and_fence(&q, fence, ++seq, bufs[MEM_SYSTEM][1], bufs[MEM_GTT][1], SIZE);
    CHECK(memcmp(bufs[MEM_SYSTEM][1], bufs[MEM_SYSTEM][0], SIZE) == 0, "system -> VRAM -> GTT -> system by SDMA");
    ring_wait_idle(&q);

    for (unsigned k = MEM_SYSTEM; k <= MEM_VRAM; k++) {
        free_mapped(bufs[k][0], SIZE);
        free_mapped(bufs[k][1], SIZE);
    }
    free_mapped((void *)fence, 4096);
    ring_destroy(&q);
    CHECK_OK(hsaKmtCloseKFD());
    PASS("memory");
}
