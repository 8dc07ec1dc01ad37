// FIRST event-level Monte Carlo, per decay (science.md 2.6, geometry.py): written once for the
// OpenMP backend (monte_carlo_cpu.cpp) and the CUDA backend (monte_carlo_cuda.cu).
//
// It does not use the reconstruction model (no Super-LOR table, no projector): only physics and
// the detector geometry of RotatingScanner, so that reconstructing its sinograms with the
// analytic model is an honest test (no inverse crime). One decay:
//
//  1. source: a voxel drawn with probability proportional to its activity (Walker/Vose alias
//     table built on the host, monte_carlo_plan.cpp), then a uniform point inside it;
//  2. positron range: an isotropic Gaussian displacement (sigma per Cartesian axis);
//  3. gantry angle g ~ U(0, pi) (continuous rotation over the 180 degree scan). Gantry frame:
//     x' is the head normal (head A's front face at x' = -D/2, head B's at +D/2), y' transaxial
//     along the heads, z axial; world (x, y) = (x' cos g - y' sin g, x' sin g + y' cos g);
//  4. direction u of photon 1 (toward head B, u_x' > 0), isotropic inside the band
//     |sin(elevation)| <= sin_el_max, |psi| <= psi_max (uniform in (sin elevation, psi) is uniform
//     on the sphere). The band holds every direction in which photon 1 can reach head B's front
//     face from the source's bounding box (monte_carlo_plan.cpp), so it loses no coincidence;
//     its share of the sphere converts decays into equivalent isotropic decays;
//  5. non-collinearity: photon 2 travels along -u', u' = u turned by two independent Gaussian
//     angles about two axes perpendicular to u;
//  6. each photon through its head: it must enter the front face; it interacts after a path
//     l ~ Exp(mu) (depth l |cos|; deeper than the crystal: it passes through, undetected); the
//     interaction point must lie inside the head's lateral extent (else it left through a side
//     face). The head is one continuous slab of crystal: the 0.1 mm gaps between the 1.5 mm
//     crystals are not modelled. Optional intrinsic blur (crystal identification) is added to
//     the interaction point's y' and z; the crystal is the one under the blurred point, clamped
//     to the head (crystal identification always names a crystal of the head that saw the photon);
//  7. detected position: axially the row centre z_r. Transaxially the interaction point's y'
//     plus a uniform offset over the crystal width: the model's *virtual heads* (science.md 2.6)
//     have radial bins a quarter pitch wide, which only sub-crystal transaxial sampling can fill;
//     the uniform offset gives each LOR end the crystal-width aperture of a real crystal pair (the
//     aperture the model's tube assumes), with no quantisation to the 1.6 mm column lattice, which
//     would add a second, pitch-wide box. DOI penetration (the interaction point lies along the
//     photon's path), the in-plane obliquity of the real photon pair, non-collinearity and positron
//     range stay physical, and are not the model's assumptions (in-plane DOI parallax, for one, is
//     not in the analytic Super-LOR model);
//  8. binning (geometry.py): the LOR joins A = (-D/2 - E0, y'_A, z_rA) and B = (D/2 + E0, y'_B,
//     z_rB), E0 the mean interaction depth at normal incidence, rotated to world by g;
//     phi = atan2(B_y - A_y, B_x - A_x), s = -A_x sin(phi) + A_y cos(phi), r1 / r2 the rows of
//     heads A / B, folded into phi in [0, pi) (swap heads and negate s), angle bin
//     a = round(phi / (pi / n_angles)) (a = n_angles is angle 0 with the heads swapped again),
//     radial bin rho = round(s / radial_bin + (n_radial - 1) / 2).
//
// Arithmetic is single precision: coordinates are at most ~100 mm, where a float ulp is 8e-6 mm,
// far below every physical scale (0.4 mm bins, 1.6 mm crystals).
//
// Steps 1, 2, 4 and 5 are the shared emission physics of common/emission.hpp (with the standard
// library's math, LibmMath). Random numbers: Philox4x32-10 (common/philox.hpp) on both backends,
// counter (decay low, decay high, block, kDomain) and key (seed low, seed high): a decay's draws
// depend only on (seed, decay number), so the CPU and the GPU simulate the same decays whatever
// the threads, chunks or launch shape. They then differ only where a last-ulp difference between
// libm and CUDA math (log, sin, cos, atan2) or a fused multiply-add moves a value across a bin or
// acceptance edge.
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/emission.hpp"
#include "../common/hd.hpp"
#include "../common/random.hpp"

