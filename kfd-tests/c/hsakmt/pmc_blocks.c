/* Every counter block hsaKmtPmcGetCounterProperties lists for the first GPU node, one line per
 * block in a fixed form (lines starting `pmc `), so that two libraries' lists can be compared
 * line by line: kfd-tests/tests/hsakmt_programs.rs runs it over Debian's libhsakmt (5.2.3) and
 * over ours on nodes of each profile. It checks only what holds for any table: every block
 * has counters and slots, and the blocks are laid out back to back as libhsakmt documents. */
#include "common.h"

/* The counter ids of `blk` as ascending runs "a-b,c-d"; 0 if they do not ascend. */
static int id_runs(const HsaCounterBlockProperties *blk, char *out, size_t len) {
    size_t at = 0;
    HSAuint32 n = blk->NumCounters;
    for (HSAuint32 i = 0; i < n;) {
        HSAuint32 j = i;
        while (j + 1 < n && blk->Counters[j + 1].CounterId == blk->Counters[j].CounterId + 1)
            j++;
        if (j + 1 < n && blk->Counters[j + 1].CounterId < blk->Counters[j].CounterId)
            return 0;
        int w = snprintf(out + at, len - at, "%s%llu-%llu", i ? "," : "", (unsigned long long)blk->Counters[i].CounterId,
                         (unsigned long long)blk->Counters[j].CounterId);
        if (w < 0 || (size_t)w >= len - at)
            return 0;
        at += (size_t)w;
        i = j + 1;
    }
    return 1;
}

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    HsaNodeProperties np;
    CHECK_OK(hsaKmtGetNodeProperties(gpu, &np));
    printf("node %u: GFX %u.%u.%u, device id %#x\n", gpu, np.EngineId.ui32.Major, np.EngineId.ui32.Minor,
           np.EngineId.ui32.Stepping, np.DeviceId);
    HsaCounterProperties *props = NULL;
    CHECK_OK(hsaKmtPmcGetCounterProperties(gpu, &props));
    CHECK(props->NumBlocks > 0, "%u blocks", props->NumBlocks);
    printf("pmc blocks %u slots %u\n", props->NumBlocks, props->NumConcurrent);
    HsaCounterBlockProperties *blk = &props->Blocks[0];
    HSAuint32 slots = 0;
    for (HSAuint32 i = 0; i < props->NumBlocks; i++) {
        CHECK(blk->NumCounters > 0 && blk->NumConcurrent > 0, "block %u: %u counters, %u slots", i, blk->NumCounters,
              blk->NumConcurrent);
        const HsaCounter *c0 = &blk->Counters[0];
        /* Only Flags' Global bit is set by libhsakmt; the others are whatever malloc gave. */
        HSAuint32 same = 0;
        for (HSAuint32 j = 0; j < blk->NumCounters; j++) {
            const HsaCounter *c = &blk->Counters[j];
            same += c->Type == c0->Type && c->CounterSizeInBits == c0->CounterSizeInBits &&
                    c->CounterMask == c0->CounterMask && (c->Flags.Value & 1) == (c0->Flags.Value & 1) &&
                    c->BlockIndex == c0->BlockIndex;
        }
        CHECK(same == blk->NumCounters, "block %u: every counter like its first (%u of %u)", i, same, blk->NumCounters);
        static char runs[4096];
        CHECK(id_runs(blk, runs, sizeof runs), "block %u: ids ascend", i);
        const HSA_UUID *u = &blk->BlockId;
        printf("pmc block %u: %08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x index %u slots %u counters %u type %u "
               "bits %llu mask %#llx global %u ids %s\n",
               i, u->Data1, u->Data2, u->Data3, u->Data4[0], u->Data4[1], u->Data4[2], u->Data4[3], u->Data4[4],
               u->Data4[5], u->Data4[6], u->Data4[7], c0->BlockIndex, blk->NumConcurrent, blk->NumCounters,
               (unsigned)c0->Type, (unsigned long long)c0->CounterSizeInBits, (unsigned long long)c0->CounterMask,
               (unsigned)(c0->Flags.Value & 1), runs);
        slots += blk->NumConcurrent;
        blk = (HsaCounterBlockProperties *)&blk->Counters[blk->NumCounters];
    }
    CHECK(slots == props->NumConcurrent, "the blocks' slots total %u", slots);
    HSAKMT_STATUS st = hsaKmtPmcGetCounterProperties(0, &props);
    printf("pmc cpu node status %d\n", (int)st);
    CHECK_OK(hsaKmtCloseKFD());
    PASS("pmc_blocks");
}
