// Managed memory: hipMallocManaged written by the host, changed by a kernel in place, read back by
// the host with no copy. With HSA_XNACK=1 ROCr turns XNACK on and HIP backs managed memory with
// SVM ranges (AMDKFD_IOC_SVM); without, with system memory the GPU maps. With
// KFD_TESTS_PAGEABLE=1 a kernel also works on plain malloc'd memory, which only XNACK's
// map-on-fault lets the GPU reach.
#include "check.h"
#include <cstring>

__global__ void twice_plus(int *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = 2 * a[i] + i;
}

static void run(int *a, int n, const char *what) {
    for (int i = 0; i < n; i++) a[i] = i;
    hipLaunchKernelGGL(twice_plus, dim3((n + 255) / 256), dim3(256), 0, 0, a, n);
    HIP(hipGetLastError());
    HIP(hipDeviceSynchronize());
    for (int i = 0; i < n; i++) EXPECT(a[i] == 3 * i, "%s a[%d] = %d, want %d", what, i, a[i], 3 * i);
    printf("%s: %d ints changed in place by a kernel\n", what, n);
}

int main() {
    int managed = 0, pageable = 0;
    HIP(hipDeviceGetAttribute(&managed, hipDeviceAttributeManagedMemory, 0));
    HIP(hipDeviceGetAttribute(&pageable, hipDeviceAttributePageableMemoryAccess, 0));
    hipDeviceProp_t p;
    HIP(hipGetDeviceProperties(&p, 0));
    printf("%s: managed memory %d, pageable memory access %d\n", p.gcnArchName, managed, pageable);
    EXPECT(managed == 1, "no managed memory");

    const int n = 100000;
    int *a = nullptr;
    HIP(hipMallocManaged(&a, n * sizeof(int)));
    run(a, n, "hipMallocManaged");
    hipPointerAttribute_t attr;
    HIP(hipPointerGetAttributes(&attr, a));
    EXPECT(attr.isManaged == 1, "hipPointerGetAttributes: isManaged %d", attr.isManaged);
    HIP(hipFree(a));

    const char *want = getenv("KFD_TESTS_PAGEABLE");
    if (want && strcmp(want, "1") == 0) {
        EXPECT(pageable == 1, "pageable memory access asked for, the device says %d", pageable);
        if (pageable == 1) {
            int *h = static_cast<int *>(malloc(n * sizeof(int)));
            run(h, n, "malloc");
            free(h);
        }
    }
    return verdict("managed");
}
