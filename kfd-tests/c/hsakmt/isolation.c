/* A second process isolated: the parent holds a PM4 queue, a signal event and a VRAM buffer and
 * forks. The child opens KFD itself and cannot reach the parent's objects: AMDKFD_IOC_DESTROY_QUEUE
 * of the parent's KFD queue id fails on the child's own open of the node (libhsakmt's queue handle
 * lives in memory a fork does not copy, so that call is made directly); through libhsakmt, which
 * starts over after a fork, setting, waiting on or destroying the parent's event fail, and an SDMA
 * copy from the parent's VRAM address on the child's own queue does not read the parent's data.
 * The parent's objects work afterwards. */
#include "common.h"
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The three KFD ioctls the child makes itself, as linux/kfd_ioctl.h defines them (that header
 * needs drm/drm.h, which Debian's libhsakmt-dev does not bring). */
struct kfd_ioctl_get_version_args {
    uint32_t major_version;
    uint32_t minor_version;
};
struct kfd_ioctl_destroy_queue_args {
    uint32_t queue_id;
    uint32_t pad;
};
struct kfd_ioctl_set_event_args {
    uint32_t event_id;
    uint32_t pad;
};
#define AMDKFD_IOC_GET_VERSION _IOR('K', 0x01, struct kfd_ioctl_get_version_args)
#define AMDKFD_IOC_DESTROY_QUEUE _IOWR('K', 0x03, struct kfd_ioctl_destroy_queue_args)
#define AMDKFD_IOC_SET_EVENT _IOW('K', 0x0A, struct kfd_ioctl_set_event_args)

#define SIZE 4096

static int child(HSAuint32 gpu, uint32_t parent_kfd_queue, HsaEvent *parent_event, void *parent_vram) {
    {
        int fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
        CHECK(fd >= 0, "child: opens /dev/kfd itself");
        struct kfd_ioctl_get_version_args v;
        memset(&v, 0, sizeof v);
        CHECK(ioctl(fd, AMDKFD_IOC_GET_VERSION, &v) == 0, "child: GET_VERSION on its own open (%u.%u)",
              v.major_version, v.minor_version);
        struct kfd_ioctl_destroy_queue_args d;
        memset(&d, 0, sizeof d);
        d.queue_id = parent_kfd_queue;
        int r = ioctl(fd, AMDKFD_IOC_DESTROY_QUEUE, &d);
        CHECK(r == -1, "child: AMDKFD_IOC_DESTROY_QUEUE of the parent's queue %u fails (%s)", parent_kfd_queue,
              r == -1 ? strerror(errno) : "it succeeded");
        struct kfd_ioctl_set_event_args se;
        memset(&se, 0, sizeof se);
        se.event_id = parent_event->EventId;
        r = ioctl(fd, AMDKFD_IOC_SET_EVENT, &se);
        CHECK(r == -1, "child: AMDKFD_IOC_SET_EVENT of the parent's event %u fails (%s)", se.event_id,
              r == -1 ? strerror(errno) : "it succeeded");
        close(fd);
    }
    HSAuint32 g = open_and_find_gpu();
    CHECK(g == gpu, "the child opened KFD through libhsakmt and sees GPU node %u", g);
    HSAKMT_STATUS st = hsaKmtSetEvent(parent_event);
    CHECK(st != HSAKMT_STATUS_SUCCESS, "child: setting the parent's event %u fails (status %d)", parent_event->EventId,
          (int)st);
    st = hsaKmtWaitOnEvent(parent_event, 0);
    CHECK(st != HSAKMT_STATUS_SUCCESS && st != HSAKMT_STATUS_WAIT_TIMEOUT,
          "child: waiting on the parent's event fails (status %d)", (int)st);
    st = hsaKmtDestroyEvent(parent_event);
    CHECK(st != HSAKMT_STATUS_SUCCESS, "child: destroying the parent's event fails (status %d)", (int)st);

    /* The child's own queue cannot read the parent's VRAM: its GPU VM has nothing there. */
    struct ring q;
    ring_create(&q, gpu, HSA_QUEUE_SDMA);
    volatile uint32_t *dst = alloc_mapped(gpu, MEM_GTT, 2 * SIZE);
    memset((void *)dst, 0, 2 * SIZE);
    uint32_t p[16];
    unsigned n = sdma_copy_linear(p, (uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)parent_vram, SIZE);
    n += sdma_fence(p + n, (uint64_t)(uintptr_t)(dst + SIZE / 4), 1);
    ring_submit(&q, p, n);
    double t0 = now_s();
    while (now_s() - t0 < 3.0 && dst[SIZE / 4] == 0) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    /* Either the copy faults (nothing at that address in the child's GPU VM) or it reads whatever
     * the child has there; never the parent's data. */
    unsigned leaked = 0;
    for (unsigned i = 0; i < SIZE / 4; i++)
        leaked += dst[i] == 0xc0de0000u + i;
    CHECK(leaked == 0, "child: an SDMA copy from the parent's VRAM address does not read the parent's data (fence %u, "
          "%u words of it)", dst[SIZE / 4], leaked);
    /* The child's own objects work. */
    HsaEvent *mine = create_signal_event(gpu, 0);
    CHECK_OK(hsaKmtSetEvent(mine));
    CHECK_OK(hsaKmtWaitOnEvent(mine, 1000));
    CHECK_OK(hsaKmtDestroyEvent(mine));
    CHECK_OK(hsaKmtCloseKFD());
    printf("child done\n");
    fflush(stdout);
    return 0;
}

int main(void) {
    HSAuint32 gpu = open_and_find_gpu();
    uint32_t *vram = alloc_mapped(gpu, MEM_VRAM, SIZE);
    for (unsigned i = 0; i < SIZE / 4; i++)
        vram[i] = 0xc0de0000u + i;
    volatile uint32_t *out = alloc_mapped(gpu, MEM_GTT, SIZE);
    memset((void *)out, 0, SIZE);
    HsaEvent *e = create_signal_event(gpu, 0);
    struct ring q;
    ring_create(&q, gpu, HSA_QUEUE_COMPUTE);
    /* libhsakmt's queue handle points at its struct queue, which starts with KFD's queue id. */
    uint32_t kfd_queue = *(const uint32_t *)(uintptr_t)q.qr.QueueId;
    printf("parent: KFD queue %u, event %u, VRAM at %p\n", kfd_queue, e->EventId, (void *)vram);
    fflush(stdout);

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0)
        _exit(child(gpu, kfd_queue, e, vram));
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks passed (status %#x)", status);

    /* The parent's objects are intact and work. */
    unsigned bad = 0;
    for (unsigned i = 0; i < SIZE / 4; i++)
        bad += vram[i] != 0xc0de0000u + i;
    CHECK(bad == 0, "parent: its VRAM is unchanged");
    {
        uint32_t v = 0xabcdef01, p[16];
        unsigned n = pm4_write_data(p, (uint64_t)(uintptr_t)out, &v, 1);
        ring_submit(&q, p, n);
        ring_wait_idle(&q);
        CHECK(out[0] == v, "parent: its PM4 queue still runs packets");
    }
    HSAKMT_STATUS st = hsaKmtWaitOnEvent(e, 0);
    CHECK(st == HSAKMT_STATUS_WAIT_TIMEOUT, "parent: its event was not set by the child (%d)", (int)st);
    CHECK_OK(hsaKmtSetEvent(e));
    CHECK_OK(hsaKmtWaitOnEvent(e, 1000));
    ring_destroy(&q);
    CHECK_OK(hsaKmtDestroyEvent(e));
    free_mapped((void *)out, SIZE);
    free_mapped(vram, SIZE);
    CHECK_OK(hsaKmtCloseKFD());
    PASS("isolation");
}
