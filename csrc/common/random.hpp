// Random numbers for every family's Monte Carlo: Philox4x32-10 (philox.hpp) and the conversions of
// its bits into uniforms and normals, written once for the host and the device, so that the DIRECT
// event simulation and the FIRST Monte Carlo turn bits into numbers the same way.
#pragma once

#include <cmath>
#include <cstdint>

#include "hd.hpp"
#include "philox.hpp"

namespace dp::random {

// Uniform in the open interval (0, 1): the top 24 bits with the lowest forced to 1, i.e. odd
// multiples of 2^-24 (exact in float; never 0, so log(u) is finite, never 1).
DP_HD float uniform01(uint32_t bits) {
    // (the value fits an int32: a signed conversion, which vectorises)
    return static_cast<float>(static_cast<int32_t>((bits >> 8) | 1u)) * 5.9604644775390625e-08f;  // 2^-24
}

// Uniform in (0, 1) with 32-bit resolution, in double (component choice).
DP_HD double uniform01_fine(uint32_t bits) {
    return (static_cast<double>(bits) + 0.5) * 2.3283064365386963e-10;  // 2^-32
}

// sin and cos of 2 pi u for u in [0, 1). On the host, libm's sincosf was a quarter of the CPU
// time and does not vectorise, so it is replaced by a quarter-turn reduction and Taylor
// polynomials on [-pi/4, pi/4] (absolute error < 1e-7, float rounding); the GPU has sincospif.
DP_HD void sincos_2pi(float u, float* s, float* c) {
#if defined(__CUDA_ARCH__)
    sincospif(2.0f * u, s, c);
#else
    const int q = static_cast<int>(4.0f * u + 0.5f);  // nearest quarter turn (u >= 0)
    const float a = 6.283185307179586f * (u - 0.25f * static_cast<float>(q));  // |a| <= pi/4
    const float a2 = a * a;
    const float sn =
        a * (1.0f + a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 + a2 * (1.0f / 362880)))));
    const float cs =
        1.0f + a2 * (-0.5f + a2 * (1.0f / 24 + a2 * (-1.0f / 720 + a2 * (1.0f / 40320))));
    // angle = q pi/2 + a. The quadrant is random, so it is applied arithmetically (weights 0 / 1
    // and signs +-1 are exact): a branch on it mispredicted every other decay.
    const float odd = static_cast<float>(q & 1), even = 1.0f - odd;
    *s = (sn * even + cs * odd) * static_cast<float>(1 - (q & 2));        // sin < 0 in quadrants 2, 3
    *c = (cs * even + sn * odd) * static_cast<float>(1 - ((q + 1) & 2));  // cos < 0 in quadrants 1, 2
#endif
}

// Two independent standard normals (Box-Muller). |g| <= sqrt(2 ln 2^24) = 5.77: the tail beyond
// (probability 8e-9) is cut, which no test or image can see.
template <class Rng>
DP_HD void normal_pair(Rng& rng, float* g0, float* g1) {
    const float r = std::sqrt(-2.0f * std::log(uniform01(rng.next_u32())));
    float s, c;
    sincos_2pi(uniform01(rng.next_u32()), &s, &c);
    *g0 = r * c;
    *g1 = r * s;
}

}  // namespace dp::random
