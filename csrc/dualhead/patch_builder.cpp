// The dual-head patch model (science.md 3.4) from the analytic response h (response.hpp).
//
// Per orientation class k = (a_y, a_z), the (+,+) LOR c_u = 0, c_l = (a_y, a_z) stands for every
// LOR of the class (shift invariance; the other signs read the mirrored patch, layout.hpp). Its
// patch at plane p holds h at the voxels (dy, dz) = (v_y, v_z) relative to D c_u:
//
//   1. candidates (for_each_candidate, response_api.hpp): the voxels that the exact support of h can
//      reach, for the planes p <= (P-1)/2 (x <= 0, the central plane included);
//   2. h on every candidate (the Evaluator: OpenMP or CUDA), in chunks of whole classes;
//   3. the planes x > 0 from the x-reflection identity. The head swap with the x mirror gives
//      h(c_u, c_l; v) = h(c_l, c_u; R_x v); the LOR (c_l, c_u) has signs (-,-), and the y and z mirrors
//      (the layout's tap_voxel) bring it back to the (+,+) patch: with v_y = D c_uy + dy on the
//      left, v_y = D c_ly + D - 1 - dy' = D c_uy + D a_y + D - 1 - dy' on the right, so
//        patch(k, P-1-p)(dy, dz) = patch(k, p)(D-1 + D a_y - dy, D-1 + D a_z - dz)
//      (tests/test_dualhead_model.py checks it on h directly). The map reverses the (dz, dy) order.
//   4. taps below threshold x (the class's largest tap over all planes: the per-LOR maximum) dropped.
//
// Cost. At full size (104 x 72 crystals, D = 4, 119 planes) the planes x <= 0 hold 1.146e8
// candidates (2.273e8 over all planes; patch_candidate_counts). A candidate is n_v^3 = 8 points of
// ~50 direction nodes each (~380 nodes, measured over classes from (0,0) to (103,71) with n_a = 4);
// a node is two photon walks (a few reciprocals, an expm1, an exp when the photon crosses other
// crystals first, a handful of crystal intervals) plus a sqrt and a division: ~300-400 FP64
// instructions. So a build is ~1.1e8 x 380 x 350 ~ 1.5e13 FP64 instructions: ~1 s at an H100 /
// H200's FP64 vector peak (34 TFLOP/s ~ 1.7e13 FMA-instructions/s); at a realistic 10-25 % of peak
// (168 registers: 12 resident warps per SM; divergent loops) 4-10 s. The host side (candidates
// ~0.3 s on one core, assembly, 24 bytes per evaluation over PCIe ~0.3 s) adds about a second.
// On the CPU (this 2-core machine, shared): ~50 us per candidate per core, from 10 us (class (0,0))
// to 76 us ((103,71)): 0.01 s to 2.2 s per class, 0.8 s mean, ~1.6 h single-threaded for the whole
// model (a 24-class sample at 2 threads extrapolates to 3300 s).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "../common/errors.hpp"
#include "response_api.hpp"

namespace dp::dualhead {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

int centre_plane(const ResponseParams& P) { return (P.n_planes - 1) / 2; }

// Candidates of class (a_y, a_z) at each plane p <= centre.
void count_class(const ResponseParams& P, int a_y, int a_z, int64_t& evaluated, int64_t& all_planes) {
    const int pc = centre_plane(P);
    evaluated = all_planes = 0;
    for (int p = 0; p <= pc; ++p) {
        int64_t n = 0;
        for_each_candidate(P, a_y, a_z, p, [&](int, int) { ++n; });
        evaluated += n;
        all_planes += (p == pc ? 1 : 2) * n;  // plane P-1-p mirrors plane p
    }
}

// The kept taps of one class, all planes.
struct ClassTaps {
    std::vector<int32_t> row_count;
    std::vector<int16_t> dy, dz;
    std::vector<float> w;
    int64_t dropped = 0;
};

ClassTaps assemble_class(const ResponseParams& P, int a_y, int a_z, const Query* q, const double* h, int64_t n,
                         const std::vector<int64_t>& plane_start, double threshold) {
    ClassTaps T;
    const int pc = centre_plane(P), D = P.D;
    T.row_count.assign(P.n_planes, 0);
    double hmax = 0.0;
    for (int64_t i = 0; i < n; ++i) hmax = std::max(hmax, h[i]);
    const double cut = threshold * hmax;
    std::vector<char> keep(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const bool positive = static_cast<float>(h[i]) > 0.0f;
        keep[i] = positive && h[i] >= cut;
        if (positive && !keep[i]) ++T.dropped;
    }
    // planes x <= 0 as evaluated (candidates come in (dz, dy) order)
    for (int p = 0; p <= pc; ++p)
        for (int64_t i = plane_start[p]; i < plane_start[p + 1]; ++i) {
            if (!keep[i]) continue;
            T.dy.push_back(static_cast<int16_t>(q[i].a - D * q[i].ouy));
            T.dz.push_back(static_cast<int16_t>(q[i].b - D * q[i].ouz));
            T.w.push_back(static_cast<float>(h[i]));
            ++T.row_count[p];
        }
    // planes x > 0 by the x-reflection identity, in reverse order so that (dz, dy) stays ascending
    const int my = D - 1 + D * a_y, mz = D - 1 + D * a_z;
    for (int p = pc + 1; p < P.n_planes; ++p) {
        const int src = P.n_planes - 1 - p;
        for (int64_t i = plane_start[src + 1] - 1; i >= plane_start[src]; --i) {
            if (!keep[i]) continue;
            T.dy.push_back(static_cast<int16_t>(my - (q[i].a - D * q[i].ouy)));
            T.dz.push_back(static_cast<int16_t>(mz - (q[i].b - D * q[i].ouz)));
            T.w.push_back(static_cast<float>(h[i]));
            ++T.row_count[p];
        }
    }
    return T;
}

}  // namespace

