// C = A * B with 16x16 tiles staged in shared memory and __syncthreads between the phases;
// the sizes are not multiples of the tile. Small integer entries keep every sum exact.
#include "check.h"
#include <vector>

#define TILE 16

__global__ void matmul(const float *a, const float *b, float *c, int m, int n, int k) {
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += TILE) {
        ta[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; i++) acc += ta[threadIdx.y][i] * tb[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

int main() {
    const int m = 75, n = 90, k = 110;
    std::vector<float> a(m * k), b(k * n), c(m * n, -1.0f);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < k; j++) a[i * k + j] = float((i + j) % 7 - 3);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < n; j++) b[i * n + j] = float((2 * i + j) % 5 - 2);
    float *da, *db, *dc;
    HIP(hipMalloc(&da, a.size() * sizeof(float)));
    HIP(hipMalloc(&db, b.size() * sizeof(float)));
    HIP(hipMalloc(&dc, c.size() * sizeof(float)));
    HIP(hipMemcpy(da, a.data(), a.size() * sizeof(float), hipMemcpyHostToDevice));
    HIP(hipMemcpy(db, b.data(), b.size() * sizeof(float), hipMemcpyHostToDevice));
    hipLaunchKernelGGL(matmul, dim3((n + TILE - 1) / TILE, (m + TILE - 1) / TILE), dim3(TILE, TILE), 0, 0, da, db,
                       dc, m, n, k);
    HIP(hipGetLastError());
    HIP(hipMemcpy(c.data(), dc, c.size() * sizeof(float), hipMemcpyDeviceToHost));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float want = 0.0f;
            for (int t = 0; t < k; t++) want += a[i * k + t] * b[t * n + j];
            EXPECT(c[i * n + j] == want, "c[%d][%d] = %g, want %g", i, j, c[i * n + j], want);
        }
    HIP(hipFree(da));
    HIP(hipFree(db));
    HIP(hipFree(dc));
    return verdict("matmul");
}
