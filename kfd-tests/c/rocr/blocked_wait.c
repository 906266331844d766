/* Host waits in the BLOCKED state really sleep in the KFD event wait. hsa_signal_create makes
 * ROCr interrupt signals, each backed by a KFD signal event (amd_signal_t: event_mailbox_ptr and
 * event_id set). A thread waits HSA_WAIT_STATE_BLOCKED with a long timeout; the main thread
 * stores (or lets the device decrement) after ~1 s. The waiter's own CPU time
 * (CLOCK_THREAD_CPUTIME_ID) must stay under 20% of the wall time it waited; since a spinner
 * preempted on a loaded machine also gets little CPU, the waiter must also have blocked
 * (voluntary context switches: at least one, not a polling loop's thousands) and /proc must find
 * it sleeping (state S) in most samples. It must wake promptly on the store. An ACTIVE wait,
 * measured alongside, shows the instrument tells the two apart: it is never found asleep. */
#define _GNU_SOURCE
#include "common.h"
#include <amd_hsa_signal.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DELAY_S 1.0
#define MAX_CPU_FRACTION 0.20
/* A sleeper is woken by the store (a 60 s timeout would end it otherwise); a poller (see 2b)
 * may be preempted on a loaded machine. */
#define MAX_WAKE_S 1.0
#define MAX_WAKE_POLLER_S 5.0

static uint64_t hz;

struct waiter {
    hsa_signal_t sig;
    hsa_signal_condition_t cond;
    hsa_signal_value_t compare;
    hsa_wait_state_t hint;
    /* Out. */
    hsa_signal_value_t value;
    double start, end, cpu;
    long nvcsw, nivcsw;
    pthread_t thread;
    pid_t tid;
    int started, returned;
    /* ROCr makes this waiter poll (not the first on its signal): no CPU bound. */
    int polls;
    /* /proc samples taken while it waited, and how many found it sleeping (state S). */
    int samples, asleep;
};

