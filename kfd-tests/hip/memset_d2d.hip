// hipMemset over 4 MiB (and an unaligned piece of it), hipMemsetD32, and device-to-device
// copies of 4 MiB, which HIP and ROCr run as blit kernels, not SDMA; every byte is checked on
// the host, and the copy once more on the device by a kernel counting differing words.
#include "check.h"
#include <cstring>
#include <vector>

__global__ void count_diff(const unsigned *a, const unsigned *b, size_t words, unsigned *diff) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += blockDim.x * gridDim.x)
        if (a[i] != b[i]) atomicAdd(diff, 1u);
}

int main() {
    const size_t bytes = 4 << 20;
    unsigned char *a, *b;
    HIP(hipMalloc(&a, bytes));
    HIP(hipMalloc(&b, bytes));
    std::vector<unsigned char> h(bytes), want(bytes);

    HIP(hipMemset(a, 0x5A, bytes));
    HIP(hipMemset(a + 12345, 0xC3, 777777));
    HIP(hipMemcpy(h.data(), a, bytes, hipMemcpyDeviceToHost));
    memset(want.data(), 0x5A, bytes);
    memset(want.data() + 12345, 0xC3, 777777);
    for (size_t i = 0; i < bytes; i++) EXPECT(h[i] == want[i], "memset byte %zu = %#x, want %#x", i, h[i], want[i]);

    // A pattern from the host, copied device to device whole and at an odd offset.
    for (size_t i = 0; i < bytes; i++) want[i] = (unsigned char)(i * 131 + (i >> 12));
    HIP(hipMemcpy(a, want.data(), bytes, hipMemcpyHostToDevice));
    HIP(hipMemsetD32((hipDeviceptr_t)b, 0xDEADBEEF, bytes / 4));
    HIP(hipMemcpy(b, a, bytes, hipMemcpyDeviceToDevice));
    HIP(hipMemcpy(h.data(), b, bytes, hipMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++) EXPECT(h[i] == want[i], "D2D byte %zu = %#x, want %#x", i, h[i], want[i]);
    unsigned *diff, ndiff = 1;
    HIP(hipMalloc(&diff, sizeof(unsigned)));
    HIP(hipMemset(diff, 0, sizeof(unsigned)));
    hipLaunchKernelGGL(count_diff, dim3(64), dim3(256), 0, 0, (const unsigned *)a, (const unsigned *)b, bytes / 4, diff);
    HIP(hipGetLastError());
    HIP(hipMemcpy(&ndiff, diff, sizeof(unsigned), hipMemcpyDeviceToHost));
    EXPECT(ndiff == 0, "the device counts %u differing words after the D2D copy", ndiff);
    HIP(hipFree(diff));

    const size_t off = 3, len = bytes - 4096 - 7;
    HIP(hipMemset(b, 0, bytes));
    HIP(hipMemcpy(b + off + 4096, a + off, len, hipMemcpyDeviceToDevice));
    HIP(hipMemcpy(h.data(), b, bytes, hipMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++) {
        unsigned char w = (i >= off + 4096 && i < off + 4096 + len) ? want[i - 4096] : 0;
        EXPECT(h[i] == w, "offset D2D byte %zu = %#x, want %#x", i, h[i], w);
    }
    HIP(hipFree(a));
    HIP(hipFree(b));
    return verdict("memset_d2d");
}
