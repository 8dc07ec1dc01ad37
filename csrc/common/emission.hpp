// Emission physics shared by the event Monte Carlos of the FIRST and dual-head families, written once
// for the host and the device: a decay's random stream, its annihilation point (a voxel drawn from
// the activity's alias table, a uniform point inside it, an isotropic Gaussian positron range), the
// direction of the first photon inside a band of directions, and the second photon's deviation from
// back-to-back (acollinearity). Per-family detector tracking and binning stay in the families.
//
// The functions that need transcendental math (normals, sin / cos) take a Math policy:
//  * LibmMath: the standard library's float functions (and random.hpp's normal_pair, sincospif on the
//    device). The FIRST Monte Carlo uses it; CPU and GPU may differ in the last ulp.
//  * dp::portable::PortableMath (portable_math.hpp): the same numbers on the host and the device, bit
//    for bit, when the translation unit is compiled without floating-point contraction. The dual-head
//    Monte Carlo uses it, so that its CPU and GPU histograms are identical.
// Templates on the policy (and on the stream, whose domain differs per family) keep each family's
// instantiations apart, even though the translation units are compiled with different flags.
#pragma once

#include <cmath>
#include <cstdint>

#include "hd.hpp"
#include "philox.hpp"
#include "random.hpp"

namespace dp::emission {

using dp::random::uniform01;

// The random bits of one decay: Philox4x32-10 with counter (decay low, decay high, block, Domain) and
// key (seed low, seed high), drawn four words at a time. A decay's draws depend only on (seed, decay
// number, Domain), whatever thread, chunk or backend runs it. Domain keeps the families' streams apart.
template <uint32_t Domain>
class DecayStream {
public:
    DP_HD DecayStream(uint64_t decay, uint32_t key0, uint32_t key1)
        : lo_(static_cast<uint32_t>(decay)), hi_(static_cast<uint32_t>(decay >> 32)), k0_(key0), k1_(key1) {}

