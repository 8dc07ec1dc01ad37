// Dual-head event-level Monte Carlo, per decay (science.md 3): written once for the OpenMP backend
// (monte_carlo_cpu.cpp) and the CUDA backend (monte_carlo_cuda.cu).
//
// It does not use the reconstruction model (no patch model, no projector): only physics and the
// detector geometry of DualHeadScanner (geometry.py), so that reconstructing its data with the
// analytic patches is an honest test (no inverse crime). One decay:
//
//  1. pair axis: with probability band_fraction the axis of the photon pair lies in the direction
//     band below (one 32-bit draw against a threshold); otherwise no photon can reach the upper
//     head's crystals from the source and the decay is done (out of band). Decays therefore count
//     real, isotropic decays; the band only saves work;
//  2. source: a voxel of the activity drawn with probability proportional to its activity (Walker
//     alias table), then a uniform point inside it (common/emission.hpp);
//  3. positron range: an isotropic Gaussian displacement, sigma = positron_range_fwhm_mm / 2.3548
//     per Cartesian axis. An annihilation point at or beyond a front face (|x| >= gap / 2, possible
//     only within a few sigma of the outermost planes) is counted as missed;
//  4. photon 1 (toward the upper head, +x): isotropic inside the band |sin(elevation)| <= sin_el_max,
//     |psi| <= psi_max around +x, which holds every direction along which a photon from the
//     source's bounding box (widened by the largest positron range) can reach an upper crystal;
//  5. acollinearity: photon 2 travels along -v, v = u turned by two independent Gaussian angles
//     (sigma = acollinearity_fwhm_deg / 2.3548) about two axes perpendicular to u;
//  6. each photon through its head's front layer, n_y x n_z crystals of crystal_mm x crystal_mm x
//     depth_mm at pitch_mm (upper: x in [gap/2, gap/2 + depth], lower: the mirror image; the gaps
//     between crystals do not attenuate): its path length in crystal material to the first
//     interaction is l ~ Exp(mu); the photon is walked along its straight line through the cells of
//     the crystal lattice (a 2-D DDA over the slab), crystal segment by crystal segment, until the
//     crystal path reaches l: that crystal detects it (penetration through neighbours included;
//     photoelectric and Compton are not distinguished, no energy window, no inter-crystal scatter).
//     A photon whose line crosses no crystal is missed; one that leaves the slab (through the back
//     or beyond the side of the lattice) before l is not detected;
//  7. a coincidence (a "true") when both photons are detected: LOR (c_u, c_l) with c_u photon 1's
//     crystal in the upper head and c_l photon 2's in the lower head, at layout.hpp lor_index.
//
// Random numbers and reproducibility: Philox4x32-10 with counter (decay, block, kDomain) and the
// seed as key (common/emission.hpp DecayStream): a decay's draws depend only on (seed, decay
// number). All arithmetic is IEEE basic operations (common/portable_math.hpp for log, sin, cos)
// in translation units compiled without contraction, so the CPU and the GPU compute every decay to
// the same bits: their histograms are identical, whatever the threads, chunks or launch shape.
// Single precision: coordinates stay below ~300 mm (ulp 3e-5 mm), far below the 0.3 mm gaps.
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/emission.hpp"
#include "../common/hd.hpp"
#include "../common/portable_math.hpp"
#include "layout.hpp"

