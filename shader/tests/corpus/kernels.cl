// Kernels for the decoder's differential test (tests/llvm_diff.rs): compiled with Debian's
// clang-15 for gfx90a at -O0, -O2 and -O3 without the device libraries (-nogpulib), so they use
// compiler builtins for work-item ids, barriers and cross-lane operations.

#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define GID (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())

__kernel void vadd(__global float *a, __global const float *b, __global const float *c, int n) {
  int i = GID;
  if (i < n) a[i] = b[i] + c[i];
}

__kernel void saxpy_f64(__global double *y, __global const double *x, double alpha, long n) {
  for (long i = GID; i < n; i += 4096) y[i] = alpha * x[i] + y[i] / (x[i] + 1.0);
}

__kernel void int_ops(__global long *out, __global const long *in, __global const uint *u) {
  int i = GID;
  long a = in[i], b = in[i + 1];
  uint x = u[i], y = u[i + 1] | 1;
  out[i] = a / (b | 1) + a % 7 + (a >> 3) + (a << (b & 63)) + (long)(x / y) + (long)(x % y) +
           (long)__builtin_popcount(x) + (long)__builtin_clz(y) + (long)(x * y) + min(a, b) + max(x, y);
}

__kernel void conv(__global float *f, __global const half *h, __global const char *c,
                   __global const ushort *s, __global int *r) {
  int i = GID;
  float v = vload_half(i, h) + (float)c[i] + (float)s[i];
  f[i] = __builtin_sqrtf(v) + __builtin_fmaf(v, 2.0f, 0.15915494f) + fabs(v) + floor(v) + fmin(v, 1.0f);
  r[i] = (int)v + (int)(v * 0.5f) + (v > 3.0f ? 1 : -16);
  vstore_half(v * 3.0f, i, (__global half *)r);
}

__kernel void reduce(__global float *out, __global const float *in) {
  __local float tmp[256];
  uint l = __builtin_amdgcn_workitem_id_x();
  tmp[l] = in[GID];
  for (uint s = 128; s > 0; s >>= 1) {
    __builtin_amdgcn_s_barrier();
    if (l < s) tmp[l] += tmp[l + s];
  }
  if (l == 0) out[__builtin_amdgcn_workgroup_id_x()] = tmp[0];
}

__kernel void atomics(__global int *hist, __global const uchar *in, __global long *big,
                      __global uint *umx) {
  int i = GID;
  __local int lh[16];
  atomic_add(&hist[in[i] & 15], 1);
  atomic_inc(&lh[in[i] & 15]);
  atomic_max(&umx[0], (uint)i);
  atomic_min(&hist[20], i);
  atomic_cmpxchg(&hist[21], i, i + 1);
  atomic_xchg(&hist[22], i);
  atom_add(big, (long)i);
  __builtin_amdgcn_s_barrier();
  hist[32 + (i & 15)] = lh[i & 15];
}

__kernel void lanes(__global int *out, __global const int *in) {
  int i = GID;
  int v = in[i];
  int a = __builtin_amdgcn_ds_bpermute((i ^ 1) << 2, v);
  int b = __builtin_amdgcn_readfirstlane(v);
  int c = __builtin_amdgcn_mov_dpp(v, 0x111, 0xf, 0xf, false);
  int d = __builtin_amdgcn_update_dpp(0, v, 0x1b, 0xf, 0xf, true);
  int e = __builtin_amdgcn_readlane(v, 5);
  int f = __builtin_amdgcn_ds_swizzle(v, 0x041f);
  out[i] = a + b + c + d + e + f;
}

__kernel void halves(__global half *out, __global const half *in, __global short2 *s) {
  int i = GID;
  half a = in[i], b = in[i + 1];
  out[i] = a * b + a / b - (half)1.0;
  s[i] = s[i] * s[i + 1] + (short2)(3, -2);
  ((__global uchar *)out)[i * 3] = (uchar)(s[i].x >> 1);
}
