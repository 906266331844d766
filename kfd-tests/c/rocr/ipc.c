/* ROCr IPC between two processes: hsa_amd_ipc_memory_create / attach / detach. The parent
 * allocates 64 KiB of VRAM, fills it, and hands its IPC handle to a child through a pipe; the
 * child is refused a forged handle, attaches the real one, reads every byte back, writes its own
 * pattern over the second half and detaches; the parent then sees the child's bytes there and
 * its own in the first half. On a cuse-kfd node both processes reach one device; on the embedded
 * device (one per process) the child's device finds the handle in the parent's backing store. */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

#define SIZE (64 * 1024)
#define HALF (SIZE / 2)

static uint8_t parent_byte(size_t i) { return (uint8_t)((i * 2654435761u) >> 13 ^ 0xa5); }
static uint8_t child_byte(size_t i) { return (uint8_t)(i * 7 + 3); }

/* The first byte of buf[from..to) that is not want(i), or -1. */
static long first_wrong(const uint8_t *buf, size_t from, size_t to, uint8_t (*want)(size_t)) {
    for (size_t i = from; i < to; i++)
        if (buf[i] != want(i))
            return (long)i;
    return -1;
}

static hsa_agent_t cpu;

static void pools(hsa_agent_t gpu, hsa_amd_memory_pool_t *vram, hsa_amd_memory_pool_t *system) {
    CHECK(hsa_iterate_agents(find_cpu_cb, &cpu) == HSA_STATUS_INFO_BREAK, "no CPU agent");
    CHECK(hsa_amd_agent_iterate_memory_pools(gpu, coarse_pool_cb, vram) == HSA_STATUS_INFO_BREAK, "no VRAM pool");
    CHECK(hsa_amd_agent_iterate_memory_pools(cpu, fine_pool_cb, system) == HSA_STATUS_INFO_BREAK,
          "no fine-grained system pool");
}

/* A host buffer of the fine-grained system pool that the GPU's copies may reach. */
static uint8_t *host_buffer(hsa_agent_t gpu, hsa_amd_memory_pool_t system) {
    uint8_t *host = NULL;
    HSA(hsa_amd_memory_pool_allocate(system, SIZE, 0, (void **)&host));
    hsa_agent_t both[2] = {gpu, cpu};
    HSA(hsa_amd_agents_allow_access(2, both, NULL, host));
    return host;
}

static int child(int from_parent, int to_parent) {
    hsa_amd_ipc_memory_t handle;
    CHECK(read(from_parent, &handle, sizeof handle) == (ssize_t)sizeof handle, "child: no handle from the parent");
    hsa_agent_t gpu = init_gpu();
    hsa_amd_memory_pool_t vram, system;
    pools(gpu, &vram, &system);

    /* A process reaches another's memory only through the handle it was given. */
    hsa_amd_ipc_memory_t forged = handle;
    forged.handle[0] ^= 0x5a5a5a5a;
    forged.handle[3] ^= 0x1;
    void *bad = NULL;
    hsa_status_t s = hsa_amd_ipc_memory_attach(&forged, SIZE, 1, &gpu, &bad);
    CHECK(s != HSA_STATUS_SUCCESS, "child: a forged IPC handle attached (at %p)", bad);
    OK("child: a forged handle is refused (%s)", status_name(s));

    void *shared = NULL;
    HSA(hsa_amd_ipc_memory_attach(&handle, SIZE, 1, &gpu, &shared));
    uint8_t *host = host_buffer(gpu, system);
    HSA(hsa_memory_copy(host, shared, SIZE));
    long at = first_wrong(host, 0, SIZE, parent_byte);
    CHECK(at < 0, "child: byte %ld of the shared VRAM is %#x, the parent wrote %#x", at, host[at], parent_byte(at));
    OK("child: attached the parent's %d bytes of VRAM and read every byte", SIZE);
    for (size_t i = HALF; i < SIZE; i++)
        host[i] = child_byte(i);
    HSA(hsa_memory_copy((uint8_t *)shared + HALF, host + HALF, HALF));
    HSA(hsa_amd_ipc_memory_detach(shared));
    HSA(hsa_amd_memory_pool_free(host));
    OK("child: wrote the second half and detached");
    CHECK(write(to_parent, "P", 1) == 1, "child: telling the parent");
    HSA(hsa_shut_down());
    return 0;
}

int main(void) {
    int to_child[2], to_parent[2];
    CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipe");
    fflush(stdout);
    /* Before hsa_init: each process starts its own runtime. */
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        exit(child(to_child[0], to_parent[1]));
    }
    close(to_child[0]);
    close(to_parent[1]);

    hsa_agent_t gpu = init_gpu();
    hsa_amd_memory_pool_t vram, system;
    pools(gpu, &vram, &system);
    void *buf = NULL;
    HSA(hsa_amd_memory_pool_allocate(vram, SIZE, 0, &buf));
    uint8_t *host = host_buffer(gpu, system);
    for (size_t i = 0; i < SIZE; i++)
        host[i] = parent_byte(i);
    HSA(hsa_memory_copy(buf, host, SIZE));
    hsa_amd_ipc_memory_t handle;
    HSA(hsa_amd_ipc_memory_create(buf, SIZE, &handle));
    OK("parent: %d bytes of VRAM filled and shared", SIZE);
    CHECK(write(to_child[1], &handle, sizeof handle) == (ssize_t)sizeof handle, "parent: sending the handle");

    char done = 0;
    ssize_t n = read(to_parent[0], &done, 1);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(n == 1 && done == 'P' && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "parent: the child failed (exit status %#x)", status);

    memset(host, 0, SIZE);
    HSA(hsa_memory_copy(host, buf, SIZE));
    long at = first_wrong(host, 0, HALF, parent_byte);
    CHECK(at < 0, "parent: its own byte %ld is %#x, not %#x", at, host[at], parent_byte(at));
    at = first_wrong(host, HALF, SIZE, child_byte);
    CHECK(at < 0, "parent: the child's byte %ld is %#x, not %#x", at, host[at], child_byte(at));
    OK("parent: the first half is its own, the second the child's");
    HSA(hsa_amd_memory_pool_free(host));
    HSA(hsa_amd_memory_pool_free(buf));
    HSA(hsa_shut_down());
    printf("PASS ipc\n");
    return 0;
}
