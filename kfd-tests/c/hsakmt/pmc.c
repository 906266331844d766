/* Performance counters: the counter blocks the real libhsakmt (5.2.3) lists for our gfx90a node
 * and what its trace calls answer for them. The same facts are checked over our libhsakmt by
 * thunk/tests/c/rest_of_api.c; only calls the real one survives are made here (it reads a
 * trace id as a pointer, and reads past its block list for a block it does not list). */
#include "common.h"

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    HsaCounterProperties *props = NULL;
    CHECK_OK(hsaKmtPmcGetCounterProperties(gpu, &props));
    CHECK(props->NumBlocks == 20 && props->NumConcurrent == 158, "%u blocks, %u slots in all", props->NumBlocks,
          props->NumConcurrent);
    HsaCounterBlockProperties *blk = &props->Blocks[0], *sq = NULL;
    HSAuint32 total = 0;
    for (HSAuint32 i = 0; i < props->NumBlocks; i++) {
        printf("block %u: index %u, %08x-..., %u counters, %u slots\n", i, blk->Counters[0].BlockIndex,
               blk->BlockId.Data1, blk->NumCounters, blk->NumConcurrent);
        HSAuint32 odd = 0;
        for (HSAuint32 j = 0; j < blk->NumCounters; j++) {
            HsaCounter *c = &blk->Counters[j];
            /* libhsakmt sets only the Global bit of Flags, in memory it got from malloc: the
             * other bits are whatever was there. */
            int ok = c->Type == HSA_PROFILE_TYPE_NONPRIV_IMMEDIATE && c->CounterSizeInBits == 64 &&
                     c->CounterMask == ~0ull && (c->Flags.Value & 1) == 1 &&
                     c->BlockIndex == blk->Counters[0].BlockIndex;
            if (!ok && odd++ == 0)
                printf("block %u counter %u: type %u, %llu bits, mask %#llx, flags %#x, block index %u\n", i, j,
                       (unsigned)c->Type, (unsigned long long)c->CounterSizeInBits,
                       (unsigned long long)c->CounterMask, (unsigned)c->Flags.Value, (unsigned)c->BlockIndex);
        }
        CHECK(odd == 0, "block %u: every counter non-privileged, 64 bits, global, of the block", i);
        total += blk->NumCounters;
        if (i == 11)
            sq = blk;
        blk = (HsaCounterBlockProperties *)&blk->Counters[blk->NumCounters];
    }
    CHECK(total == 3289, "%u counters in all", total);
    CHECK(sq->BlockId.Data1 == 0xb5c396b6 && sq->NumConcurrent == 16 && sq->NumCounters == 301 &&
              sq->Counters[0].BlockIndex == 14,
          "block 11 is SQ, 16 slots, 301 counters");
    CHECK(sq->Counters[0].CounterId == 1 && sq->Counters[182].CounterId == 183 && sq->Counters[183].CounterId == 255,
          "SQ's ids run 1..183 then 255..");
    HsaCounterProperties *again = NULL;
    CHECK_OK(hsaKmtPmcGetCounterProperties(gpu, &again));
    CHECK(again == props, "the same properties again");
    HSAKMT_STATUS st = hsaKmtPmcGetCounterProperties(0, &again);
    CHECK(st == HSAKMT_STATUS_INVALID_PARAMETER, "the CPU node has no table (%d)", (int)st);

    HsaCounter counter = props->Blocks[0].Counters[0], eight[8];
    HsaPmcTraceRoot root;
    st = hsaKmtPmcRegisterTrace(gpu, 1, &counter, &root);
    CHECK(st == HSAKMT_STATUS_INVALID_PARAMETER, "a non-privileged counter alone registers nothing (%d)", (int)st);
    counter.Type = HSA_PROFILE_TYPE_PRIVILEGED_IMMEDIATE;
    for (int i = 0; i < 8; i++)
        eight[i] = counter;
    st = hsaKmtPmcRegisterTrace(gpu, 8, eight, &root);
    CHECK(st == HSAKMT_STATUS_INVALID_PARAMETER, "8 counters for CB's 7 slots (%d)", (int)st);
    CHECK_OK(hsaKmtPmcRegisterTrace(gpu, 7, eight, &root));
    CHECK(root.NumberOfPasses == 1 && root.TraceBufferMinSizeBytes == 4096 && root.TraceId != 0,
          "one pass, a page of buffer");
    char buf[64];
    st = hsaKmtPmcAcquireTraceAccess(gpu, root.TraceId);
    CHECK(st == HSAKMT_STATUS_UNAVAILABLE, "no slots to acquire on CB (%d)", (int)st);
    CHECK_OK(hsaKmtPmcReleaseTraceAccess(gpu, root.TraceId));
    st = hsaKmtPmcStartTrace(root.TraceId, buf, sizeof buf);
    CHECK(st == HSAKMT_STATUS_ERROR, "an unacquired trace does not start (%d)", (int)st);
    st = hsaKmtPmcQueryTrace(root.TraceId);
    CHECK(st == HSAKMT_STATUS_NO_MEMORY, "an unstarted trace has no buffer (%d)", (int)st);
    st = hsaKmtPmcStopTrace(root.TraceId);
    CHECK(st == HSAKMT_STATUS_ERROR, "nor does it stop (%d)", (int)st);
    st = hsaKmtPmcUnregisterTrace(0, root.TraceId);
    CHECK(st == HSAKMT_STATUS_INVALID_NODE_UNIT, "the CPU node does not own it (%d)", (int)st);
    CHECK_OK(hsaKmtPmcUnregisterTrace(gpu, root.TraceId));
    CHECK_OK(hsaKmtCloseKFD());
    PASS("pmc");
}