static void *wait_thread(void *arg) {
    struct waiter *w = arg;
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    double c0 = thread_cpu_s();
    w->start = now_s();
    w->tid = (pid_t)syscall(SYS_gettid);
    __atomic_store_n(&w->started, 1, __ATOMIC_RELEASE);
    /* 60 s: long enough that only a wake, not the timeout, ends the wait. */
    w->value = hsa_signal_wait_scacquire(w->sig, w->cond, w->compare, hz * 60, w->hint);
    w->end = now_s();
    w->cpu = thread_cpu_s() - c0;
    getrusage(RUSAGE_THREAD, &r1);
    w->nvcsw = r1.ru_nvcsw - r0.ru_nvcsw;
    w->nivcsw = r1.ru_nivcsw - r0.ru_nivcsw;
    __atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void start(struct waiter *w, hsa_signal_t sig, hsa_signal_condition_t cond, hsa_signal_value_t compare,
                  hsa_wait_state_t hint) {
    w->sig = sig;
    w->cond = cond;
    w->compare = compare;
    w->hint = hint;
    w->started = 0;
    w->returned = 0;
    w->polls = 0;
    w->samples = w->asleep = 0;
    CHECK(pthread_create(&w->thread, NULL, wait_thread, w) == 0, "pthread_create");
    while (!__atomic_load_n(&w->started, __ATOMIC_ACQUIRE))
        usleep(100);
}

/* Joins `w`, which must have seen `want`; checks the sleep and returns the CPU fraction. */
static double finish(struct waiter *w, double woken_at, hsa_signal_value_t want, const char *what) {
    CHECK(pthread_join(w->thread, NULL) == 0, "pthread_join");
    double wall = w->end - w->start, frac = w->cpu / wall, wake = w->end - woken_at;
    printf("  %s: waited %.3f s, CPU %.4f s (%.2f%%), woke %.1f ms after the store, %ld voluntary / %ld "
           "involuntary switches, asleep in %d of %d samples\n",
           what, wall, w->cpu, 100 * frac, wake * 1e3, w->nvcsw, w->nivcsw, w->asleep, w->samples);
    CHECK(w->value == want, "%s: the wait returned %ld, want %ld", what, (long)w->value, (long)want);
    CHECK(wall >= DELAY_S * 0.9, "%s: returned after %.3f s, before the store", what, wall);
    CHECK(wake < (w->polls ? MAX_WAKE_POLLER_S : MAX_WAKE_S), "%s: woke %.3f s after the store", what, wake);
    if (w->hint == HSA_WAIT_STATE_BLOCKED && !w->polls) {
        /* CPU time alone cannot tell a spinner on a loaded machine (it gets little CPU) from a
         * sleeper; a sleeper also blocked at least once, and /proc found it sleeping. */
        CHECK(frac < MAX_CPU_FRACTION, "%s: the BLOCKED waiter used %.1f%% of a CPU: it spun instead of sleeping",
              what, 100 * frac);
        CHECK(w->nvcsw >= 1, "%s: no voluntary switch in a BLOCKED wait: it never slept", what);
        CHECK(w->nvcsw < 1000, "%s: %ld voluntary switches in a BLOCKED wait: it polled instead of sleeping", what,
              w->nvcsw);
        CHECK(w->asleep * 4 >= w->samples * 3, "%s: asleep (state S) in only %d of %d samples", what, w->asleep,
              w->samples);
    }
    return frac;
}

/* Reads /proc/self/task/<tid>/<file> into `buf` (NUL-terminated); 0 when it cannot be opened. */
static int read_task_file(pid_t tid, const char *file, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    return 1;
}

/* A thread's scheduler state ('S' sleeping, 'R' running) from /proc. */
static char thread_state(pid_t tid) {
    char buf[512];
    if (!read_task_file(tid, "stat", buf, sizeof buf))
        return '?';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Where a sleeping thread waits in the kernel (/proc wchan): a futex for the embedded device,
 * a FUSE request for a CUSE node. */
static const char *thread_wchan(pid_t tid) {
    static char buf[128];
    return read_task_file(tid, "wchan", buf, sizeof buf) ? buf : "?";
}

/* Sleeps `seconds` while sampling the state of the `n` waiters at `ws` 20 times. */
static void sample(struct waiter *ws, int n, double seconds) {
    for (int i = 0; i < 20; i++) {
        usleep((useconds_t)(seconds * 1e6 / 20));
        for (int j = 0; j < n; j++) {
            ws[j].samples++;
            ws[j].asleep += thread_state(ws[j].tid) == 'S';
        }
    }
}

int main(void) {
    hsa_agent_t gpu = init_gpu();
    hz = tick_hz();
    OK("timestamp frequency %lu Hz", (unsigned long)hz);

    /* The signal is an interrupt signal: a KFD event behind it. */
    hsa_signal_t sig;
    HSA(hsa_signal_create(1, 0, NULL, &sig));
    const amd_signal_t *amd = (const amd_signal_t *)(uintptr_t)sig.handle;
    CHECK(amd->kind == AMD_SIGNAL_KIND_USER, "signal kind %ld", (long)amd->kind);
    CHECK(amd->event_mailbox_ptr != 0 && amd->event_id != 0, "not an interrupt signal: mailbox %#lx event %u",
          (unsigned long)amd->event_mailbox_ptr, amd->event_id);
    OK("hsa_signal_create made an interrupt signal: KFD event %u, mailbox %#lx", amd->event_id,
       (unsigned long)amd->event_mailbox_ptr);

    /* 1. One BLOCKED waiter, woken by a host store after ~1 s. */
    struct waiter w;
    start(&w, sig, HSA_SIGNAL_CONDITION_EQ, 0, HSA_WAIT_STATE_BLOCKED);
    sample(&w, 1, DELAY_S);
    printf("  the waiter sleeps in the kernel at %s\n", thread_wchan(w.tid));
    double at = now_s();
    hsa_signal_store_screlease(sig, 0);
    double f1 = finish(&w, at, 0, "BLOCKED wait, host store");
    OK("a BLOCKED waiter slept (state S in %d of %d samples), used %.2f%% CPU and woke on the host store", w.asleep,
       w.samples, 100 * f1);

    /* 2. Four BLOCKED waiters, each on its own signal (its own KFD event), with four conditions:
     * a store of 2 to each wakes LT 3, NE 5 and EQ 2; GTE 100 sleeps on until 100 arrives. */
    hsa_signal_t four[4];
    struct waiter ws[4];
    hsa_signal_condition_t conds[4] = {HSA_SIGNAL_CONDITION_LT, HSA_SIGNAL_CONDITION_NE, HSA_SIGNAL_CONDITION_EQ,
                                       HSA_SIGNAL_CONDITION_GTE};
    hsa_signal_value_t compares[4] = {3, 5, 2, 100};
    for (int i = 0; i < 4; i++) {
        HSA(hsa_signal_create(5, 0, NULL, &four[i]));
        start(&ws[i], four[i], conds[i], compares[i], HSA_WAIT_STATE_BLOCKED);
    }
    sample(ws, 4, DELAY_S);
    at = now_s();
    for (int i = 0; i < 4; i++)
        hsa_signal_store_screlease(four[i], 2);
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "waiter %d of 4", i);
        double f = finish(&ws[i], at, 2, what);
        worst = f > worst ? f : worst;
    }
    usleep(300 * 1000);
    CHECK(!__atomic_load_n(&ws[3].returned, __ATOMIC_ACQUIRE), "the GTE 100 waiter returned on 2");
    char st = thread_state(ws[3].tid);
    CHECK(st == 'S', "the GTE 100 waiter is in state %c after a store that did not satisfy it", st);
    at = now_s();
    hsa_signal_store_screlease(four[3], 100);
    double f4 = finish(&ws[3], at, 100, "waiter 3 of 4 (GTE 100)");
    worst = f4 > worst ? f4 : worst;
    for (int i = 0; i < 4; i++)
        HSA(hsa_signal_destroy(four[i]));
    OK("four BLOCKED waiters on four signals: three woke on a store of 2, the GTE-100 one slept on until 100 "
       "(worst CPU %.2f%%)",
       100 * worst);

    /* 2b. Three waiters on one signal: one store wakes them all. ROCr 5.2.3 lets only the first
     * waiter of an interrupt signal sleep in the event ("Allow only the first waiter to sleep";
     * later ones poll ACTIVE), so only the first one's CPU is held to the bound. */
    hsa_signal_store_relaxed(sig, 5);
    struct waiter shared[3];
    start(&shared[0], sig, HSA_SIGNAL_CONDITION_LT, 3, HSA_WAIT_STATE_BLOCKED);
    for (int i = 0; i < 200 && thread_state(shared[0].tid) != 'S'; i++)
        usleep(1000);
    usleep(20 * 1000);
    start(&shared[1], sig, HSA_SIGNAL_CONDITION_NE, 5, HSA_WAIT_STATE_BLOCKED);
    start(&shared[2], sig, HSA_SIGNAL_CONDITION_EQ, 2, HSA_WAIT_STATE_BLOCKED);
    shared[1].polls = shared[2].polls = 1;
    sample(shared, 3, DELAY_S);
    at = now_s();
    hsa_signal_store_screlease(sig, 2);
    double fs = finish(&shared[0], at, 2, "first waiter of three on one signal");
    finish(&shared[1], at, 2, "second waiter (ROCr polls)");
    finish(&shared[2], at, 2, "third waiter (ROCr polls)");
    OK("three waiters on one signal woke on one store; the first slept (%.2f%% CPU)", 100 * fs);

    /* 3. Woken by the device: a barrier's completion signal, the barrier gated on the host. */
    hsa_queue_t *q;
    HSA(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
    hsa_signal_t gate, done;
    HSA(hsa_signal_create(1, 0, NULL, &gate));
    HSA(hsa_signal_create(1, 0, NULL, &done));
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, (hsa_signal_t[5]){gate}, done);
    start(&w, done, HSA_SIGNAL_CONDITION_EQ, 0, HSA_WAIT_STATE_BLOCKED);
    sample(&w, 1, DELAY_S);
    at = now_s();
    hsa_signal_store_screlease(gate, 0);
    double f3 = finish(&w, at, 0, "BLOCKED wait, device decrement");
    OK("a BLOCKED waiter on a completion signal slept %.2f%% CPU and woke on the device's decrement", 100 * f3);

    /* 4. Contrast: an ACTIVE wait spins, never asleep (its CPU share is informational: a loaded
     * machine may starve it). */
    hsa_signal_store_relaxed(sig, 1);
    start(&w, sig, HSA_SIGNAL_CONDITION_EQ, 0, HSA_WAIT_STATE_ACTIVE);
    sample(&w, 1, DELAY_S);
    at = now_s();
    hsa_signal_store_screlease(sig, 0);
    double fa = finish(&w, at, 0, "ACTIVE wait, host store");
    CHECK(w.asleep * 4 < w.samples, "the ACTIVE waiter was found asleep in %d of %d samples", w.asleep, w.samples);
    OK("for contrast, an ACTIVE waiter used %.1f%% CPU and was asleep in %d of %d samples", 100 * fa, w.asleep,
       w.samples);

    printf("BLOCKED CPU fraction: host store %.2f%%, four waiters worst %.2f%%, device decrement %.2f%%; ACTIVE "
           "%.1f%%\n",
           100 * f1, 100 * worst, 100 * f3, 100 * fa);
    HSA(hsa_queue_destroy(q));
    HSA(hsa_signal_destroy(gate));
    HSA(hsa_signal_destroy(done));
    HSA(hsa_signal_destroy(sig));
    HSA(hsa_shut_down());
    printf("PASS blocked_wait\n");
    return 0;
}
