// The FIRST projector model on the host: Super-LOR tables, the ring-difference groups and the
// folded slice taps derived from them (used by the CPU projectors and uploaded by the CUDA ones),
// the angle lists and the method names.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "model.hpp"

namespace dp::first {

HostModel make_model(const Dims& D, int n_angles, const float* table, const int* super_of_delta,
                     const unsigned char* flip_k, const float* slope) {
    require(D.n > 0 && D.n_rows > 0 && D.nz == 2 * D.n_rows - 1 && D.J >= 0 && D.K >= 0 && D.n_super > 0,
            "model: inconsistent sizes");
    require(n_angles > 0, "n_angles: expected a positive number of angles");
    HostModel M;
    M.D = D;
    M.n_angles = n_angles;
    const int nd = D.n_deltas();
    M.table.assign(table, table + static_cast<int64_t>(D.n_super) * D.n * D.n_j() * D.n_k());
    M.super_of_delta.assign(super_of_delta, super_of_delta + nd);
    M.flip_k.assign(flip_k, flip_k + nd);
    M.slope.assign(slope, slope + nd);
    for (int d = 0; d < nd; ++d) {
        require(M.super_of_delta[d] >= 0 && M.super_of_delta[d] < D.n_super,
                "super_of_delta: index outside [0, n_super)");
        // the axial offsets (i - c) * slope become int slice indices: keep them far from overflow
        require(std::isfinite(M.slope[d]) && std::fabs(M.slope[d]) * D.centre() < 1.0e6f,
                "slope: expected finite slopes with axial offsets below 10^6 slices");
    }
    M.Q.assign(static_cast<int64_t>(nd) * D.n * D.n_j() * D.n_taps(), 0.0f);
    M.base.assign(static_cast<int64_t>(nd) * D.n, 0);
    const float c = D.centre();
    std::vector<float> P(D.n_k());
    M.base_min = M.base_max = 0;
    for (int d = 0; d < nd; ++d) {
        const int S = M.super_of_delta[d];
        for (int i = 0; i < D.n; ++i) {
            const Taps a = axial_taps(i, c, M.slope[d]);
            M.base[static_cast<int64_t>(d) * D.n + i] = a.i0;
            M.base_min = std::min(M.base_min, a.i0);
            M.base_max = std::max(M.base_max, a.i0);
            for (int jj = 0; jj < D.n_j(); ++jj) {
                for (int kk = 0; kk < D.n_k(); ++kk) {
                    const int kt = M.flip_k[d] ? D.n_k() - 1 - kk : kk;
                    P[kk] = M.table[table_index(D, S, i, jj, kt)];
                }
                fold_axial(P.data(), D.K, a.w1, &M.Q[q_index(D, d, i, jj, 0)]);
            }
        }
    }
    // group the ring differences by (Super-LOR, mirror) for the faithful back projector
    std::vector<int> order(nd);
    for (int d = 0; d < nd; ++d) order[d] = d;
    auto key = [&](int d) { return 2 * M.super_of_delta[d] + (M.flip_k[d] ? 1 : 0); };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
    M.delta_order = order;
    for (int e = 0; e < nd; ++e)
        if (e == 0 || key(order[e]) != key(order[e - 1])) {
            M.group_start.push_back(e);
            M.group_super.push_back(M.super_of_delta[order[e]]);
            M.group_flip.push_back(M.flip_k[order[e]]);
        }
    M.group_start.push_back(nd);
    return M;
}

AngleList make_angles(const int* angles, int n_sel, int n_angles) {
    require(n_sel > 0, "angles: expected at least one angle");
    AngleList A;
    for (int k = 0; k < n_sel; ++k) {
        require(angles[k] >= 0 && angles[k] < n_angles, "angles: index outside [0, n_angles)");
        const double phi = M_PI * angles[k] / n_angles;
        A.index.push_back(angles[k]);
        A.cos.push_back(static_cast<float>(std::cos(phi)));
        A.sin.push_back(static_cast<float>(std::sin(phi)));
    }
    return A;
}

Method parse_method(const std::string& name) {
    if (name == "faithful") return Method::Faithful;
    if (name == "matched") return Method::Matched;
    if (name == "fast" || name == "default") return Method::Fast;
    throw ValueError("method: expected 'faithful', 'matched' or 'fast', got '" + name + "'");
}

}  // namespace dp::first
