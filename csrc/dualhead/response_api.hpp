// Dual-head analytic system model, host API (plain C++: the bindings need no CUDA headers).
//
//   evaluate_cpu / gpu::evaluate : h (response.hpp) for a batch of queries;
//   patch_candidates / build_patches : the PatchModel of science.md 3.4 from h (patch_builder.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "response.hpp"

namespace dp::dualhead {

// The scanner as the response and the patch builder see it (validated by make_response_params).
struct ScannerSpec {
    int n_y = 0, n_z = 0, D = 0, n_planes = 0;
    double pitch_mm = 0, crystal_mm = 0, depth_mm = 0, gap_mm = 0, plane_mm = 0, mu_per_mm = 0;
};

// Checks the scanner (positive sizes, crystals fit the pitch, planes fit between the heads) and the
// quadrature orders (1..64) with dp::ValueError naming the argument.
ResponseParams make_response_params(const ScannerSpec& s, int angle_samples, int voxel_samples);

// out[i] = h(queries[i]) on the CPU (OpenMP; threads <= 0: OpenMP's default).
void evaluate_cpu(const ResponseParams& P, const Query* queries, int64_t n, double* out, int threads);

namespace gpu {
// out[i] = h(queries[i]) on the current CUDA device; host arrays in and out, evaluated in launches of
// at most 2^22 queries (device memory stays below 100 MB). Only with the CUDA backend compiled in.
void evaluate(const ResponseParams& P, const Query* queries, int64_t n, double* out);
}  // namespace gpu

// Evaluates a batch of queries (evaluate_cpu or gpu::evaluate); must be callable from the builder.
using Evaluator = std::function<void(const Query* queries, int64_t n, double* out)>;
// Called between chunks of classes with (classes done, classes listed); may throw to abort.
using BuildHook = std::function<void(int64_t done, int64_t total)>;

// Candidate taps of class k = (a_y, a_z) at plane p (science.md 3.4): the voxels (dy, dz) relative to
// D c_u of the (+,+) LOR c_u = 0, c_l = (a_y, a_z) whose box meets the region that the lines joining
// the two crystals' boxes sweep through the voxel's slab (exact support of h; see patch_builder.cpp).
// Calls f(dy, dz) in (dz, dy) order.
template <typename F>
void for_each_candidate(const ResponseParams& P, int a_y, int a_z, int p, F&& f);

// Candidates per listed class over the evaluated planes (p <= (n_planes - 1) / 2) and over all planes.
void patch_candidates(const ResponseParams& P, const int32_t* classes, int n_classes_listed, int n_z,
                      int64_t* evaluated, int64_t* all_planes);

struct PatchBuild {
    std::vector<int64_t> tap_start;  // n_classes * n_planes + 1 (classes not listed: no taps)
    std::vector<int16_t> tap_dy, tap_dz;
    std::vector<float> tap_w;
    int64_t candidates = 0;      // over all planes of the listed classes
    int64_t evaluated = 0;       // h evaluations (the planes x <= 0)
    int64_t dropped_below = 0;   // positive taps under the threshold
    double seconds_generate = 0, seconds_evaluate = 0, seconds_assemble = 0;
};

// The patch model of the listed classes (ascending, unique): h evaluated on the candidates of the
// planes x <= 0, the planes x > 0 filled by the x-reflection identity
//   patch(k, P-1-p)(dy, dz) = patch(k, p)(D-1 + D a_y - dy, D-1 + D a_z - dz),
// taps below threshold * (largest tap of the class) dropped. chunk: evaluations per batch handed
// to eval (whole classes; bounds the host and device memory).
PatchBuild build_patches(const ResponseParams& P, int n_y, int n_z, const int32_t* classes, int n_classes_listed,
                         double threshold, int64_t chunk, const Evaluator& eval, const BuildHook& hook);

// ---------------------------------------------------------------------------------------------------
template <typename F>
void for_each_candidate(const ResponseParams& P, int a_y, int a_z, int p, F&& f) {
    // The lines joining a point of c_u's box (x_u in [g, g + depth]) and of c_l's box
    // (x_l in [-g - depth, -g]) cross the plane x at fraction t = (x_u - x) / (x_u - x_l) of the way
    // from the upper to the lower point; at fixed t their crossings fill the crystal_mm square centred
    // on t (Y_l - Y_u, Z_l - Z_u) (the convex combination of two such squares). t grows with x_u and
    // x_l and falls with x, so over the voxel's slab x in [x_p - plane/2, x_p + plane/2] it spans
    // [t_min, t_max] below. A voxel can respond only if its box meets the union of those squares:
    // per axis, the t for which the square's range meets the voxel's is an interval; the voxel is a
    // candidate iff the two intervals and [t_min, t_max] intersect. tol (1e-9 mm) keeps boundary
    // voxels (whose h is ~0) rather than risk losing one to rounding.
    const double span = 2.0 * P.front + P.depth;
    const double x_p = (p - 0.5 * (P.n_planes - 1)) * P.plane, h = 0.5 * P.plane;
    const double t_min = (P.front - x_p - h) / span, t_max = (P.front + P.depth - x_p + h) / span;
    const double tol = 1e-9, reach = P.half_width + tol, v = P.voxel, cell = 0.5 * P.pitch;
    const int ny = P.D * (a_y + 1), nz = P.D * (a_z + 1);
    const double ly = a_y * P.pitch, lz = a_z * P.pitch;  // LOR axis: Y(t) = t ly, Z(t) = t lz
    for (int dz = 0; dz < nz; ++dz) {
        const double z0 = dz * v - cell, z1 = z0 + v;  // voxel's z range (c_u's centre at 0)
        double t0 = t_min, t1 = t_max;
        if (a_z == 0) {
            if (!(z0 - reach < 0.0 && z1 + reach > 0.0)) continue;
        } else {
            const double e0 = (z0 - reach) / lz, e1 = (z1 + reach) / lz;
            if (e0 > t0) t0 = e0;
            if (e1 < t1) t1 = e1;
            if (!(t1 > t0)) continue;
        }
        int dy0 = 0, dy1 = ny - 1;
        if (a_y == 0) {
            // Y(t) = 0: the voxels whose range widened by reach holds 0
            dy0 = static_cast<int>(floor((cell - reach) / v));
            dy1 = static_cast<int>(ceil((cell + reach) / v)) - 1;
        } else {
            const double Ylo = t0 * ly, Yhi = t1 * ly;
            dy0 = static_cast<int>(floor((Ylo - reach + cell) / v));
            dy1 = static_cast<int>(ceil((Yhi + reach + cell) / v)) - 1;
        }
        if (dy0 < 0) dy0 = 0;
        if (dy1 > ny - 1) dy1 = ny - 1;
        for (int dy = dy0; dy <= dy1; ++dy) f(dy, dz);
    }
}

}  // namespace dp::dualhead
