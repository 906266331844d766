// Two streams with asynchronous copies from pinned host memory, kernels, events recorded on
// one stream and waited for on the other, and event timing: stream B scales what stream A
// produced, only after A's event.
#include "check.h"
#include <vector>

__global__ void fill(int *p, int n, int base) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = base + i;
}

__global__ void scale_add(const int *src, int *dst, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i] * k;
}

int main() {
    const int n = 1 << 18;
    const size_t bytes = n * sizeof(int);
    int *host_in, *host_out;
    HIP(hipHostMalloc(&host_in, bytes, hipHostMallocDefault));
    HIP(hipHostMalloc(&host_out, bytes, hipHostMallocDefault));
    for (int i = 0; i < n; i++) host_in[i] = 3 * i - 7;
    int *a, *b;
    HIP(hipMalloc(&a, bytes));
    HIP(hipMalloc(&b, bytes));
    hipStream_t sa, sb;
    hipEvent_t start, produced, done;
    HIP(hipStreamCreate(&sa));
    HIP(hipStreamCreateWithFlags(&sb, hipStreamNonBlocking));
    HIP(hipEventCreate(&start));
    HIP(hipEventCreate(&produced));
    HIP(hipEventCreate(&done));
    HIP(hipEventRecord(start, sa));
    // Stream B: its input arrives by an asynchronous copy.
    HIP(hipMemcpyAsync(b, host_in, bytes, hipMemcpyHostToDevice, sb));
    // Stream A: produces `a`, then records the event.
    hipLaunchKernelGGL(fill, dim3(n / 256), dim3(256), 0, sa, a, n, 1000);
    HIP(hipEventRecord(produced, sa));
    HIP(hipStreamWaitEvent(sb, produced, 0));
    hipLaunchKernelGGL(scale_add, dim3(n / 256), dim3(256), 0, sb, a, b, n, 2);
    HIP(hipMemcpyAsync(host_out, b, bytes, hipMemcpyDeviceToHost, sb));
    HIP(hipEventRecord(done, sb));
    HIP(hipEventSynchronize(done));
    EXPECT(hipEventQuery(done) == hipSuccess, "the event is not complete after hipEventSynchronize");
    float ms = -1.0f;
    HIP(hipEventElapsedTime(&ms, start, produced));
    EXPECT(ms >= 0.0f, "elapsed time %g ms", ms);
    for (int i = 0; i < n; i++) {
        int want = host_in[i] + 2 * (1000 + i);
        EXPECT(host_out[i] == want, "out[%d] = %d, want %d", i, host_out[i], want);
    }
    HIP(hipStreamSynchronize(sa));
    HIP(hipStreamDestroy(sa));
    HIP(hipStreamDestroy(sb));
    HIP(hipEventDestroy(start));
    HIP(hipEventDestroy(produced));
    HIP(hipEventDestroy(done));
    HIP(hipFree(a));
    HIP(hipFree(b));
    HIP(hipHostFree(host_in));
    HIP(hipHostFree(host_out));
    return verdict("streams");
}
