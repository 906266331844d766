// What every program of the HIP corpus shares: HIP calls that must succeed, result checks that
// count mismatches (the first few are printed), and the verdict line the tests look for.
#pragma once
#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstdlib>

#define HIP(call)                                                                                  \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        if (e_ != hipSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, hipGetErrorString(e_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static int mismatches = 0;

// Counts a mismatch when `cond` is false; prints the first ten.
#define EXPECT(cond, ...)                                  \
    do {                                                   \
        if (!(cond) && mismatches++ < 10) {                \
            fprintf(stderr, "mismatch: " __VA_ARGS__);     \
            fputc('\n', stderr);                           \
        }                                                  \
    } while (0)

// Prints `PASS <name>` and returns 0, or the number of mismatches and 1.
static inline int verdict(const char *name) {
    if (mismatches) {
        fprintf(stderr, "FAIL %s: %d mismatches\n", name, mismatches);
        return 1;
    }
    printf("PASS %s\n", name);
    return 0;
}
