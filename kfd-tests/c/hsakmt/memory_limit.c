/* Allocate until failure through the real libhsakmt: VRAM buffers of an eighth of the GPU's
 * memory bank until ALLOC_MEMORY_OF_GPU answers ENOMEM, which libhsakmt turns into
 * HSAKMT_STATUS_NO_MEMORY (fmm_allocate_device): exactly 8 fit, as nothing else holds the
 * daemon's VRAM (libhsakmt 5.2.3 has no hsaKmtAvailableMemory to ask); one freed makes room for
 * exactly one more; all freed gives it all back. Then GTT (system memory
 * the GPU maps, through fmm_allocate_host) until the device's system-memory limit, where
 * libhsakmt answers HSAKMT_STATUS_ERROR, and again one freed makes room for one. Nothing is
 * touched: the backing files stay sparse. */
#include "common.h"

#define MAX_BUFFERS 256

static HSAKMT_STATUS try_alloc(HSAuint32 node, int vram, HSAuint64 size, void **p) {
    HsaMemFlags f;
    memset(&f, 0, sizeof f);
    f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
    f.ui32.NonPaged = 1;
    if (vram) {
        f.ui32.NoSubstitute = 1;
    } else {
        f.ui32.HostAccess = 1;
    }
    *p = NULL;
    return hsaKmtAllocMemory(node, size, f, p);
}

static HSAuint64 vram_bank(HSAuint32 gpu) {
    HsaNodeProperties np;
    CHECK_OK(hsaKmtGetNodeProperties(gpu, &np));
    HsaMemoryProperties banks[8];
    CHECK(np.NumMemoryBanks >= 1 && np.NumMemoryBanks <= 8, "GPU node %u has %u memory banks", gpu, np.NumMemoryBanks);
    CHECK_OK(hsaKmtGetNodeMemoryProperties(gpu, np.NumMemoryBanks, banks));
    for (HSAuint32 i = 0; i < np.NumMemoryBanks; i++)
        if (banks[i].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC || banks[i].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PRIVATE)
            return banks[i].SizeInBytes;
    CHECK(0, "GPU node %u has a frame-buffer bank", gpu);
    return 0;
}

/* Allocates `chunk`-byte buffers until one fails; returns how many, the failure in *st. */
static unsigned fill(HSAuint32 node, int vram, HSAuint64 chunk, void **bufs, HSAKMT_STATUS *st) {
    unsigned n = 0;
    while (n < MAX_BUFFERS) {
        *st = try_alloc(node, vram, chunk, &bufs[n]);
        if (*st != HSAKMT_STATUS_SUCCESS)
            return n;
        n++;
    }
    CHECK(0, "%u buffers of %llu bytes and no failure", n, (unsigned long long)chunk);
    return n;
}

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    static void *bufs[MAX_BUFFERS];
    HSAKMT_STATUS st;

    /* VRAM. */
    HSAuint64 bank = vram_bank(gpu), chunk = bank / 8;
    unsigned n = fill(gpu, 1, chunk, bufs, &st);
    CHECK(st == HSAKMT_STATUS_NO_MEMORY, "VRAM allocation past the bank fails with HSAKMT_STATUS_NO_MEMORY (%d)",
          (int)st);
    CHECK(n == 8, "%u VRAM buffers of %llu bytes fit in the %llu-byte bank", n, (unsigned long long)chunk,
          (unsigned long long)bank);
    CHECK_OK(hsaKmtFreeMemory(bufs[n / 2], chunk));
    CHECK_OK(try_alloc(gpu, 1, chunk, &bufs[n / 2]));
    st = try_alloc(gpu, 1, chunk, &bufs[n]);
    CHECK(st == HSAKMT_STATUS_NO_MEMORY, "then the limit again (%d)", (int)st);
    for (unsigned i = 0; i < n; i++)
        CHECK_OK(hsaKmtFreeMemory(bufs[i], chunk));
    /* All of it back: the whole bank in one buffer. */
    CHECK_OK(try_alloc(gpu, 1, bank, &bufs[0]));
    CHECK_OK(hsaKmtFreeMemory(bufs[0], bank));
    printf("  VRAM: %u buffers of %llu MiB, then HSAKMT_STATUS_NO_MEMORY\n", n, (unsigned long long)(chunk >> 20));

    /* GTT: system memory mapped for the GPU, allocated on the system node. */
    chunk = 256ull << 20;
    n = fill(0, 0, chunk, bufs, &st);
    CHECK(st == HSAKMT_STATUS_ERROR && n >= 1,
          "GTT allocation past the system-memory limit fails with HSAKMT_STATUS_ERROR (%d) after %u buffers", (int)st,
          n);
    CHECK_OK(hsaKmtFreeMemory(bufs[0], chunk));
    CHECK_OK(try_alloc(0, 0, chunk, &bufs[0]));
    st = try_alloc(0, 0, chunk, &bufs[n]);
    CHECK(st == HSAKMT_STATUS_ERROR, "then the GTT limit again (%d)", (int)st);
    for (unsigned i = 0; i < n; i++)
        CHECK_OK(hsaKmtFreeMemory(bufs[i], chunk));
    printf("  GTT: %u buffers of %llu MiB, then HSAKMT_STATUS_ERROR\n", n, (unsigned long long)(chunk >> 20));

    CHECK_OK(hsaKmtCloseKFD());
    PASS("memory_limit");
}