namespace dp::dualhead::mc {

using Math = dp::portable::PortableMath;
using dp::random::uniform01;

// Fourth counter word of every draw: keeps this Monte Carlo's streams apart from any other user
// of Philox with the same seed ('DHMC').
constexpr uint32_t kDomain = 0x44484D43u;
using DecayRng = dp::emission::DecayStream<kDomain>;

// Everything a decay needs, plain data (a __grid_constant__ kernel parameter). Lengths in mm.
struct McParams {
    // the activity on scanner.grid [v_z, v_y, p]: nz = n_z D, ny = n_y D, nx = n_planes
    dp::emission::SourceLattice src;
    uint64_t band_threshold;       // pair axis in the band iff the decay's first u32 < this (<= 2^32)
    float sin_el_max, psi_max;     // the band of photon 1 (around +x)
    float sigma_range_mm;          // positron range, per axis (0: off)
    float sigma_acol_rad;          // acollinearity, per deviation angle (0: off)
    Layout layout;                 // n_y, n_z (LOR layout)
    float pitch;                   // crystal pitch
    float crystal_lo, crystal_hi;  // a crystal spans [lo, hi] from its cell's low edge: (pitch -+ crystal) / 2
    float half_w, half_h;          // n_y pitch / 2, n_z pitch / 2: the lattice spans |y| <= half_w, |z| <= half_h
    float front, back;             // |x| of the front and back faces: gap / 2, gap / 2 + depth
    float mu;                      // linear attenuation (1 / mm)
    uint32_t key0, key1;           // Philox key (the seed)
};

// What happened to a decay (nested: a true crossed, a crossing decay was in band).
enum Outcome : int {
    kOutOfBand = 0,    // pair axis outside the band: no photon can reach the upper crystals
    kMissed = 1,       // in band, but a photon's line crosses no crystal of its head (or the
                       // annihilation point lies beyond a front face)
    kNotDetected = 2,  // both lines cross crystals; at least one photon passed without interacting
    kTrue = 3,         // both detected: binned
};

// What happened to one photon in its head.
enum PhotonFate : int { kNoCrystal = 0, kPassed = 1, kInteracted = 2 };

// Where a photon interacted: crystal (c_y, c_z) of its head and the point (mm).
struct PhotonHit {
    int cy, cz;
    float x, y, z;
};

// A decay's history (trace_cpu; the histogram kernels keep only the outcome and the index).
struct DecayRecord {
    float sx, sy, sz;     // point drawn in the voxel (before the positron range)
    float x, y, z;        // annihilation point
    float ux, uy, uz;     // photon 1's direction (toward the upper head)
    float wx, wy, wz;     // photon 2's direction of travel (-v, toward the lower head)
    float path1, path2;   // crystal path to the first interaction drawn for each photon (mm)
    int fate1, fate2;     // PhotonFate (kNoCrystal when not tracked)
    PhotonHit h1, h2;     // interactions (crystal -1 unless kInteracted)
    int outcome;
    int64_t index;        // LOR index when kTrue, else -1
};

template <class T>
DP_HD void count_outcome(int outcome, T& in_band, T& crossed, T& trues) {
    in_band += outcome >= kMissed ? 1 : 0;
    crossed += outcome >= kNotDetected ? 1 : 0;
    trues += outcome == kTrue ? 1 : 0;
}

DP_HD float infinity() { return dp::portable::bits_float(0x7f800000u); }

// Cell of the lattice coordinate c (mm from the lattice's low edge): floor(c / pitch) clamped to
// [-1, n] (every point below the lattice is cell -1, above it cell n; NaN counts as below).
DP_HD int cell_of(float c, float pitch, int n) {
    const float f = std::floor(c / pitch);
    if (!(f >= 0.0f)) return -1;
    if (f >= static_cast<float>(n)) return n;
    return static_cast<int>(f);
}

// The t at which the line c0 + t d (inv = 1 / d) crosses out of cell i (coordinate units as c0).
DP_HD float cell_exit(int i, float d, float inv, float c0, float pitch) {
    if (d > 0.0f) return (static_cast<float>(i + 1) * pitch - c0) * inv;
    if (d < 0.0f) return (static_cast<float>(i) * pitch - c0) * inv;
    return infinity();
}

// The t interval [*ta, *tb] in which c0 + t d lies in [lo, hi] (empty: *ta > *tb).
DP_HD void span(float c0, float d, float inv, float lo, float hi, float* ta, float* tb) {
    if (d > 0.0f) {
        *ta = (lo - c0) * inv;
        *tb = (hi - c0) * inv;
    } else if (d < 0.0f) {
        *ta = (hi - c0) * inv;
        *tb = (lo - c0) * inv;
    } else {
        const bool inside = c0 >= lo && c0 <= hi;
        *ta = inside ? -infinity() : infinity();
        *tb = inside ? infinity() : -infinity();
    }
}

// Step 6 for a photon from (x0, y0, z0), x0 < front, along the unit vector d toward the upper head
// (the lower head is walked in the mirror x -> -x). path: crystal path to the first interaction.
// Walks the cells (clamped to [-1, n]) that the line crosses inside the slab x in [front, back]; in
// each crystal cell the line's crystal segment is the intersection of the cell segment with the
// crystal's y and z extents. Stops once the line is outside the lattice and moving away from it.
DP_HD int walk_head(const McParams& P, float x0, float y0, float z0, float dx, float dy, float dz, float path,
                    PhotonHit* hit) {
    if (!(dx > 0.0f)) return kNoCrystal;
    const int ny = P.layout.n_y, nz = P.layout.n_z;
    const float inv_dx = 1.0f / dx;
    const float t0 = (P.front - x0) * inv_dx, t1 = (P.back - x0) * inv_dx;
    // lattice coordinates: mm from the lattice's low edges
    const float cy0 = y0 + P.half_w, cz0 = z0 + P.half_h;
    const float inv_dy = dy != 0.0f ? 1.0f / dy : 0.0f, inv_dz = dz != 0.0f ? 1.0f / dz : 0.0f;
    int iy = cell_of(cy0 + t0 * dy, P.pitch, ny);
    int iz = cell_of(cz0 + t0 * dz, P.pitch, nz);
    const int step_y = dy > 0.0f ? 1 : -1, step_z = dz > 0.0f ? 1 : -1;
    float t = t0, left = path;
    bool crossed = false;
    // each pass crosses one cell boundary: at most n_y + 1 in y and n_z + 1 in z before leaving
    for (int guard = ny + nz + 4; guard > 0; --guard) {
        if ((iy < 0 && !(dy > 0.0f)) || (iy >= ny && !(dy < 0.0f))) break;  // outside, moving away
        if ((iz < 0 && !(dz > 0.0f)) || (iz >= nz && !(dz < 0.0f))) break;
        const float ty = cell_exit(iy, dy, inv_dy, cy0, P.pitch);
        const float tz = cell_exit(iz, dz, inv_dz, cz0, P.pitch);
        const float t_end = std::fmin(std::fmin(ty, tz), t1);
        if (iy >= 0 && iy < ny && iz >= 0 && iz < nz) {
            const float base_y = static_cast<float>(iy) * P.pitch, base_z = static_cast<float>(iz) * P.pitch;
            float ay, by, az, bz;
            span(cy0, dy, inv_dy, base_y + P.crystal_lo, base_y + P.crystal_hi, &ay, &by);
            span(cz0, dz, inv_dz, base_z + P.crystal_lo, base_z + P.crystal_hi, &az, &bz);
            const float lo = std::fmax(t, std::fmax(ay, az)), hi = std::fmin(t_end, std::fmin(by, bz));
            if (hi > lo) {
                crossed = true;
                const float len = hi - lo;
                if (left <= len) {
                    const float th = lo + left;
                    hit->cy = iy;
                    hit->cz = iz;
                    hit->x = x0 + th * dx;
                    hit->y = y0 + th * dy;
                    hit->z = z0 + th * dz;
                    return kInteracted;
                }
                left -= len;
            }
        }
        if (!(t_end < t1)) break;  // reached the back face
        if (ty <= tz) {
            iy += step_y;
        } else {
            iz += step_z;
        }
        t = t_end;
    }
    return crossed ? kPassed : kNoCrystal;
}

// -log(u) / mu for a uniform u in (0, 1): an Exp(mu) path length (mm).
DP_HD float exponential_path(uint32_t bits, float mu) {
    return -dp::portable::log_portable(uniform01(bits)) / mu;
}

// One decay, number `decay` of the stream keyed by P.key0/key1: returns its Outcome, sets *index
// (the LOR, or -1) and, with Trace, fills *rec.
template <bool Trace>
DP_HD int simulate_decay(const McParams& P, uint64_t decay, int64_t* index, DecayRecord* rec) {
    *index = -1;
    if constexpr (Trace) {
        *rec = DecayRecord{};
        rec->fate1 = rec->fate2 = kNoCrystal;
        rec->h1.cy = rec->h1.cz = rec->h2.cy = rec->h2.cz = -1;
        rec->index = -1;
        rec->outcome = kOutOfBand;
    }
    DecayRng rng(decay, P.key0, P.key1);
    // step 1: the pair axis in the band?
    if (!(static_cast<uint64_t>(rng.next_u32()) < P.band_threshold)) return kOutOfBand;
    // steps 2-5
    float x, y, z;
    dp::emission::sample_source(P.src, rng, &x, &y, &z);
    if constexpr (Trace) {
        rec->sx = x;
        rec->sy = y;
        rec->sz = z;
    }
    dp::emission::add_positron_range<Math>(P.sigma_range_mm, rng, &x, &y, &z);
    float ux, uy, uz, vx, vy, vz;
    dp::emission::band_direction<Math>(P.sin_el_max, P.psi_max, rng, &ux, &uy, &uz);
    dp::emission::deviate<Math>(P.sigma_acol_rad, rng, ux, uy, uz, &vx, &vy, &vz);
    const float path1 = exponential_path(rng.next_u32(), P.mu);
    const float path2 = exponential_path(rng.next_u32(), P.mu);
    if constexpr (Trace) {
        rec->x = x;
        rec->y = y;
        rec->z = z;
        rec->ux = ux;
        rec->uy = uy;
        rec->uz = uz;
        rec->wx = -vx;
        rec->wy = -vy;
        rec->wz = -vz;
        rec->path1 = path1;
        rec->path2 = path2;
        rec->outcome = kMissed;
    }
    if (!(std::fabs(x) < P.front)) return kMissed;
    // step 6: photon 1 into the upper head; photon 2 (along -v) into the lower head, walked in the
    // mirror x -> -x, where it travels along (v_x, -v_y, -v_z) toward the upper head
    PhotonHit h1{-1, -1, 0.0f, 0.0f, 0.0f}, h2{-1, -1, 0.0f, 0.0f, 0.0f};
    const int f1 = walk_head(P, x, y, z, ux, uy, uz, path1, &h1);
    if constexpr (Trace) {
        rec->fate1 = f1;
        rec->h1 = h1;
    }
    if (f1 == kNoCrystal) return kMissed;
    const int f2 = walk_head(P, -x, y, z, vx, -vy, -vz, path2, &h2);
    h2.x = -h2.x;
    if constexpr (Trace) {
        rec->fate2 = f2;
        rec->h2 = h2;
    }
    if (f2 == kNoCrystal) return kMissed;
    const int outcome = (f1 == kInteracted && f2 == kInteracted) ? kTrue : kNotDetected;
    if (outcome == kTrue) *index = lor_index(P.layout, h1.cy, h1.cz, h2.cy, h2.cz);
    if constexpr (Trace) {
        rec->outcome = outcome;
        rec->index = *index;
    }
    return outcome;
}

}  // namespace dp::dualhead::mc
