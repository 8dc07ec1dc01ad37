// Dual-head analytic response on the CPU: the scanner checks and an OpenMP loop around
// lor_voxel_response (response.hpp).
#include <omp.h>

#include <cmath>
#include <string>

#include "../common/errors.hpp"
#include "response_api.hpp"

namespace dp::dualhead {

namespace {

void positive(double v, const char* name) { require_positive(v, std::string("scanner ") + name); }

}  // namespace

ResponseParams make_response_params(const ScannerSpec& s, int angle_samples, int voxel_samples) {
    if (s.n_y < 1 || s.n_z < 1 || s.D < 1 || s.n_planes < 1)
        throw ValueError("scanner: expected positive n_y, n_z, voxels_per_crystal and n_planes");
    if (s.n_planes % 2 == 0) throw ValueError("scanner: n_planes must be odd (a central plane at x = 0)");
    if (int64_t(s.D) * (s.n_y > s.n_z ? s.n_y : s.n_z) > 16383)
        throw ValueError("scanner: voxels_per_crystal * max(n_y, n_z) must stay below 2^14 (int16 offsets)");
    positive(s.pitch_mm, "pitch_mm");
    positive(s.crystal_mm, "crystal_mm");
    positive(s.depth_mm, "depth_mm");
    positive(s.gap_mm, "gap_mm");
    positive(s.plane_mm, "plane_mm");
    positive(s.mu_per_mm, "mu_per_mm");
    if (s.crystal_mm > s.pitch_mm) throw ValueError("scanner: crystal_mm must not exceed pitch_mm");
    if (s.n_planes * s.plane_mm > s.gap_mm * (1 + 1e-12))
        throw ValueError("scanner: the planes must fit between the heads (n_planes * plane_mm <= gap_mm)");
    if (angle_samples < 1 || angle_samples > 64)
        throw ValueError("angle_samples: expected an integer in [1, 64], got " + std::to_string(angle_samples));
    if (voxel_samples < 1 || voxel_samples > 64)
        throw ValueError("voxel_samples: expected an integer in [1, 64], got " + std::to_string(voxel_samples));
    ResponseParams P;
    P.pitch = s.pitch_mm;
    P.half_width = 0.5 * s.crystal_mm;
    P.depth = s.depth_mm;
    P.front = 0.5 * s.gap_mm;
    P.mu = s.mu_per_mm;
    P.voxel = s.pitch_mm / s.D;
    P.plane = s.plane_mm;
    P.D = s.D;
    P.n_planes = s.n_planes;
    P.angle_samples = angle_samples;
    P.voxel_samples = voxel_samples;
    return P;
}

void evaluate_cpu(const ResponseParams& P, const Query* queries, int64_t n, double* out, int threads) {
    const int nt = threads > 0 ? threads : omp_get_max_threads();
    // dynamic: queries near the support's edge stop early, oblique ones walk more crystals
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt)
    for (int64_t i = 0; i < n; ++i) out[i] = lor_voxel_response(P, queries[i]);
}

}  // namespace dp::dualhead
