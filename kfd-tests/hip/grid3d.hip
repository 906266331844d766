// 2D and 3D grids of 2D and 3D blocks: every work-item records its block and thread ids and the
// grid and block sizes it sees; partial blocks at the edges are masked by bounds checks.
#include "check.h"
#include <vector>

struct Ids {
    unsigned block[3], thread[3], block_dim[3], grid_dim[3];
};

__global__ void ids2d(Ids *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    Ids r = {{blockIdx.x, blockIdx.y, blockIdx.z}, {threadIdx.x, threadIdx.y, threadIdx.z},
             {blockDim.x, blockDim.y, blockDim.z}, {gridDim.x, gridDim.y, gridDim.z}};
    out[y * w + x] = r;
}

__global__ void ids3d(Ids *out, int w, int h, int d) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= w || y >= h || z >= d) return;
    Ids r = {{blockIdx.x, blockIdx.y, blockIdx.z}, {threadIdx.x, threadIdx.y, threadIdx.z},
             {blockDim.x, blockDim.y, blockDim.z}, {gridDim.x, gridDim.y, gridDim.z}};
    out[(z * h + y) * w + x] = r;
}

static void check(const std::vector<Ids> &got, int w, int h, int d, dim3 b, dim3 g, const char *what) {
    for (int z = 0; z < d; z++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const Ids &r = got[(z * h + y) * w + x];
                unsigned want[12] = {x / b.x, y / b.y, z / b.z, x % b.x, y % b.y, z % b.z, b.x, b.y, b.z, g.x, g.y, g.z};
                const unsigned *have = &r.block[0];
                for (int k = 0; k < 12; k++)
                    EXPECT(have[k] == want[k], "%s (%d,%d,%d) field %d: %u, want %u", what, x, y, z, k, have[k], want[k]);
            }
}

int main() {
    Ids *dout;
    {
        const int w = 100, h = 37;
        dim3 b(16, 8), g((w + 15) / 16, (h + 7) / 8);
        std::vector<Ids> out(w * h);
        HIP(hipMalloc(&dout, out.size() * sizeof(Ids)));
        HIP(hipMemset(dout, 0xFF, out.size() * sizeof(Ids)));
        hipLaunchKernelGGL(ids2d, g, b, 0, 0, dout, w, h);
        HIP(hipGetLastError());
        HIP(hipMemcpy(out.data(), dout, out.size() * sizeof(Ids), hipMemcpyDeviceToHost));
        check(out, w, h, 1, b, g, "2D");
        HIP(hipFree(dout));
    }
    {
        const int w = 13, h = 9, d = 11;
        dim3 b(4, 4, 4), g((w + 3) / 4, (h + 3) / 4, (d + 3) / 4);
        std::vector<Ids> out(w * h * d);
        HIP(hipMalloc(&dout, out.size() * sizeof(Ids)));
        HIP(hipMemset(dout, 0xFF, out.size() * sizeof(Ids)));
        hipLaunchKernelGGL(ids3d, g, b, 0, 0, dout, w, h, d);
        HIP(hipGetLastError());
        HIP(hipMemcpy(out.data(), dout, out.size() * sizeof(Ids), hipMemcpyDeviceToHost));
        check(out, w, h, d, b, g, "3D");
        HIP(hipFree(dout));
    }
    return verdict("grid3d");
}
