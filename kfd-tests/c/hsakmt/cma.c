/* Cross memory attach between two processes, as kfdtest's CrossMemoryAttachTest does it: a forked
 * child opens KFD, fills a VRAM buffer and passes its address up a pipe; the parent copies it into
 * its own memory with hsaKmtProcessVMRead and writes into it with hsaKmtProcessVMWrite (libhsakmt
 * 5.2.3 sends AMD's out-of-tree CROSS_MEMORY_COPY for both), and the child checks what arrived.
 * A copy cut short by the shorter list reports what it copied; a range past the child's buffer
 * fails. The parent also copies within itself (kfdtest CMABasicTest's getpid() case). */
#include "common.h"
#include <sys/wait.h>
#include <unistd.h>

#define SIZE 8192

static void fill(uint32_t *p, uint32_t seed) {
    for (unsigned i = 0; i < SIZE / 4; i++)
        p[i] = seed + i;
}

static unsigned differ(const uint32_t *p, uint32_t seed, unsigned from, unsigned to) {
    unsigned bad = 0;
    for (unsigned i = from; i < to; i++)
        bad += p[i] != seed + i;
    return bad;
}

static int child(int up, int down) {
    HSAuint32 gpu = open_and_find_gpu();
    uint32_t *mine = alloc_mapped(gpu, MEM_VRAM, SIZE);
    fill(mine, 0xc0000000u);
    uint64_t addr = (uint64_t)(uintptr_t)mine;
    CHECK(write(up, &addr, sizeof addr) == sizeof addr, "child: its VRAM address %p goes to the parent", (void *)mine);
    char go;
    CHECK(read(down, &go, 1) == 1, "child: the parent is done copying");
    /* The parent wrote its first half-buffer of 0xa0000000 + i over the start of ours. */
    CHECK(differ(mine, 0xa0000000u, 0, SIZE / 8) == 0, "child: the parent's write arrived");
    CHECK(differ(mine, 0xc0000000u, SIZE / 8, SIZE / 4) == 0, "child: nothing past the written range changed");
    free_mapped(mine, SIZE);
    CHECK_OK(hsaKmtCloseKFD());
    return 0;
}

int main(void) {
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0, "pipes");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    /* Each side closes the ends it does not use, so that either one's death ends the other's
     * read instead of leaving it waiting. */
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        _exit(child(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);

    HSAuint32 gpu = open_and_find_gpu();
    uint32_t *src = alloc_mapped(gpu, MEM_VRAM, SIZE);
    uint32_t *dst = alloc_mapped(gpu, MEM_GTT, SIZE);
    fill(src, 0xa0000000u);
    memset(dst, 0, SIZE);
    uint64_t theirs = 0;
    CHECK(read(up[0], &theirs, sizeof theirs) == sizeof theirs, "parent: the child's VRAM is at %#llx",
          (unsigned long long)theirs);

    HsaMemoryRange local = {dst, SIZE};
    HsaMemoryRange remote = {(void *)(uintptr_t)theirs, SIZE};
    HSAuint64 copied = 0;
    CHECK_OK(hsaKmtProcessVMRead(pid, &local, 1, &remote, 1, &copied));
    CHECK(copied == SIZE, "parent: read %llu bytes of the child's VRAM", (unsigned long long)copied);
    CHECK(differ(dst, 0xc0000000u, 0, SIZE / 4) == 0, "parent: they are the child's");

    /* Half a buffer into a whole one: the source runs out first. */
    HsaMemoryRange half = {src, SIZE / 2};
    CHECK_OK(hsaKmtProcessVMWrite(pid, &half, 1, &remote, 1, &copied));
    CHECK(copied == SIZE / 2, "parent: wrote %llu bytes into the child's VRAM", (unsigned long long)copied);

    /* A remote range running past the child's buffer: refused, nothing copied. */
    HsaMemoryRange past = {(void *)(uintptr_t)(theirs + 4), SIZE};
    HSAKMT_STATUS st = hsaKmtProcessVMRead(pid, &local, 1, &past, 1, &copied);
    CHECK(st == HSAKMT_STATUS_ERROR && copied == 0, "parent: a range past the child's buffer fails (status %d, %llu "
          "bytes)", (int)st, (unsigned long long)copied);

    /* Within this process. */
    memset(dst, 0, SIZE);
    HsaMemoryRange own = {src, SIZE};
    CHECK_OK(hsaKmtProcessVMRead(getpid(), &local, 1, &own, 1, &copied));
    CHECK(copied == SIZE && differ(dst, 0xa0000000u, 0, SIZE / 4) == 0, "parent: a copy within itself");

    CHECK(write(down[1], "g", 1) == 1, "parent: tells the child to look");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks passed (status %#x)", status);
    free_mapped(dst, SIZE);
    free_mapped(src, SIZE);
    CHECK_OK(hsaKmtCloseKFD());
    PASS("cma");
}
