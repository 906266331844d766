/* Signal events up to KFD's limit through the real libhsakmt: amdkfd hands out the 4096 slots of
 * the event page (ids 0..4095), then CREATE_EVENT fails and hsaKmtCreateEvent returns
 * HSAKMT_STATUS_ERROR; once one is destroyed one more can be made, and then the limit holds
 * again. The events still work at the limit: the first is set and waited on. The rest go with
 * hsaKmtCloseKFD. Its own program because 4096 ioctls take a while under TCG. */
#include "common.h"

#define LIMIT 4096

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    static HsaEvent *all[LIMIT];
    HsaEventDescriptor d;
    memset(&d, 0, sizeof d);
    d.EventType = HSA_EVENTTYPE_SIGNAL;
    d.NodeId = gpu;
    d.SyncVar.SyncVarSize = sizeof(HSAuint64);

    unsigned made = 0;
    HSAKMT_STATUS st = HSAKMT_STATUS_SUCCESS;
    double t0 = now_s();
    while (made <= LIMIT) {
        HsaEvent *x = NULL;
        st = hsaKmtCreateEvent(&d, false, false, &x);
        if (st != HSAKMT_STATUS_SUCCESS)
            break;
        if (made == LIMIT || x->EventId >= LIMIT || x->EventData.HWData2 == 0) /* 4096 checks: only failures print */
            CHECK(0, "event %u (number %u) is within the limit of %d and has a slot of the event page", x->EventId,
                  made + 1, LIMIT);
        all[made++] = x;
        if (made % 1024 == 0) {
            printf("  %u events, %.1f s\n", made, now_s() - t0);
            fflush(stdout);
        }
    }
    CHECK(made == LIMIT && st == HSAKMT_STATUS_ERROR,
          "signal events stop at the limit of %d per process: %u made, then status %d (%.1f s)", LIMIT, made, (int)st,
          now_s() - t0);

    HsaEvent *x = NULL;
    unsigned freed = all[LIMIT / 2]->EventId;
    CHECK_OK(hsaKmtDestroyEvent(all[LIMIT / 2]));
    CHECK_OK(hsaKmtCreateEvent(&d, false, false, &x));
    CHECK(x->EventId == freed, "one destroyed (%u), one more created in its slot (event %u)", freed, x->EventId);
    all[LIMIT / 2] = x;
    HsaEvent *y = NULL;
    st = hsaKmtCreateEvent(&d, false, false, &y);
    CHECK(st == HSAKMT_STATUS_ERROR, "and then the limit again (status %d)", (int)st);

    CHECK_OK(hsaKmtSetEvent(all[0]));
    st = hsaKmtWaitOnEvent(all[0], (HSAuint32)(DEVICE_WAIT_S * 1000));
    CHECK(st == HSAKMT_STATUS_SUCCESS, "hsaKmtSetEvent then hsaKmtWaitOnEvent at the limit (status %d)", (int)st);
    st = hsaKmtWaitOnEvent(all[LIMIT - 1], 0);
    CHECK(st == HSAKMT_STATUS_WAIT_TIMEOUT, "the last event is not signaled (wait 0 ms -> %d)", (int)st);

    CHECK_OK(hsaKmtCloseKFD());
    PASS("event_limit");
}
