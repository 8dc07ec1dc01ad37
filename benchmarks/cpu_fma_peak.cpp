// One core's fp32 multiply-add peak with 8-lane vectors (AVX2 + FMA: the width of the FIRST fast CPU
// blocks), for the fraction of peak that benchmarks/first_dualhead_cpu.py prints (--measure-peak
// compiles and runs this with the system's C++ compiler, -O2 -march=native).
// Twelve independent accumulator chains cover the FMA latency (4-5 cycles at up to 2 FMAs per cycle);
// the result feeds a printed checksum so the loop is not removed.
#include <chrono>
#include <cstdio>

typedef float Vec8 __attribute__((vector_size(32)));

int main() {
    constexpr int kChains = 12;
    constexpr long kSteps = 400000000;
    Vec8 acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = Vec8{} + 1.0f + i * 1e-3f;
    const Vec8 scale = Vec8{} + 0.9999999f, shift = Vec8{} + 1e-7f;
    const auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < kSteps; ++k) {
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * scale + shift;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    float checksum = 0.0f;
    for (int i = 0; i < kChains; ++i)
        for (int l = 0; l < 8; ++l) checksum += acc[i][l];
    std::printf("%.3f GFLOP/s (checksum %g)\n", kSteps * kChains * 8.0 * 2.0 / s / 1e9, checksum);
    return 0;
}