void patch_candidates(const ResponseParams& P, const int32_t* classes, int n_listed, int n_z, int64_t* evaluated,
                      int64_t* all_planes) {
#pragma omp parallel for schedule(dynamic, 8)
    for (int i = 0; i < n_listed; ++i) count_class(P, classes[i] / n_z, classes[i] % n_z, evaluated[i], all_planes[i]);
}

PatchBuild build_patches(const ResponseParams& P, int n_y, int n_z, const int32_t* classes, int n_listed,
                         double threshold, int64_t chunk, const Evaluator& eval, const BuildHook& hook) {
    if (n_listed < 1) throw ValueError("classes: expected at least one class");
    for (int i = 0; i < n_listed; ++i) {
        if (classes[i] < 0 || classes[i] >= n_y * n_z)
            throw ValueError("classes: index " + std::to_string(classes[i]) + " outside [0, " +
                             std::to_string(n_y * n_z) + ")");
        if (i && classes[i] <= classes[i - 1]) throw ValueError("classes: expected ascending, unique class indices");
    }
    if (!(threshold >= 0.0 && threshold < 1.0))
        throw ValueError("threshold: expected a value in [0, 1), got " + std::to_string(threshold));
    if (chunk < 1) throw ValueError("chunk: expected a positive number of evaluations per batch");

    const int pc = centre_plane(P);
    PatchBuild B;
    auto t0 = Clock::now();
    std::vector<int64_t> n_eval(n_listed), n_all(n_listed);
    patch_candidates(P, classes, n_listed, n_z, n_eval.data(), n_all.data());
    for (int i = 0; i < n_listed; ++i) {
        B.candidates += n_all[i];
        B.evaluated += n_eval[i];
    }
    B.seconds_generate += seconds_since(t0);

    const int64_t n_rows = int64_t(n_y) * n_z * P.n_planes;
    std::vector<int64_t> row_count(static_cast<size_t>(n_rows), 0);
    std::vector<Query> queries;
    std::vector<double> h;
    for (int first = 0; first < n_listed;) {
        // a chunk of whole classes holding at most `chunk` evaluations (at least one class)
        int last = first + 1;
        int64_t n = n_eval[first];
        while (last < n_listed && n + n_eval[last] <= chunk) n += n_eval[last++];
        const int m = last - first;
        std::vector<int64_t> offset(m + 1, 0);
        for (int i = 0; i < m; ++i) offset[i + 1] = offset[i] + n_eval[first + i];

        t0 = Clock::now();
        queries.resize(static_cast<size_t>(n));
        h.resize(static_cast<size_t>(n));
        std::vector<std::vector<int64_t>> plane_start(m);
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < m; ++i) {
            const int k = classes[first + i], a_y = k / n_z, a_z = k % n_z;
            Query* out = queries.data() + offset[i];
            int64_t j = 0;
            plane_start[i].assign(pc + 2, 0);
            for (int p = 0; p <= pc; ++p) {
                for_each_candidate(P, a_y, a_z, p, [&](int dy, int dz) {
                    const int cy = dy / P.D, cz = dz / P.D;  // the voxel's crystal cell (dy, dz >= 0)
                    Query& q = out[j++];
                    q.ouy = static_cast<int16_t>(-cy);
                    q.ouz = static_cast<int16_t>(-cz);
                    q.oly = static_cast<int16_t>(a_y - cy);
                    q.olz = static_cast<int16_t>(a_z - cz);
                    q.a = static_cast<int16_t>(dy - P.D * cy);
                    q.b = static_cast<int16_t>(dz - P.D * cz);
                    q.p = static_cast<int16_t>(p);
                    q.pad = 0;
                });
                plane_start[i][p + 1] = j;
            }
        }
        B.seconds_generate += seconds_since(t0);

        t0 = Clock::now();
        if (n > 0) eval(queries.data(), n, h.data());
        B.seconds_evaluate += seconds_since(t0);

        t0 = Clock::now();
        std::vector<ClassTaps> taps(m);
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < m; ++i) {
            const int k = classes[first + i];
            taps[i] = assemble_class(P, k / n_z, k % n_z, queries.data() + offset[i], h.data() + offset[i],
                                     offset[i + 1] - offset[i], plane_start[i], threshold);
        }
        for (int i = 0; i < m; ++i) {
            const int64_t k = classes[first + i];
            for (int p = 0; p < P.n_planes; ++p) row_count[k * P.n_planes + p] = taps[i].row_count[p];
            B.tap_dy.insert(B.tap_dy.end(), taps[i].dy.begin(), taps[i].dy.end());
            B.tap_dz.insert(B.tap_dz.end(), taps[i].dz.begin(), taps[i].dz.end());
            B.tap_w.insert(B.tap_w.end(), taps[i].w.begin(), taps[i].w.end());
            B.dropped_below += taps[i].dropped;
        }
        B.seconds_assemble += seconds_since(t0);
        first = last;
        if (hook) hook(first, n_listed);
    }
    B.tap_start.assign(static_cast<size_t>(n_rows) + 1, 0);
    for (int64_t r = 0; r < n_rows; ++r) B.tap_start[r + 1] = B.tap_start[r] + row_count[r];
    return B;
}

}  // namespace dp::dualhead
