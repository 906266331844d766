// y = a*x + y with a grid-stride loop: far fewer threads than elements. The values are small
// integers and halves, so the product is exact and a fused multiply-add rounds as the host does.
#include "check.h"
#include <vector>

__global__ void saxpy(int n, float a, const float *x, float *y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

int main() {
    const int n = 1 << 20;
    const float a = 2.5f;
    std::vector<float> x(n), y(n), out(n);
    for (int i = 0; i < n; i++) {
        x[i] = float(i % 1024);
        y[i] = float((2 * i) % 512) - 100.0f;
    }
    float *dx, *dy;
    HIP(hipMalloc(&dx, n * sizeof(float)));
    HIP(hipMalloc(&dy, n * sizeof(float)));
    HIP(hipMemcpy(dx, x.data(), n * sizeof(float), hipMemcpyHostToDevice));
    HIP(hipMemcpy(dy, y.data(), n * sizeof(float), hipMemcpyHostToDevice));
    hipLaunchKernelGGL(saxpy, dim3(24), dim3(128), 0, 0, n, a, dx, dy);
    HIP(hipGetLastError());
    HIP(hipMemcpy(out.data(), dy, n * sizeof(float), hipMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        float want = a * x[i] + y[i];
        EXPECT(out[i] == want, "y[%d] = %g, want %g", i, out[i], want);
    }
    HIP(hipFree(dx));
    HIP(hipFree(dy));
    return verdict("saxpy");
}