namespace dp::first::mc {

using dp::random::normal_pair;
using dp::random::uniform01;
using Math = dp::emission::LibmMath;

constexpr float kPi = 3.14159265358979323846f;
// Fourth counter word of every draw: keeps this Monte Carlo's streams apart from any other user
// of Philox with the same seed ('FIRS').
constexpr uint32_t kDomain = 0x46495253u;

// Everything a decay needs, plain data (passed to the kernel as a __grid_constant__ parameter).
// Lengths in mm, angles in radians; gantry-frame conventions as in the header comment.
struct McParams {
    // source: the activity's lattice (voxel centres (i - (n - 1) / 2) * v) and its alias table
    dp::emission::SourceLattice src;
    // direction band of photon 1
    float sin_el_max, psi_max;
    // blurs (sigma; 0 = off)
    float sigma_range_mm, sigma_nc_rad, sigma_intrinsic_mm;
    // heads
    int n_rows, n_columns;
    float pitch, crystal, depth, mu;
    float half_distance;           // D / 2: front faces at x' = -+D/2
    float half_width, half_height; // n_columns pitch / 2, n_rows pitch / 2
    float mean_depth;              // E0: LOR endpoints this far behind the front faces
    // sinogram
    int n_angles, n_radial;
    float radial_bin;
    // Philox key (the seed)
    uint32_t key0, key1;
};

// What happened to a decay (an event is counted in its own class only).
enum Outcome : int {
    kMissed = 0,         // a photon did not enter its head's front face
    kNotDetected = 1,    // both entered; at least one passed through or left through a side face
    kOutsideRadial = 2,  // both detected; the LOR's radial bin is outside [0, n_radial)
    kBinned = 3,         // added to the sinogram
};

// Where a photon was detected: crystal row and transaxial position y' (mm, gantry frame).
struct HeadHit {
    int row;
    float y;
};

// A decay's history (the kernels keep only outcome and index; the trace binding reads the rest).
struct DecayRecord {
    float x, y, z;     // annihilation point after the positron range (world, mm)
    float gantry;      // g (rad)
    float ux, uy, uz;  // photon 1 direction (gantry frame)
    HeadHit a, b;      // detections in heads A and B (valid for outcome >= kOutsideRadial)
    int outcome;
    int64_t index;     // flat sinogram index [a, r1, r2, rho] when kBinned, else -1
};

// Adds a decay's outcome to the counters of the classes it belongs to (nested: binned and
// outside-radial coincidences were detected, detected ones entered).
template <class T>
DP_HD void count_outcome(int outcome, T& entered, T& detected, T& binned, T& outside) {
    entered += outcome >= kNotDetected ? 1 : 0;
    detected += outcome >= kOutsideRadial ? 1 : 0;
    binned += outcome == kBinned ? 1 : 0;
    outside += outcome == kOutsideRadial ? 1 : 0;
}

// The random bits of one decay: Philox blocks (decay, block) drawn four words at a time.
using DecayRng = dp::emission::DecayStream<kDomain>;

// Step 1: an annihilation point (mm) distributed as the activity.
template <class Rng>
DP_HD void sample_source(const McParams& P, Rng& rng, float* x, float* y, float* z) {
    dp::emission::sample_source(P.src, rng, x, y, z);
}

// Step 2: isotropic Gaussian positron range (three normals; the fourth of the two pairs unused).
template <class Rng>
DP_HD void add_positron_range(const McParams& P, Rng& rng, float* x, float* y, float* z) {
    dp::emission::add_positron_range<Math>(P.sigma_range_mm, rng, x, y, z);
}

// Step 4: photon 1's direction in the gantry frame, isotropic in the band.
template <class Rng>
DP_HD void band_direction(const McParams& P, Rng& rng, float* ux, float* uy, float* uz) {
    dp::emission::band_direction<Math>(P.sin_el_max, P.psi_max, rng, ux, uy, uz);
}

// Step 5: u turned by Gaussian angles alpha, beta about e1 = z x u / |z x u| (in-plane) and
// e2 = u x e1; returns the unit vector u' (photon 2 travels along -u').
template <class Rng>
DP_HD void deviate(const McParams& P, Rng& rng, float ux, float uy, float uz, float* vx, float* vy,
                   float* vz) {
    dp::emission::deviate<Math>(P.sigma_nc_rad, rng, ux, uy, uz, vx, vy, vz);
}

// Outcome of one photon in its head (step 6).
enum PhotonFate : int { kMissedFace = 0, kUndetected = 1, kDetected = 2 };

// Step 6 and 7 for one photon from (x0, y0, z0) along the unit vector d (gantry frame) toward the
// head on side +1 (B, front face x' = D/2) or -1 (A, x' = -D/2).
template <class Rng>
DP_HD int photon_in_head(const McParams& P, float side, float x0, float y0, float z0, float dx,
                         float dy, float dz, Rng& rng, HeadHit* hit) {
    const float cos_in = side * dx;  // cosine to the head normal
    if (!(cos_in > 0.0f)) return kMissedFace;
    const float t = (P.half_distance - side * x0) / cos_in;
    if (!(t > 0.0f)) return kMissedFace;
    const float ey = y0 + t * dy, ez = z0 + t * dz;  // entry point on the front plane
    if (!(std::fabs(ey) <= P.half_width && std::fabs(ez) <= P.half_height)) return kMissedFace;
    const float path = -std::log(uniform01(rng.next_u32())) / P.mu;
    if (path * cos_in > P.depth) return kUndetected;  // passes through the crystal
    float iy = ey + path * dy, iz = ez + path * dz;
    if (!(std::fabs(iy) <= P.half_width && std::fabs(iz) <= P.half_height)) return kUndetected;  // side face
    if (P.sigma_intrinsic_mm > 0.0f) {
        float g0, g1;
        normal_pair(rng, &g0, &g1);
        iy += P.sigma_intrinsic_mm * g0;
        iz += P.sigma_intrinsic_mm * g1;
    }
    // Crystal row under the point; compared in float first (a far blur would overflow an int).
    const float fr = std::floor((iz + P.half_height) / P.pitch);
    const int row = fr < 0.0f ? 0 : (fr >= static_cast<float>(P.n_rows) ? P.n_rows - 1 : static_cast<int>(fr));
    const float offset = P.crystal * (uniform01(rng.next_u32()) - 0.5f);
    hit->row = row;
    hit->y = iy + offset;
    return kDetected;
}

// Step 8: the sinogram bin of the LOR between detections a (head A) and b (head B) at gantry
// angle g; kBinned with *index, or kOutsideRadial.
//
// Computed in the gantry frame, which gives the same numbers as the world-frame recipe of the
// header comment: the LOR direction B - A = (Lx, dy), Lx = D + 2 E0, makes phi' = atan2(dy, Lx) with
// x', so phi = g + phi'; s is invariant under the rotation: s = -A'_x sin(phi') + A'_y cos(phi')
// = (D/2 + E0) (y'_A + y'_B) / |B - A|_inplane, the mid-point's y' projected on e_s.
DP_HD int bin_lor(const McParams& P, float g, const HeadHit& a, const HeadHit& b, int64_t* index) {
    const float h = P.half_distance + P.mean_depth;
    const float dy = b.y - a.y;
    const float len = std::sqrt(4.0f * h * h + dy * dy);
    float s = h * (a.y + b.y) / len;
    float phi = g + std::atan2(dy, 2.0f * h);  // in (-pi/2, 3pi/2)
    int r1 = a.row, r2 = b.row;
    bool swap = false;
    if (phi < 0.0f) {
        phi += kPi;
        swap = true;
    } else if (phi >= kPi) {
        phi -= kPi;
        swap = true;
    }
    int angle = static_cast<int>(std::floor(phi * (static_cast<float>(P.n_angles) / kPi) + 0.5f));
    if (angle >= P.n_angles) {  // phi rounds to pi: angle 0, LOR reversed
        angle = 0;
        swap = !swap;
    }
    if (swap) {
        s = -s;
        const int t = r1;
        r1 = r2;
        r2 = t;
    }
    const float frho = std::floor(s / P.radial_bin + 0.5f * static_cast<float>(P.n_radial - 1) + 0.5f);
    if (!(frho >= 0.0f && frho < static_cast<float>(P.n_radial))) return kOutsideRadial;
    *index = ((static_cast<int64_t>(angle) * P.n_rows + r1) * P.n_rows + r2) * P.n_radial +
             static_cast<int64_t>(frho);
    return kBinned;
}

// One decay, number `decay` of the stream keyed by P.key0/key1: fills rec and returns its Outcome.
DP_HD int simulate_decay(const McParams& P, uint64_t decay, DecayRecord& rec) {
    DecayRng rng(decay, P.key0, P.key1);
    rec.index = -1;
    rec.a = HeadHit{-1, 0.0f};
    rec.b = HeadHit{-1, 0.0f};
    float x, y, z;
    sample_source(P, rng, &x, &y, &z);
    add_positron_range(P, rng, &x, &y, &z);
    rec.x = x;
    rec.y = y;
    rec.z = z;
    // Step 3: gantry angle, and the point in the gantry frame (inverse rotation).
    const float g = kPi * uniform01(rng.next_u32());
    rec.gantry = g;
    const float cg = std::cos(g), sg = std::sin(g);
    const float xg = x * cg + y * sg, yg = -x * sg + y * cg;
    float ux, uy, uz, vx, vy, vz;
    band_direction(P, rng, &ux, &uy, &uz);
    rec.ux = ux;
    rec.uy = uy;
    rec.uz = uz;
    deviate(P, rng, ux, uy, uz, &vx, &vy, &vz);
    const int fate_b = photon_in_head(P, 1.0f, xg, yg, z, ux, uy, uz, rng, &rec.b);
    if (fate_b == kMissedFace) return rec.outcome = kMissed;
    const int fate_a = photon_in_head(P, -1.0f, xg, yg, z, -vx, -vy, -vz, rng, &rec.a);
    if (fate_a == kMissedFace) return rec.outcome = kMissed;
    if (fate_a != kDetected || fate_b != kDetected) return rec.outcome = kNotDetected;
    return rec.outcome = bin_lor(P, g, rec.a, rec.b, &rec.index);
}

}  // namespace dp::first::mc
