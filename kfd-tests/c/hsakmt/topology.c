/* Open and topology: hsaKmtOpenKFD, the version, the system and node properties of our GPU (a
 * gfx90a with memory banks, caches and IO links), as the real libhsakmt reads them. */
#include "common.h"

int main(void) {
    HsaVersionInfo v;
    CHECK_OK(hsaKmtOpenKFD());
    CHECK_OK(hsaKmtGetVersion(&v));
    CHECK(v.KernelInterfaceMajorVersion == 1 && v.KernelInterfaceMinorVersion >= 1, "KFD interface version %u.%u",
          v.KernelInterfaceMajorVersion, v.KernelInterfaceMinorVersion);
    /* A second open is counted, not a second device. */
    HSAKMT_STATUS st = hsaKmtOpenKFD();
    CHECK(st == HSAKMT_STATUS_KERNEL_ALREADY_OPENED, "a second hsaKmtOpenKFD says it is already open (%d)", (int)st);
    CHECK_OK(hsaKmtCloseKFD());

    HsaSystemProperties sp;
    CHECK_OK(hsaKmtAcquireSystemProperties(&sp));
    CHECK(sp.NumNodes >= 2, "%u topology nodes (a CPU and a GPU)", sp.NumNodes);
    int gpus = 0;
    for (HSAuint32 n = 0; n < sp.NumNodes; n++) {
        HsaNodeProperties np;
        CHECK_OK(hsaKmtGetNodeProperties(n, &np));
        printf("node %u: %u CPU cores, %u SIMDs, %u memory banks, %u caches, %u IO links\n", n,
               np.NumCPUCores, np.NumFComputeCores, np.NumMemoryBanks, np.NumCaches, np.NumIOLinks);
        if (np.NumFComputeCores == 0) {
            CHECK(np.NumCPUCores > 0, "node %u is a CPU node with cores", n);
            continue;
        }
        gpus++;
        CHECK(np.NumFComputeCores > 0 && np.NumSIMDPerCU > 0, "GPU node %u has compute units", n);
        CHECK(np.EngineId.ui32.Major == 9 && np.EngineId.ui32.Minor == 0 && np.EngineId.ui32.Stepping == 10,
              "GPU node %u is gfx%u%u%x", n, np.EngineId.ui32.Major, np.EngineId.ui32.Minor,
              np.EngineId.ui32.Stepping);
        CHECK(np.DrmRenderMinor >= 128 && np.DrmRenderMinor < 256, "render minor %d", np.DrmRenderMinor);
        CHECK(np.NumMemoryBanks > 0, "GPU node %u has memory banks", n);
        HsaMemoryProperties *mp = calloc(np.NumMemoryBanks, sizeof *mp);
        CHECK_OK(hsaKmtGetNodeMemoryProperties(n, np.NumMemoryBanks, mp));
        int vram = 0;
        for (HSAuint32 b = 0; b < np.NumMemoryBanks; b++) {
            printf("  bank %u: heap type %d, %llu bytes\n", b, (int)mp[b].HeapType,
                   (unsigned long long)mp[b].SizeInBytes);
            if (mp[b].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC ||
                mp[b].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PRIVATE)
                vram += mp[b].SizeInBytes > 0;
        }
        CHECK(vram > 0, "GPU node %u reports VRAM", n);
        free(mp);
        if (np.NumCaches > 0) {
            HsaCacheProperties *cp = calloc(np.NumCaches, sizeof *cp);
            CHECK_OK(hsaKmtGetNodeCacheProperties(n, np.CComputeIdLo, np.NumCaches, cp));
            CHECK(cp[0].CacheSize > 0, "GPU node %u cache 0: level %u, %u KiB", n, cp[0].CacheLevel,
                  cp[0].CacheSize);
            free(cp);
        }
        if (np.NumIOLinks > 0) {
            HsaIoLinkProperties *lp = calloc(np.NumIOLinks, sizeof *lp);
            CHECK_OK(hsaKmtGetNodeIoLinkProperties(n, np.NumIOLinks, lp));
            CHECK(lp[0].NodeFrom == n && lp[0].NodeTo < sp.NumNodes, "GPU node %u link 0 goes %u -> %u", n,
                  lp[0].NodeFrom, lp[0].NodeTo);
            free(lp);
        }
        HSAuint64 clk = 0;
        HsaClockCounters cc;
        CHECK_OK(hsaKmtGetClockCounters(n, &cc));
        clk = cc.GPUClockCounter;
        CHECK(cc.SystemClockFrequencyHz > 0, "clock counters: GPU %llu, system frequency %llu Hz",
              (unsigned long long)clk, (unsigned long long)cc.SystemClockFrequencyHz);
    }
    CHECK(gpus == 1, "%d GPU node", gpus);
    CHECK(hsaKmtGetNodeProperties(sp.NumNodes, &(HsaNodeProperties){0}) == HSAKMT_STATUS_INVALID_NODE_UNIT,
          "node %u beyond the topology is refused", sp.NumNodes);
    CHECK_OK(hsaKmtReleaseSystemProperties());
    CHECK_OK(hsaKmtCloseKFD());
    CHECK(hsaKmtAcquireSystemProperties(&sp) == HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED,
          "after the last close, calls say KFD is not open");
    PASS("topology");
}
