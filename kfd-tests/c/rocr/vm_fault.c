/* A GPU VM fault must end the program through ROCr's VM fault handler, never hang it: a copy
 * from host memory into a GPU address nothing maps faults on the engine that runs it (the SDMA
 * engine by default, ROCr's blit kernel on the shader core with HSA_ENABLE_SDMA=0). The device
 * reports the fault as a MEMORY event with the address and reason (amdkfd v6.1 kfd_events.c,
 * kfd_signal_vm_fault_event); ROCr's async events thread sees it (ROCR-Runtime rocm-5.2.3
 * runtime.cpp, VMFaultHandler), prints "Memory access fault by GPU node-N ... on address ...
 * Reason: ..." and aborts. The program prints what it did and then waits: if it is still alive
 * after 60 s, nothing reported the fault, and it fails. */
#include "common.h"
#include <unistd.h>

#define SIZE (64u << 10)

int main(void) {
    hsa_agent_t gpu = init_gpu(), cpu = {0};
    CHECK(hsa_iterate_agents(find_cpu_cb, &cpu) == HSA_STATUS_INFO_BREAK, "no CPU agent");
    hsa_amd_memory_pool_t system = {0};
    CHECK(hsa_amd_agent_iterate_memory_pools(cpu, fine_pool_cb, &system) == HSA_STATUS_INFO_BREAK,
          "no fine-grained system pool");
    void *src = NULL;
    HSA(hsa_amd_memory_pool_allocate(system, SIZE, 0, &src));
    hsa_agent_t both[2] = {gpu, cpu};
    HSA(hsa_amd_agents_allow_access(2, both, NULL, src));
    memset(src, 0x5a, SIZE);
    /* Far below anything libhsakmt reserves for GPU memory, and page aligned plus a little. */
    void *bad = (void *)(uintptr_t)0x100010;
    const char *sdma = getenv("HSA_ENABLE_SDMA");
    hsa_signal_t done;
    HSA(hsa_signal_create(1, 0, NULL, &done));
    printf("copying %u bytes from %p to unmapped GPU address %p (%s)\n", SIZE, src, bad,
           sdma && strcmp(sdma, "0") == 0 ? "blit kernel" : "SDMA");
    fflush(stdout);
    HSA(hsa_amd_memory_async_copy(bad, gpu, src, cpu, SIZE, 0, NULL, done));
    hsa_signal_value_t v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, tick_hz() * 60,
                                                     HSA_WAIT_STATE_BLOCKED);
    FAIL("still running 60 s after the faulting copy (its signal is %ld): nothing reported the VM fault", (long)v);
}
