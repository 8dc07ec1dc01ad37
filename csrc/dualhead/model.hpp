// The dual-head patch model on the host (the arrays of directpet.dualhead.PatchModel) and the
// validated class list of a projection call. Shared by the CPU projectors and the CUDA upload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "layout.hpp"

namespace dp::dualhead {

// CSR over rows r = k * n_planes + p: taps [tap_start[r], tap_start[r+1]) of class k at plane p.
struct HostModel {
    Layout L;
    std::vector<int64_t> tap_start;   // n_classes * n_planes + 1
    std::vector<int16_t> tap_dy, tap_dz;
    std::vector<float> tap_w;

    int64_t n_taps() const { return tap_start.empty() ? 0 : tap_start.back(); }
    int64_t row_begin(int k, int p) const { return tap_start[int64_t(k) * L.n_planes + p]; }
    int64_t row_end(int k, int p) const { return tap_start[int64_t(k) * L.n_planes + p + 1]; }
};

// A projection's classes (indices into the model's classes, in the caller's order) and the start
// of each class's block in the caller's LOR vector (offset.back() = its length).
struct ClassList {
    std::vector<int32_t> index;
    std::vector<int64_t> offset;
    int64_t n_lors() const { return offset.empty() ? 0 : offset.back(); }
};

inline ClassList make_class_list(const Layout& L, const int32_t* classes, int n) {
    if (n <= 0) throw ValueError("classes: expected at least one class");
    ClassList C;
    C.index.assign(classes, classes + n);
    C.offset.resize(size_t(n) + 1, 0);
    for (int a = 0; a < n; ++a) {
        const int k = C.index[a];
        if (k < 0 || k >= L.n_classes())
            throw ValueError("classes: index " + std::to_string(k) + " outside [0, " +
                             std::to_string(L.n_classes()) + ")");
        C.offset[a + 1] = C.offset[a] + class_info(L, k).n_lors();
    }
    return C;
}

// Validates the arrays (lengths, offsets inside the crystal cells of each class, finite positive
// weights, taps of a row sorted by (dz, dy) and unique) and copies them.
HostModel make_model(const Layout& L, const int64_t* tap_start, const int16_t* dy, const int16_t* dz,
                     const float* w, int64_t n_taps);

}  // namespace dp::dualhead
