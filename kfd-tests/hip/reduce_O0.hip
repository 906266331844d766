// build: -O0
// Built without optimisation: calls to non-inlined device functions, a private array indexed
// at run time (scratch memory), and a block reduction in shared memory with __syncthreads.
#include "check.h"
#include <vector>

__device__ __attribute__((noinline)) int weight(int x, const int *table) { return table[x & 7] * x; }

__device__ __attribute__((noinline)) int blend(int a, int b) { return a * 3 - b; }

__global__ void reduce(const int *in, int *out, int n) {
    __shared__ int partial[256];
    int table[8];
    for (int k = 0; k < 8; k++) table[k] = k * k - 4;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? blend(weight(in[i], table), in[i]) : 0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

int main() {
    const int n = 50000, block = 256, blocks = (n + block - 1) / block;
    std::vector<int> in(n), out(blocks);
    for (int i = 0; i < n; i++) in[i] = (i * 7919) % 1000 - 500;
    int *din, *dout;
    HIP(hipMalloc(&din, n * sizeof(int)));
    HIP(hipMalloc(&dout, blocks * sizeof(int)));
    HIP(hipMemcpy(din, in.data(), n * sizeof(int), hipMemcpyHostToDevice));
    hipLaunchKernelGGL(reduce, dim3(blocks), dim3(block), 0, 0, din, dout, n);
    HIP(hipGetLastError());
    HIP(hipMemcpy(out.data(), dout, blocks * sizeof(int), hipMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) {
        int want = 0;
        for (int i = b * block; i < (b + 1) * block && i < n; i++) {
            int x = in[i], t = ((x & 7) * (x & 7) - 4) * x;
            want += t * 3 - x;
        }
        EXPECT(out[b] == want, "block %d sum %d, want %d", b, out[b], want);
    }
    HIP(hipFree(din));
    HIP(hipFree(dout));
    return verdict("reduce_O0");
}
