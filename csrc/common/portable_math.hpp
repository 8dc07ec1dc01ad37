// Float math that gives the same bits on the host and on the device: log, sin / cos and Gaussian
// pairs built from IEEE-754 basic operations only (+, -, *, /, sqrt, floor: correctly rounded on the
// CPU and, without --use_fast_math, on the GPU), so that a Monte Carlo built on it simulates the very
// same events on both backends.
//
// Requirement: every translation unit that uses these functions must be compiled WITHOUT
// floating-point contraction (gcc/clang -ffp-contract=off, nvcc --fmad=false): a fused multiply-add
// rounds once instead of twice, and the compilers fuse different pairs. CMakeLists.txt sets the
// flags for the files that include this header (the dual-head Monte Carlo). The functions live in
// an unnamed namespace (internal linkage), so that a copy compiled elsewhere with other flags can
// never be merged with these at link time.
//
// Accuracy: log_portable within 2 ulp of the true value on (0, 1]; sincos_turns within 1e-7
// absolute; both far below any physical scale of the simulations (their job is reproducibility).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "hd.hpp"
#include "random.hpp"

namespace dp::portable {
namespace {

DP_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
#endif
}

DP_HD float bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(b);
#else
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
#endif
}

// Natural log of a positive, normal, finite float (the Monte Carlos call it on uniforms in
// [2^-24, 1)). x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1),
// |s| <= 0.172, by its series to s^11 (truncation 2e-10); e ln 2 in two parts (Cody-Waite).
DP_HD float log_portable(float x) {
    const uint32_t b = float_bits(x);
    int e = static_cast<int>((b >> 23) & 0xffu) - 127;
    float m = bits_float((b & 0x007fffffu) | 0x3f800000u);  // [1, 2)
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e += 1;
    }
    const float s = (m - 1.0f) / (m + 1.0f);
    const float s2 = s * s;
    const float series =
        1.0f + s2 * (1.0f / 3.0f + s2 * (1.0f / 5.0f + s2 * (1.0f / 7.0f + s2 * (1.0f / 9.0f + s2 * (1.0f / 11.0f)))));
    const float log_m = 2.0f * s * series;
    const float fe = static_cast<float>(e);
    // ln 2 = 0.693145751953125 (16 bits, so fe * hi is exact) + 1.4286068203094172e-06
    return fe * 0.693145751953125f + (fe * 1.4286068203094172e-06f + log_m);
}

// sin and cos of 2 pi f for any finite f (turns): nearest quarter turn q, a = 2 pi (f - q / 4) in
// [-pi/4, pi/4], Taylor polynomials to a^9 / a^8 (error < 1e-7), the quadrant applied exactly.
DP_HD void sincos_turns(float f, float* s, float* c) {
    const float qf = std::floor(4.0f * f + 0.5f);
    const float a = 6.283185307179586f * (f - 0.25f * qf);
    const float a2 = a * a;
    const float sn = a * (1.0f + a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 + a2 * (1.0f / 362880)))));
    const float cs = 1.0f + a2 * (-0.5f + a2 * (1.0f / 24 + a2 * (-1.0f / 720 + a2 * (1.0f / 40320))));
    // quadrant q mod 4 (qf may be negative); exact for |f| < 2^21
    const int q = static_cast<int>(qf) & 3;
    switch (q) {
        case 0: *s = sn; *c = cs; break;
        case 1: *s = cs; *c = -sn; break;
        case 2: *s = -sn; *c = -cs; break;
        default: *s = -cs; *c = sn; break;
    }
}

// Two independent standard normals (Box-Muller) from two 24-bit uniforms, as random.hpp's
// normal_pair (|g| <= 5.77: the tail beyond, probability 8e-9, is cut) but portable.
template <class Rng>
DP_HD void normal_pair(Rng& rng, float* g0, float* g1) {
    const float r = std::sqrt(-2.0f * log_portable(dp::random::uniform01(rng.next_u32())));
    float s, c;
    sincos_turns(dp::random::uniform01(rng.next_u32()), &s, &c);
    *g0 = r * c;
    *g1 = r * s;
}

// The Math policy of common/emission.hpp with these functions.
struct PortableMath {
    template <class Rng>
    static DP_HD void normal_pair(Rng& rng, float* g0, float* g1) {
        dp::portable::normal_pair(rng, g0, g1);
    }
    // sin and cos of an angle a (radians): a / (2 pi) turns
    static DP_HD void sincos(float a, float* s, float* c) { sincos_turns(a * 0.15915494309189535f, s, c); }
};

}  // namespace
}  // namespace dp::portable
