#include "model.hpp"

namespace dp::dualhead {

HostModel make_model(const Layout& L, const int64_t* tap_start, const int16_t* dy, const int16_t* dz,
                     const float* w, int64_t n_taps) {
    if (L.n_y <= 0 || L.n_z <= 0 || L.D <= 0 || L.n_planes <= 0)
        throw ValueError("scanner: expected positive n_y, n_z, voxels_per_crystal and n_planes");
    HostModel M;
    M.L = L;
    const int64_t n_rows = int64_t(L.n_classes()) * L.n_planes;
    M.tap_start.assign(tap_start, tap_start + n_rows + 1);
    if (M.tap_start[0] != 0 || M.tap_start[n_rows] != n_taps)
        throw ValueError("tap_start: expected 0 first and the number of taps last");
    for (int64_t r = 0; r < n_rows; ++r)
        if (M.tap_start[r + 1] < M.tap_start[r]) throw ValueError("tap_start: expected non-decreasing offsets");
    M.tap_dy.assign(dy, dy + n_taps);
    M.tap_dz.assign(dz, dz + n_taps);
    M.tap_w.assign(w, w + n_taps);
    for (int64_t r = 0; r < n_rows; ++r) {
        const ClassInfo c = class_info(L, int(r / L.n_planes));
        for (int64_t t = M.tap_start[r]; t < M.tap_start[r + 1]; ++t) {
            if (M.tap_dy[t] < 0 || M.tap_dy[t] >= L.D * (c.a_y + 1))
                throw ValueError("tap_dy: offset outside the crystal cells between c_u and c_l");
            if (M.tap_dz[t] < 0 || M.tap_dz[t] >= L.D * (c.a_z + 1))
                throw ValueError("tap_dz: offset outside the crystal cells between c_u and c_l");
            if (!(M.tap_w[t] > 0.0f) || !(M.tap_w[t] < 3.0e38f))
                throw ValueError("tap_w: expected finite positive weights");
            if (t > M.tap_start[r] && (M.tap_dz[t] < M.tap_dz[t - 1] ||
                                       (M.tap_dz[t] == M.tap_dz[t - 1] && M.tap_dy[t] <= M.tap_dy[t - 1])))
                throw ValueError("tap_dy/tap_dz: taps of one (class, plane) must be sorted by (dz, dy) and unique");
        }
    }
    return M;
}

}  // namespace dp::dualhead
