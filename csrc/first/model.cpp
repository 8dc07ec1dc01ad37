// The FIRST projector model on the host: Super-LOR tables, the ring-difference groups and the
// folded slice taps derived from them (used by the CPU projectors and uploaded by the CUDA ones),
// the angle lists and the method names.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "model.hpp"

namespace dp::first {

namespace {

// One Sutherland-Hodgman step: the part of polygon (x, y)[0..n) where sign * (coordinate - bound) >= 0
// (coordinate y when along_y, else x). Returns the new vertex count (at most n + 1).
int clip_polygon(const double* x, const double* y, int n, bool along_y, double bound, double sign, double* ox,
                 double* oy) {
    int m = 0;
    for (int k = 0; k < n; ++k) {
        const int p = k == 0 ? n - 1 : k - 1;
        const double ep = sign * ((along_y ? y[p] : x[p]) - bound);
        const double ek = sign * ((along_y ? y[k] : x[k]) - bound);
        if ((ep >= 0.0) != (ek >= 0.0)) {          // the side from p to k crosses the boundary
            const double t = ep / (ep - ek);
            ox[m] = x[p] + t * (x[k] - x[p]);
            oy[m] = y[p] + t * (y[k] - y[p]);
            ++m;
        }
        if (ek >= 0.0) {
            ox[m] = x[k];
            oy[m] = y[k];
            ++m;
        }
    }
    return m;
}

// The footprint tables (tube.hpp) of every angle, in double precision, stored as float.
void build_footprints(HostModel& M) {
    const Dims& D = M.D;
    const int rows = D.n_rows_ext();
    const int64_t cells = static_cast<int64_t>(M.n_angles) * D.n * rows;
    M.fp_weight.assign(cells * kFootprintSlots, 0.0f);
    M.fp_origin.assign(cells, FootprintOrigin{0, 0});
    const double c = 0.5 * (D.n - 1);
#pragma omp parallel for collapse(2) schedule(static)
    for (int a = 0; a < M.n_angles; ++a)
        for (int i = 0; i < D.n; ++i) {
            const double phi = M_PI * a / M.n_angles, cp = std::cos(phi), sp = std::sin(phi);
            const double reach = footprint_reach(cp, sp);
            for (int rr = 0; rr < rows; ++rr) {
                double fx, fy;
                lattice_point(i, rr - D.J, c, cp, sp, &fx, &fy);
                const int ix0 = static_cast<int>(std::floor(fx - reach)) + 1;
                const int iy0 = static_cast<int>(std::floor(fy - reach)) + 1;
                const int64_t cell = (static_cast<int64_t>(a) * D.n + i) * rows + rr;
                M.fp_origin[cell] = FootprintOrigin{static_cast<int16_t>(ix0), static_cast<int16_t>(iy0)};
                float* w = &M.fp_weight[cell * kFootprintSlots];
                for (int oy = 0; oy < kFootprintSide; ++oy)
                    for (int ox = 0; ox < kFootprintSide; ++ox) {
                        const double area = cell_voxel_overlap(ix0 + ox - fx, iy0 + oy - fy, cp, sp);
                        // slivers of rounding where the squares only touch are no overlap
                        w[oy * kFootprintSide + ox] = area > 1e-12 ? static_cast<float>(area) : 0.0f;
                    }
            }
        }
}

}  // namespace

double cell_voxel_overlap(double dx, double dy, double cos_phi, double sin_phi) {
    const double reach = footprint_reach(cos_phi, sin_phi);
    const double du = dx * cos_phi + dy * sin_phi, dv = -dx * sin_phi + dy * cos_phi;
    if (std::fabs(dx) >= reach || std::fabs(dy) >= reach || std::fabs(du) >= reach || std::fabs(dv) >= reach)
        return 0.0;                                 // separated along an image or a lattice axis
    // the cell's corners (u, v) = (+-1/2, +-1/2) counter-clockwise, at x = u c - v s, y = u s + v c
    double x[8], y[8], tx[8], ty[8];
    const double hc = 0.5 * cos_phi, hs = 0.5 * sin_phi;
    x[0] = hc + hs, y[0] = hs - hc;
    x[1] = hc - hs, y[1] = hs + hc;
    x[2] = -hc - hs, y[2] = -hs + hc;
    x[3] = -hc + hs, y[3] = -hs - hc;
    int n = 4;
    n = clip_polygon(x, y, n, false, dx - 0.5, 1.0, tx, ty);
    n = clip_polygon(tx, ty, n, false, dx + 0.5, -1.0, x, y);
    n = clip_polygon(x, y, n, true, dy - 0.5, 1.0, tx, ty);
    n = clip_polygon(tx, ty, n, true, dy + 0.5, -1.0, x, y);
    double twice = 0.0;                             // shoelace
    for (int k = 0; k < n; ++k) {
        const int p = k == 0 ? n - 1 : k - 1;
        twice += x[p] * y[k] - x[k] * y[p];
    }
    return 0.5 * std::fabs(twice);
}

HostModel make_model(const Dims& D, int n_angles, const float* table, const int* super_of_delta,
                     const unsigned char* flip_k, const float* slope) {
    require(D.n > 0 && D.n_rows > 0 && D.nz == 2 * D.n_rows - 1 && D.J >= 0 && D.K >= 0 && D.n_super > 0,
            "model: inconsistent sizes");
    require(n_angles > 0, "n_angles: expected a positive number of angles");
    // the footprint origins are int16: a lattice point lies within sqrt(2) (c + J) of the centre c
    require(0.5 * (D.n - 1) * (1.0 + M_SQRT2) + M_SQRT2 * D.J + 3.0 < 32767.0,
            "n: the footprint origins are 16-bit: expected fewer than about 27000 radial bins");
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
    build_footprints(M);
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
