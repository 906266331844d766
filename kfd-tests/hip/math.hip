// The device math library in float and double: sqrt, exp, log, sin and pow against the host's
// libm, within the few units in the last place the HIP math functions are documented to be off.
#include "check.h"
#include <cmath>
#include <vector>

struct Res {
    float f[5];
    double d[5];
};

__global__ void maths(const double *x, Res *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = x[i];
    float fv = float(v);
    Res r;
    r.f[0] = sqrtf(fv);
    r.f[1] = expf(fv / 16.0f);
    r.f[2] = logf(fv);
    r.f[3] = sinf(fv);
    r.f[4] = powf(fv, 0.37f);
    r.d[0] = sqrt(v);
    r.d[1] = exp(v / 16.0);
    r.d[2] = log(v);
    r.d[3] = sin(v);
    r.d[4] = pow(v, 0.37);
    out[i] = r;
}


int main() {
    const int n = 4096;
    std::vector<double> x(n);
    for (int i = 0; i < n; i++) x[i] = 0.001 + i * 0.0371;
    double *dx;
    Res *dout;
    HIP(hipMalloc(&dx, n * sizeof(double)));
    HIP(hipMalloc(&dout, n * sizeof(Res)));
    HIP(hipMemcpy(dx, x.data(), n * sizeof(double), hipMemcpyHostToDevice));
    hipLaunchKernelGGL(maths, dim3((n + 255) / 256), dim3(256), 0, 0, dx, dout, n);
    HIP(hipGetLastError());
    std::vector<Res> out(n);
    HIP(hipMemcpy(out.data(), dout, n * sizeof(Res), hipMemcpyDeviceToHost));
    const char *names[5] = {"sqrt", "exp", "log", "sin", "pow"};
    for (int i = 0; i < n; i++) {
        double v = x[i];
        float fv = float(v);
        double wf[5] = {std::sqrt((double)fv), std::exp((double)(fv / 16.0f)), std::log((double)fv),
                        std::sin((double)fv), std::pow((double)fv, (double)0.37f)};
        double wd[5] = {std::sqrt(v), std::exp(v / 16.0), std::log(v), std::sin(v), std::pow(v, 0.37)};
        for (int k = 0; k < 5; k++) {
            // Relative to the result, but sin near its zeros and log near 1 are compared to a
            // floor: the result's ulp is tiny there.
            double fscale = k == 3 ? 1.0 : std::fmax(std::fabs(wf[k]), 1e-3);
            double dscale = k == 3 ? 1.0 : std::fmax(std::fabs(wd[k]), 1e-3);
            EXPECT(std::fabs(out[i].f[k] - wf[k]) <= 4 * 1.2e-7 * fscale, "%sf(%.9g) = %.9g, want %.9g", names[k],
                   fv, out[i].f[k], wf[k]);
            EXPECT(std::fabs(out[i].d[k] - wd[k]) <= 4 * 2.3e-16 * dscale, "%s(%.17g) = %.17g, want %.17g",
                   names[k], v, out[i].d[k], wd[k]);
        }
    }
    HIP(hipFree(dx));
    HIP(hipFree(dout));
    return verdict("math");
}
