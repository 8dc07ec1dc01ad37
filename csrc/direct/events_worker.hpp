// Per-event math of the compiled event simulation + deposition (science.md 1.2, 1.12), written once
// for the OpenMP backend (events_cpu.cpp) and the CUDA backend (events_cuda.cu).
//
// It reproduces, in distribution, the NumPy/CuPy path of src/directpet/direct (events, deposition):
//   AnalyticPhantom.sample         -> choose_component, point_in_component, add_concentration
//                                     (cold inserts), together sample_annihilation
//   _band_directions               -> band_direction
//   detector_exits, WaterCylinder.survival
//                                  -> reaches_detector_and_escapes
//   the blur and timing of _simulate_trues
//                                  -> finish_decay
//   bin_views + deposit('nearest') -> locate_event
// simulate_decay chains them for one "decay" of the Python path (an annihilation whose LOR points
// into the tilt band, EventBatch.n_decays) and says whether it gave an accepted true coincidence.
//
// Arithmetic is single precision: coordinates are at most ~1 m, so float rounding (~1e-4 mm) is far
// below every physical scale here (voxels, 5.8 mm blur, 60 mm TOF FWHM). The Python path rounds
// its event list to float32 as well. The component choice uses a double cumulative table and a
// 32-bit uniform so that weak sources (1e-9 of the activity) are still resolved.
//
// Random numbers: the first stage of a decay (annihilation point, direction, detector hit, water
// escape) takes its uniforms as arguments and is branch-free, so the CPU runs it over SIMD batches
// of decays; the blur and timing stages draw from a generator `Rng` with a member
// `uint32_t next_u32()`. The GPU draws everything from curand Philox (simulate_decay), the CPU from
// its own Philox4x32-10 (common/philox.hpp); uniforms and normals are derived from the bits by the same
// code on both sides, so only the bit streams differ.
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/hd.hpp"
#include "../common/random.hpp"

