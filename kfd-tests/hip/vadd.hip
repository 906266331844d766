// Element-wise vector add over a grid whose last block is partial.
#include "check.h"
#include <vector>

__global__ void vadd(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main() {
    const int n = 100003;
    std::vector<float> a(n), b(n), c(n, -1.0f);
    for (int i = 0; i < n; i++) {
        a[i] = 0.5f * i;
        b[i] = 1000.0f - 0.25f * i;
    }
    float *da, *db, *dc;
    HIP(hipMalloc(&da, n * sizeof(float)));
    HIP(hipMalloc(&db, n * sizeof(float)));
    HIP(hipMalloc(&dc, n * sizeof(float)));
    HIP(hipMemcpy(da, a.data(), n * sizeof(float), hipMemcpyHostToDevice));
    HIP(hipMemcpy(db, b.data(), n * sizeof(float), hipMemcpyHostToDevice));
    const int block = 256;
    hipLaunchKernelGGL(vadd, dim3((n + block - 1) / block), dim3(block), 0, 0, da, db, dc, n);
    HIP(hipGetLastError());
    HIP(hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(c[i] == a[i] + b[i], "c[%d] = %g, want %g", i, c[i], a[i] + b[i]);
    HIP(hipFree(da));
    HIP(hipFree(db));
    HIP(hipFree(dc));
    return verdict("vadd");
}
