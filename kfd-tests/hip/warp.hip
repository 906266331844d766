// Cross-lane operations within a wavefront (64 lanes on gfx90a, 32 on gfx1030): __shfl,
// __shfl_down and __shfl_xor reductions, __ballot, __any and __all. The host takes the
// wavefront size the kernel saw and checks it against the device's properties.
#include "check.h"
#include <vector>

struct Warp {
    int rotated[1024];      // lane i holds the value of lane i+1 (mod the wavefront)
    int sum[1024 / 32];     // per wavefront: the sum of its values (__shfl_down)
    int max[1024 / 32];     // per wavefront: the largest value (__shfl_xor)
    unsigned long long ballot[1024 / 32];
    int any[1024 / 32], all[1024 / 32];
    int warp_size;
};

__device__ int value(int t) { return (t * 37 + 11) % 101 - 20; }

__global__ void lanes(Warp *out, int threshold) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % warpSize, w = t / warpSize;
    int v = value(t);
    out->rotated[t] = __shfl(v, (lane + 1) % warpSize);
    int s = v;
    for (int o = warpSize / 2; o > 0; o /= 2) s += __shfl_down(s, o);
    int m = v;
    for (int o = warpSize / 2; o > 0; o /= 2) m = max(m, __shfl_xor(m, o));
    unsigned long long b = __ballot(v % 3 == 0);
    int any = __any(v > threshold), all = __all(v > -21);
    if (lane == 0) {
        out->sum[w] = s;
        out->ballot[w] = b;
        out->any[w] = any;
        out->all[w] = all;
    }
    if (lane == 5) out->max[w] = m;
    if (t == 0) out->warp_size = warpSize;
}

int main() {
    hipDeviceProp_t props;
    HIP(hipGetDeviceProperties(&props, 0));
    Warp *d;
    HIP(hipMalloc(&d, sizeof(Warp)));
    HIP(hipMemset(d, 0, sizeof(Warp)));
    const int threshold = 75;
    hipLaunchKernelGGL(lanes, dim3(4), dim3(256), 0, 0, d, threshold);
    HIP(hipGetLastError());
    Warp *h = new Warp;
    HIP(hipMemcpy(h, d, sizeof(Warp), hipMemcpyDeviceToHost));
    const int ws = h->warp_size, n = 1024;
    EXPECT(ws == props.warpSize, "the kernel's warpSize %d, the device's %d", ws, props.warpSize);
    if (ws != 32 && ws != 64) {
        fprintf(stderr, "warpSize %d\n", ws);
        return 1;
    }
    auto value = [](int t) { return (t * 37 + 11) % 101 - 20; };
    for (int t = 0; t < n; t++) {
        int base = t - t % ws, want = value(base + (t % ws + 1) % ws);
        EXPECT(h->rotated[t] == want, "rotated[%d] = %d, want %d", t, h->rotated[t], want);
    }
    for (int w = 0; w < n / ws; w++) {
        int sum = 0, mx = -1000, any = 0, all = 1;
        unsigned long long ballot = 0;
        for (int l = 0; l < ws; l++) {
            int v = value(w * ws + l);
            sum += v;
            mx = v > mx ? v : mx;
            ballot |= (unsigned long long)(v % 3 == 0) << l;
            any |= v > threshold;
            all &= v > -21;
        }
        EXPECT(h->sum[w] == sum, "wave %d sum %d, want %d", w, h->sum[w], sum);
        EXPECT(h->max[w] == mx, "wave %d max %d, want %d", w, h->max[w], mx);
        EXPECT(h->ballot[w] == ballot, "wave %d ballot %#llx, want %#llx", w, h->ballot[w], ballot);
        EXPECT(h->any[w] == any, "wave %d any %d, want %d", w, h->any[w], any);
        EXPECT(h->all[w] == all, "wave %d all %d, want %d", w, h->all[w], all);
    }
    delete h;
    HIP(hipFree(d));
    return verdict("warp");
}