namespace dp::direct::events {

constexpr float kCmmPerPs = 0.299792458f;  // speed of light, mm / ps
constexpr int kMaxComponents = 64;          // analytic phantom components (kernel-parameter space)

enum ComponentKind : int { kCylinder = 0, kSphere = 1, kPoint = 2 };

// One analytic source. Cylinders are about the z axis (x, y unused), centred at z.
struct Component {
    int kind;
    float x, y, z;         // centre / position (mm)
    float radius;          // mm (cylinder, sphere)
    float half_length;     // mm (cylinder)
    float concentration;   // activity per mm^3 (volume sources; negative for cold inserts)
};

// Phantom: components with positive activity first (sampled through `cum`), then the negative
// (cold) ones, which only act through rejection (AnalyticPhantom._keep_cold).
struct Phantom {
    int n_pos = 0;
    int n_all = 0;
    int has_cold = 0;
    double cum[kMaxComponents];      // cumulative activity / total over the positive components
    Component comp[kMaxComponents];
};

struct ScannerParams {
    float radius;         // detector-surface radius (mm)
    float half_length;    // detector axial half-length (mm)
    float sin_theta_max;  // sin of the tilt acceptance
    float blur_sigma;     // perpendicular LOR blur sigma (mm); 0 = off
    float tof_sigma;      // sigma of t1 - t2 (ps); 0 = off
    float water_radius;   // attenuating water cylinder (mm); ignored when mu == 0
    float water_half_length;
    float mu;             // 1/mm; 0 = no attenuation
};

struct GridParams {
    int nz, ny, nx;
    float vz, vy, vx;  // mm
};

struct ViewParams {
    int n_phi, n_theta;
    float theta_max;  // radians; 0 = one tilt bin taking every tilt
};

struct SimParams {
    Phantom phantom;
    ScannerParams scanner;
    GridParams grid;
    ViewParams views;
};

// A list-mode true coincidence: detection points (mm) and t1 - t2 (ps).
struct Event {
    float p1[3], p2[3];
    float dt;
};

// Where an event lands (locate_event).
enum Placement : int { kDeposited = 0, kOutsideViews = 1, kOutsideGrid = 2 };

// --- random numbers: common/random.hpp (shared with the FIRST Monte Carlo) ------------------------
using random::normal_pair;
using random::sincos_2pi;
using random::uniform01;
using random::uniform01_fine;

// min / max without the NaN rules of fmin / fmax (which the host compiler does not inline);
// every operand here is finite.
DP_HD float min_f(float a, float b) { return a < b ? a : b; }
DP_HD float max_f(float a, float b) { return a > b ? a : b; }

// exp(x) for x <= 0 (the attenuation survival). On the host: 2^(x log2 e) split into the nearest
// integer power k (exponent bits) and a polynomial of the remainder f in [-1/2, 1/2] (Taylor
// series of exp(f ln 2) to f^6; relative error < 1e-6 for x >= -10, the float rounding of
// x log2 e included), inline instead of a libm call; the GPU has expf.
DP_HD float exp_nonpositive(float x) {
#if defined(__CUDA_ARCH__)
    return expf(x);
#else
    const float t = max_f(x * 1.4426950408889634f, -126.0f);  // log2 of the result, in [-126, 0]
    // k = floor(t + 1/2) by truncating a positive number (std::floor does not vectorise here).
    const int32_t k = static_cast<int32_t>(t + 126.5f) - 126;
    const float f = t - static_cast<float>(k);
    const float p =
        1.0f + f * (0.6931471806f + f * (0.2402265070f + f * (0.0555041087f +
        f * (0.0096181291f + f * (0.0013333558f + f * 0.0001540353f)))));
    // 2^k from its exponent bits (k in [-126, 0]); a bit cast rather than memcpy, which vectorises.
    const float scale = __builtin_bit_cast(float, (k + 127) << 23);
    return p * scale;
#endif
}

// --- geometry ----------------------------------------------------------------------------------------

// cylinder_interval (scanner.py) for an infinite cylinder of radius R about z: the parameters
// t0 <= t1 where r + t u crosses it. A line that misses gives t0 = t1 = 0, as in Python.
DP_HD void circle_interval(float x, float y, float ux, float uy, float R, float* t0, float* t1) {
    const float a = ux * ux + uy * uy;
    const float b = x * ux + y * uy;  // half of the usual b
    const float c = x * x + y * y - R * R;
    const float disc = b * b - a * c;
    const bool miss = disc < 0.0f;  // written without a branch so that batches vectorise
    const float sq = std::sqrt(max_f(disc, 0.0f));
    const float inv_a = 1.0f / a;
    *t0 = miss ? 0.0f : (-b - sq) * inv_a;
    *t1 = miss ? 0.0f : (-b + sq) * inv_a;
}

// detector_exits: photon 1 reaches the detector at r + t_plus u, photon 2 at r - t_minus u; true
// when both hit within the axial extent.
DP_HD bool detector_exits(const ScannerParams& s, float x, float y, float z, float ux, float uy,
                          float uz, float* t_plus, float* t_minus) {
    float t0, t1;
    circle_interval(x, y, ux, uy, s.radius, &t0, &t1);
    *t_plus = t1;
    *t_minus = -t0;
    // '&', not '&&': no branch on a random outcome (see reaches_detector_and_escapes).
    return (std::fabs(z + t1 * uz) <= s.half_length) & (std::fabs(z + t0 * uz) <= s.half_length);
}

// WaterCylinder.chord: length (mm) of the whole line through r along u inside the finite water
// cylinder (circle interval intersected with the slab |z| <= h; uz = 0 handled as in Python).
DP_HD float water_chord(const ScannerParams& s, float x, float y, float z, float ux, float uy,
                        float uz) {
    float t0, t1;
    circle_interval(x, y, ux, uy, s.water_radius, &t0, &t1);
    const float inv_uz = 1.0f / (std::fabs(uz) < 1e-12f ? 1e-12f : uz);
    const float za = (-s.water_half_length - z) * inv_uz;
    const float zb = (s.water_half_length - z) * inv_uz;
    const float lo = max_f(t0, min_f(za, zb));
    const float hi = min_f(t1, max_f(za, zb));
    return max_f(hi - lo, 0.0f);
}

// --- phantom ------------------------------------------------------------------------------------------

// cbrt(u) for u in (0, 1). On the host: a bit-level first guess (exponent divided by 3) and three
// Newton steps (relative error < 1e-7), which vectorises; the GPU has cbrtf.
DP_HD float cbrt_unit(float u) {
#if defined(__CUDA_ARCH__)
    return cbrtf(u);
#else
    float y = __builtin_bit_cast(float, 0x2a5137a0 + __builtin_bit_cast(int32_t, u) / 3);  // ~5 % off
    for (int k = 0; k < 3; ++k) y -= (y * y * y - u) / (3.0f * y * y);
    return y;
#endif
}

// searchsorted(cum, u, side='right') over the positive components; the last one also catches
// u >= cum[-1] (rounding).
DP_HD int choose_component(const Phantom& p, double u) {
    int k = 0;
    while (k < p.n_pos - 1 && p.cum[k] <= u) ++k;
    return k;
}

// A uniform point (mm) in one component from three uniforms (CylinderSource / SphereSource /
// PointSource.sample):
//   cylinder: r = R sqrt(u0) (uniform over the disc), azimuth 2 pi u1, z = c_z + L (u2 - 1/2);
//   sphere:   isotropic direction (cos theta = 2 u0 - 1, azimuth 2 pi u1) times R u2^(1/3), the
//             same distribution as Python's normalised Gaussian direction;
//   point:    its position.
// Both volume forms are computed and the kind selects, without branches, so that a batch of
// points with mixed components vectorises.
DP_HD void point_in_component(const Component& c, float u0, float u1, float u2, float* x, float* y,
                              float* z) {
    float s, co;
    sincos_2pi(u1, &s, &co);
    const float r_cyl = c.radius * std::sqrt(u0);
    const float cz = 2.0f * u0 - 1.0f;
    const float r_sph = c.radius * cbrt_unit(u2);
    const float st = r_sph * std::sqrt(max_f(1.0f - cz * cz, 0.0f));
    const bool cyl = c.kind == kCylinder, sph = c.kind == kSphere;
    *x = cyl ? r_cyl * co : c.x + (sph ? st * co : 0.0f);
    *y = cyl ? r_cyl * s : c.y + (sph ? st * s : 0.0f);
    *z = c.z + (cyl ? c.half_length * (2.0f * u2 - 1.0f) : (sph ? r_sph * cz : 0.0f));
}

// Concentration of component j at (x, y, z), added to f_pos (positive components) or f_neg (cold
// ones): the terms of AnalyticPhantom._keep_cold. Point sources add nothing.
DP_HD void add_concentration(const Component& c, bool positive, float x, float y, float z,
                             float* f_pos, float* f_neg) {
    const float dx = x - c.x, dy = y - c.y, dz = z - c.z;
    const bool in_cyl = (x * x + y * y <= c.radius * c.radius) & (std::fabs(dz) <= c.half_length);
    const bool in_sph = dx * dx + dy * dy + dz * dz <= c.radius * c.radius;
    const bool in = c.kind == kCylinder ? in_cyl : (c.kind == kSphere ? in_sph : false);
    const float f = in ? c.concentration : 0.0f;
    *f_pos += positive ? f : 0.0f;
    *f_neg += positive ? 0.0f : f;
}

// Probability (f_pos + f_neg) / f_pos of keeping a point drawn from the positive components where
// cold components overlap it (1 where no positive volume covers it, e.g. a lone point source).
DP_HD float cold_keep_probability(float f_pos, float f_neg) {
    return f_pos > 0.0f ? (f_pos + f_neg) / (f_pos > 0.0f ? f_pos : 1.0f) : 1.0f;
}

// Consecutive cold-insert rejections after which sampling gives up (see sample_annihilation).
constexpr int kMaxColdRejections = 1 << 16;

// One annihilation point (mm) distributed as the activity (AnalyticPhantom.sample): a component
// chosen with probability proportional to its activity, a uniform point in it, and cold inserts by
// rejection (rejected draws are redrawn and do not count as decays, as in Python). Returns false
// after kMaxColdRejections rejections in a row, which only a phantom whose cold inserts cancel
// (nearly) all of its activity reaches: the caller reports an error instead of hanging, where the
// Python sampler would loop for ever.
template <class Rng>
DP_HD bool sample_annihilation(const Phantom& p, Rng& rng, float* x, float* y, float* z) {
    for (int tries = 0; tries < kMaxColdRejections; ++tries) {
        const Component& c = p.comp[choose_component(p, uniform01_fine(rng.next_u32()))];
        const float u0 = uniform01(rng.next_u32()), u1 = uniform01(rng.next_u32());
        point_in_component(c, u0, u1, uniform01(rng.next_u32()), x, y, z);
        if (!p.has_cold) return true;
        float f_pos = 0.0f, f_neg = 0.0f;
        for (int j = 0; j < p.n_all; ++j) add_concentration(p.comp[j], j < p.n_pos, *x, *y, *z, &f_pos, &f_neg);
        if (uniform01(rng.next_u32()) < cold_keep_probability(f_pos, f_neg)) return true;
    }
    return false;
}

// _band_directions from two uniforms: u_z uniform in [-sin theta_max, sin theta_max], azimuth
// 2 pi u1: an isotropic direction conditioned on |tilt| <= theta_max.
DP_HD void band_direction(float sin_theta_max, float u0, float u1, float* ux, float* uy, float* uz) {
    *uz = sin_theta_max * (2.0f * u0 - 1.0f);
    const float st = std::sqrt(1.0f - *uz * *uz);
    float s, c;
    sincos_2pi(u1, &s, &c);
    *ux = st * c;
    *uy = st * s;
}

// --- one decay ------------------------------------------------------------------------------------------

// First test of a decay (annihilation r, direction u): both photons reach the detector within its
// axial extent, and both escape the water, with probability exp(-mu chord) decided by the uniform
// u_escape. Written without branches (the survival is computed for every decay) so that batches
// of decays vectorise on the CPU; a GPU warp runs both paths anyway. With mu = 0 (no attenuation)
// the survival is exactly 1.
DP_HD bool reaches_detector_and_escapes(const ScannerParams& s, float x, float y, float z, float ux,
                                        float uy, float uz, float u_escape) {
    float t_plus, t_minus;
    const bool hit = detector_exits(s, x, y, z, ux, uy, uz, &t_plus, &t_minus);
    const float survival = exp_nonpositive(-s.mu * water_chord(s, x, y, z, ux, uy, uz));
    return hit & (u_escape < survival);
}

// The rest of _simulate_trues for a decay that passed reaches_detector_and_escapes: perpendicular
// blur of the whole LOR, re-intersection (the blurred LOR must still hit within the axial
// extent), detection points and t1 - t2 with the timing noise. Returns true and fills `ev` for an
// accepted true coincidence.
template <class Rng>
DP_HD bool finish_decay(const ScannerParams& s, float x, float y, float z, float ux, float uy,
                        float uz, Rng& rng, Event& ev) {
    if (s.blur_sigma > 0.0f) {
        // Shift the whole LOR perpendicular to u: e1 transaxial (the LOR-radial axis), e2 = u x e1.
        const float ct = std::sqrt(ux * ux + uy * uy);  // > 0: |tilt| < 90 degrees
        const float e1x = -uy / ct, e1y = ux / ct;
        const float e2x = -uz * e1y, e2y = uz * e1x, e2z = ux * e1y - uy * e1x;
        float g0, g1;
        normal_pair(rng, &g0, &g1);
        g0 *= s.blur_sigma;
        g1 *= s.blur_sigma;
        x += g0 * e1x + g1 * e2x;
        y += g0 * e1y + g1 * e2y;
        z += g1 * e2z;
    }
    // Without blur this repeats the passed test (same inputs, same result) to get the distances.
    float t_plus, t_minus;
    if (!detector_exits(s, x, y, z, ux, uy, uz, &t_plus, &t_minus)) return false;
    ev.p1[0] = x + t_plus * ux;
    ev.p1[1] = y + t_plus * uy;
    ev.p1[2] = z + t_plus * uz;
    ev.p2[0] = x - t_minus * ux;
    ev.p2[1] = y - t_minus * uy;
    ev.p2[2] = z - t_minus * uz;
    // t1 - t2: photon 1 travels t_plus, photon 2 t_minus.
    ev.dt = (t_plus - t_minus) / kCmmPerPs;
    if (s.tof_sigma > 0.0f) {
        float g0, g1;
        normal_pair(rng, &g0, &g1);  // the second normal is not needed
        ev.dt += s.tof_sigma * g0;
    }
    return true;
}

// Outcome of simulate_decay.
enum DecayResult : int { kNoCoincidence = 0, kAccepted = 1, kColdExhausted = 2 };

// _simulate_trues for one decay, drawing its uniforms from `rng` (the GPU path; the CPU runs the
// same stages over batches of decays). kAccepted fills `ev` with an accepted true coincidence;
// kColdExhausted (not a decay) means the cold inserts rejected kMaxColdRejections draws in a row.
template <class Rng>
DP_HD int simulate_decay(const SimParams& P, Rng& rng, Event& ev) {
    float x, y, z, ux, uy, uz;
    if (!sample_annihilation(P.phantom, rng, &x, &y, &z)) return kColdExhausted;
    const float u0 = uniform01(rng.next_u32()), u1 = uniform01(rng.next_u32());
    band_direction(P.scanner.sin_theta_max, u0, u1, &ux, &uy, &uz);
    if (!reaches_detector_and_escapes(P.scanner, x, y, z, ux, uy, uz, uniform01(rng.next_u32())))
        return kNoCoincidence;
    return finish_decay(P.scanner, x, y, z, ux, uy, uz, rng, ev) ? kAccepted : kNoCoincidence;
}

// --- deposition -------------------------------------------------------------------------------------------

// bin_views for one LOR with direction d = p2 - p1: the canonical azimuth in [0, pi) (p1, p2
// swapped, i.e. d and dt negated, when it is not), equal-angle tilt bins over +-theta_max, view
// k * n_theta + l; -1 when the tilt is outside the views or d = 0. The most likely point does not
// depend on the swap (both u12 and dt change sign), so only the view needs it.
DP_HD int bin_view(const ViewParams& v, float dx, float dy, float dz) {
    constexpr float kPi = 3.14159265358979323846f;
    float phi = std::atan2(dy, dx);
    const bool flipped = phi < 0.0f || phi >= kPi;
    if (flipped) phi += kPi;
    if (phi >= kPi) phi -= kPi;
    const float uz = flipped ? -dz : dz;
    const float norm = std::sqrt(dx * dx + dy * dy + dz * dz);
    if (!(norm > 0.0f)) return -1;
    int k = static_cast<int>(phi / kPi * static_cast<float>(v.n_phi));
    if (k > v.n_phi - 1) k = v.n_phi - 1;
    int l = 0;
    if (v.theta_max > 0.0f) {
        const float theta = std::asin(min_f(max_f(uz / norm, -1.0f), 1.0f));
        l = static_cast<int>(std::floor((theta + v.theta_max) / (2.0f * v.theta_max) *
                                        static_cast<float>(v.n_theta)));
        if (theta == v.theta_max) l = v.n_theta - 1;
        if (l < 0 || l >= v.n_theta) return -1;
    }
    return k * v.n_theta + l;
}

// deposit(mode='nearest') for one event: view, most likely point r_hat = m + (c/2) dt u12
// (m = (p1 + p2)/2, u12 = (p2 - p1)/|p2 - p1|, science.md 1.2) and its nearest voxel
// i = floor(r / v + (n - 1)/2 + 1/2). Returns the placement; `index` is the flat index into
// (n_views, nz, ny, nx) when kDeposited.
DP_HD int locate_event(const GridParams& g, const ViewParams& v, const float* p1, const float* p2,
                       float dt, int64_t* index) {
    const float dx = p2[0] - p1[0], dy = p2[1] - p1[1], dz = p2[2] - p1[2];
    const int view = bin_view(v, dx, dy, dz);
    if (view < 0) return kOutsideViews;
    const float scale = 0.5f * kCmmPerPs * dt / std::sqrt(dx * dx + dy * dy + dz * dz);
    const float rx = 0.5f * (p1[0] + p2[0]) + scale * dx;
    const float ry = 0.5f * (p1[1] + p2[1]) + scale * dy;
    const float rz = 0.5f * (p1[2] + p2[2]) + scale * dz;
    const float fx = std::floor(rx / g.vx + 0.5f * static_cast<float>(g.nx - 1) + 0.5f);
    const float fy = std::floor(ry / g.vy + 0.5f * static_cast<float>(g.ny - 1) + 0.5f);
    const float fz = std::floor(rz / g.vz + 0.5f * static_cast<float>(g.nz - 1) + 0.5f);
    // Compare in float before converting: an MLP far outside would overflow an int.
    if (!(fx >= 0.0f && fx < static_cast<float>(g.nx) && fy >= 0.0f &&
          fy < static_cast<float>(g.ny) && fz >= 0.0f && fz < static_cast<float>(g.nz)))
        return kOutsideGrid;
    const int64_t ix = static_cast<int64_t>(fx), iy = static_cast<int64_t>(fy),
                  iz = static_cast<int64_t>(fz);
    *index = ((static_cast<int64_t>(view) * g.nz + iz) * g.ny + iy) * g.nx + ix;
    return kDeposited;
}

}  // namespace dp::direct::events
