// Device printf (HIP's hostcall buffer, serviced by a host thread): a few work-items print a
// line with integers, a string and a double; every work-item also writes its result, which the
// host checks. The test that runs it checks the printed lines.
#include "check.h"
#include <vector>

__global__ void talk(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = i * i - 3;
    if (i % 100 == 7) printf("work-item %d of block %d: %s %d %.3f\n", i, (int)blockIdx.x, "square-3", out[i], i * 0.5);
}

int main() {
    const int n = 1000;
    int *d;
    HIP(hipMalloc(&d, n * sizeof(int)));
    hipLaunchKernelGGL(talk, dim3((n + 127) / 128), dim3(128), 0, 0, d, n);
    HIP(hipGetLastError());
    HIP(hipDeviceSynchronize());
    std::vector<int> h(n);
    HIP(hipMemcpy(h.data(), d, n * sizeof(int), hipMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h[i] == i * i - 3, "out[%d] = %d, want %d", i, h[i], i * i - 3);
    HIP(hipFree(d));
    fflush(stdout);
    return verdict("printf");
}
