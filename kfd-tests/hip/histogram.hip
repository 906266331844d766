// A 256-bin histogram: each block counts into shared memory with atomicAdd, then adds its bins
// to the global histogram with atomicAdd; atomicMax, atomicMin and an atomicCAS loop on global
// memory track the largest and smallest byte and an XOR of every 16th of them.
#include "check.h"
#include <vector>

__global__ void histogram(const unsigned char *data, int n, unsigned *bins, int *max, int *min, unsigned *xr) {
    __shared__ unsigned local[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        unsigned char v = data[i];
        atomicAdd(&local[v], 1u);
        atomicMax(max, int(v));
        atomicMin(min, int(v));
        if (i % 16 == 0) {
            unsigned old = *xr, seen;
            do {
                seen = old;
                old = atomicCAS(xr, seen, seen ^ (unsigned(v) << (i % 24)));
            } while (old != seen);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (local[i]) atomicAdd(&bins[i], local[i]);
}

int main() {
    const int n = 1 << 20;
    std::vector<unsigned char> data(n);
    unsigned seed = 12345;
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        // Skewed, and never 0 or 255, so max and min are not the bounds by accident.
        data[i] = (unsigned char)(1 + (seed >> 16) % 200 + (i % 7 == 0 ? 50 : 0));
    }
    std::vector<unsigned> want(256, 0), bins(256);
    int want_max = 0, want_min = 255;
    unsigned want_xor = 0;
    for (int i = 0; i < n; i++) {
        want[data[i]]++;
        want_max = data[i] > want_max ? data[i] : want_max;
        want_min = data[i] < want_min ? data[i] : want_min;
        if (i % 16 == 0) want_xor ^= unsigned(data[i]) << (i % 24);
    }
    unsigned char *ddata;
    unsigned *dbins, *dxor;
    int *dmax, *dmin;
    int init_max = -1, init_min = 1000;
    HIP(hipMalloc(&ddata, n));
    HIP(hipMalloc(&dbins, 256 * sizeof(unsigned)));
    HIP(hipMalloc(&dmax, sizeof(int)));
    HIP(hipMalloc(&dmin, sizeof(int)));
    HIP(hipMalloc(&dxor, sizeof(unsigned)));
    HIP(hipMemcpy(ddata, data.data(), n, hipMemcpyHostToDevice));
    HIP(hipMemset(dbins, 0, 256 * sizeof(unsigned)));
    HIP(hipMemset(dxor, 0, sizeof(unsigned)));
    HIP(hipMemcpy(dmax, &init_max, sizeof(int), hipMemcpyHostToDevice));
    HIP(hipMemcpy(dmin, &init_min, sizeof(int), hipMemcpyHostToDevice));
    hipLaunchKernelGGL(histogram, dim3(32), dim3(256), 0, 0, ddata, n, dbins, dmax, dmin, dxor);
    HIP(hipGetLastError());
    int got_max, got_min;
    unsigned got_xor;
    HIP(hipMemcpy(bins.data(), dbins, 256 * sizeof(unsigned), hipMemcpyDeviceToHost));
    HIP(hipMemcpy(&got_max, dmax, sizeof(int), hipMemcpyDeviceToHost));
    HIP(hipMemcpy(&got_min, dmin, sizeof(int), hipMemcpyDeviceToHost));
    HIP(hipMemcpy(&got_xor, dxor, sizeof(unsigned), hipMemcpyDeviceToHost));
    for (int i = 0; i < 256; i++) EXPECT(bins[i] == want[i], "bin %d = %u, want %u", i, bins[i], want[i]);
    EXPECT(got_max == want_max, "max %d, want %d", got_max, want_max);
    EXPECT(got_min == want_min, "min %d, want %d", got_min, want_min);
    EXPECT(got_xor == want_xor, "xor %#x, want %#x", got_xor, want_xor);
    HIP(hipFree(ddata));
    HIP(hipFree(dbins));
    HIP(hipFree(dmax));
    HIP(hipFree(dmin));
    HIP(hipFree(dxor));
    return verdict("histogram");
}