    DP_HD uint32_t next_u32() {
        if (left_ == 0) {
            const dp::random::Philox4 b = dp::random::philox4x32_10(lo_, hi_, block_++, Domain, k0_, k1_);
            w0_ = b.x;
            w1_ = b.y;
            w2_ = b.z;
            w3_ = b.w;
            left_ = 4;
        }
        // a shift rather than an indexed array: stays in registers on the GPU
        const uint32_t r = w0_;
        w0_ = w1_;
        w1_ = w2_;
        w2_ = w3_;
        --left_;
        return r;
    }

private:
    uint32_t lo_, hi_, k0_, k1_;
    uint32_t block_ = 0;
    uint32_t w0_ = 0, w1_ = 0, w2_ = 0, w3_ = 0;
    int left_ = 0;
};

// floor(bits64 * n / 2^64): an index in [0, n) from 64 random bits (bias n / 2^64).
DP_HD uint64_t scale_to_range(uint64_t bits, uint64_t n) {
#if defined(__CUDA_ARCH__)
    return __umul64hi(bits, n);
#else
    return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
#endif
}

// The activity's lattice, C order (iz, iy, ix) with ix fastest, voxel centres (i - (n - 1) / 2) * v,
// and its Walker alias table (host or device pointers; alias_table.hpp builds it).
struct SourceLattice {
    int nz, ny, nx;
    float vz, vy, vx;
    uint64_t n_voxels;
    const float* alias_accept;    // [n_voxels] probability of keeping the drawn voxel
    const uint32_t* alias_other;  // [n_voxels] the voxel taken otherwise
};

// An annihilation point (mm) distributed as the activity: a voxel from the alias table, then a
// uniform point inside it. Six draws. (Contraction-safe: the only product feeding a sum,
// 0.5 * n, is exact.)
template <class Rng>
DP_HD void sample_source(const SourceLattice& S, Rng& rng, float* x, float* y, float* z) {
    const uint64_t hi = rng.next_u32();
    const uint64_t bits = (hi << 32) | rng.next_u32();
    uint64_t v = scale_to_range(bits, S.n_voxels);
    if (!(uniform01(rng.next_u32()) < S.alias_accept[v])) v = S.alias_other[v];
    // 32-bit index arithmetic (n_voxels < 2^32): 64-bit division is emulated on the GPU
    const uint32_t v32 = static_cast<uint32_t>(v), nx = static_cast<uint32_t>(S.nx), ny = static_cast<uint32_t>(S.ny);
    const int ix = static_cast<int>(v32 % nx);
    const int iy = static_cast<int>((v32 / nx) % ny);
    const int iz = static_cast<int>(v32 / (nx * ny));
    // uniform in the voxel: centre (i - (n - 1) / 2) v, plus (u - 1/2) v
    *x = (static_cast<float>(ix) - 0.5f * static_cast<float>(S.nx) + uniform01(rng.next_u32())) * S.vx;
    *y = (static_cast<float>(iy) - 0.5f * static_cast<float>(S.ny) + uniform01(rng.next_u32())) * S.vy;
    *z = (static_cast<float>(iz) - 0.5f * static_cast<float>(S.nz) + uniform01(rng.next_u32())) * S.vz;
}

// The standard library's float math (FIRST's Monte Carlo; last-ulp differences between libm and CUDA).
struct LibmMath {
    template <class Rng>
    static DP_HD void normal_pair(Rng& rng, float* g0, float* g1) {
        dp::random::normal_pair(rng, g0, g1);
    }
    // sin and cos of an angle in radians
    static DP_HD void sincos(float a, float* s, float* c) {
        *c = std::cos(a);
        *s = std::sin(a);
    }
};

// Isotropic Gaussian positron range: sigma (mm) per Cartesian axis; three normals from two pairs
// (the fourth unused). Draws nothing when sigma is 0.
template <class Math, class Rng>
DP_HD void add_positron_range(float sigma, Rng& rng, float* x, float* y, float* z) {
    if (!(sigma > 0.0f)) return;
    float g0, g1, g2, g3;
    Math::normal_pair(rng, &g0, &g1);
    Math::normal_pair(rng, &g2, &g3);
    *x += sigma * g0;
    *y += sigma * g1;
    *z += sigma * g2;
}

// A unit vector isotropic inside the band |sin(elevation)| <= sin_el_max, |psi| <= psi_max around
// +x (uniform in (sin elevation, psi) is uniform on the sphere); elevation is measured from the
// x-y plane, psi in that plane from +x: u = (cos el cos psi, cos el sin psi, sin el). Two draws.
template <class Math, class Rng>
DP_HD void band_direction(float sin_el_max, float psi_max, Rng& rng, float* ux, float* uy, float* uz) {
    const float sin_el = sin_el_max * (2.0f * uniform01(rng.next_u32()) - 1.0f);
    const float psi = psi_max * (2.0f * uniform01(rng.next_u32()) - 1.0f);
    const float cos_el = std::sqrt(1.0f - sin_el * sin_el);
    float sp, cp;
    Math::sincos(psi, &sp, &cp);
    *ux = cos_el * cp;
    *uy = cos_el * sp;
    *uz = sin_el;
}

// Acollinearity: u turned by independent Gaussian angles alpha, beta (sigma_rad each) about
// e1 = z x u / |z x u| and e2 = u x e1; returns the unit vector v (the second photon travels along
// -v). Needs u not parallel to z (u_x > 0 in both families). Draws nothing when sigma_rad is 0.
template <class Math, class Rng>
DP_HD void deviate(float sigma_rad, Rng& rng, float ux, float uy, float uz, float* vx, float* vy, float* vz) {
    *vx = ux;
    *vy = uy;
    *vz = uz;
    if (!(sigma_rad > 0.0f)) return;
    float alpha, beta;
    Math::normal_pair(rng, &alpha, &beta);
    alpha *= sigma_rad;
    beta *= sigma_rad;
    const float c = std::sqrt(ux * ux + uy * uy);  // cos(elevation) > 0
    const float e1x = -uy / c, e1y = ux / c;       // e1z = 0
    const float e2x = -uz * e1y, e2y = uz * e1x, e2z = c;
    // u + alpha e1 + beta e2, normalised: turned by atan(sqrt(alpha^2 + beta^2)), which differs
    // from the Gaussian angle by O(angle^3) (1e-8 relative at 0.5 degree FWHM).
    const float wx = ux + alpha * e1x + beta * e2x;
    const float wy = uy + alpha * e1y + beta * e2y;
    const float wz = uz + beta * e2z;
    const float inv = 1.0f / std::sqrt(wx * wx + wy * wy + wz * wz);
    *vx = wx * inv;
    *vy = wy * inv;
    *vz = wz * inv;
}

}  // namespace dp::emission
