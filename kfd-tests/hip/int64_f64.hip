// 64-bit integer and double arithmetic: signed and unsigned division and remainder (negative
// operands, divisors of every size), multiplication with wrap-around, shifts, and double
// division, which HIP rounds correctly (IEEE), so the host's results are exact references.
#include "check.h"
#include <vector>
#include <cstdint>

struct Out {
    long long sq, sr;
    unsigned long long uq, ur, mul, shifted;
    double dq, dsum;
};

__host__ __device__ long long operand_a(int i) {
    unsigned long long x = (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ull;
    return (long long)(x ^ (x >> 29));
}

__host__ __device__ long long operand_b(int i) {
    long long b = operand_a(i * 7 + 3) >> (i % 63);
    if (b == 0) b = 3;
    if (b == -1) b = -5;  // INT64_MIN / -1 is undefined
    return b;
}

__host__ __device__ Out compute(int i) {
    long long a = operand_a(i), b = operand_b(i);
    unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
    Out o;
    o.sq = a / b;
    o.sr = a % b;
    o.uq = ua / ub;
    o.ur = ua % ub;
    o.mul = ua * ub + 0x1234567;
    o.shifted = (ua >> (i % 64)) | (ub << ((i * 5) % 64));
    o.dq = double(a) / double(b);
    o.dsum = double(a) * 0.5 + double(i);
    return o;
}

__global__ void arith(Out *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = compute(i);
}

int main() {
    const int n = 20000;
    Out *d;
    HIP(hipMalloc(&d, n * sizeof(Out)));
    hipLaunchKernelGGL(arith, dim3((n + 127) / 128), dim3(128), 0, 0, d, n);
    HIP(hipGetLastError());
    std::vector<Out> h(n);
    HIP(hipMemcpy(h.data(), d, n * sizeof(Out), hipMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        Out w = compute(i), g = h[i];
        EXPECT(g.sq == w.sq && g.sr == w.sr, "%d: signed %lld / %lld = %lld r %lld, want %lld r %lld", i, operand_a(i),
               operand_b(i), g.sq, g.sr, w.sq, w.sr);
        EXPECT(g.uq == w.uq && g.ur == w.ur, "%d: unsigned quotient %llu r %llu, want %llu r %llu", i, g.uq, g.ur, w.uq,
               w.ur);
        EXPECT(g.mul == w.mul, "%d: product %#llx, want %#llx", i, g.mul, w.mul);
        EXPECT(g.shifted == w.shifted, "%d: shifts %#llx, want %#llx", i, g.shifted, w.shifted);
        EXPECT(g.dq == w.dq, "%d: double quotient %.17g, want %.17g", i, g.dq, w.dq);
        EXPECT(g.dsum == w.dsum, "%d: double sum %.17g, want %.17g", i, g.dsum, w.dsum);
    }
    HIP(hipFree(d));
    return verdict("int64_f64");
}
