// DIRECT per-voxel projection math, written once for the OpenMP and CUDA backends.
//
// With d_i = mSR[i] (offsets (dz, dy, dx)), flip(i) the index of -d_i and a(y, x) = LORmap[y, x]:
//   back    (gather with own kernel):        out(r) = sum_i g(r + d_i) * mSRval[a(r)][i]
//   forward (scatter written as a gather):   out(r) = sum_i x(r + d_i) * mSRval[a(r + d_i)][flip(i)]
// Voxels outside the volume count as zero in both, which keeps the pair an exact transpose.
#pragma once

#include <cstdint>

#include "../common/hd.hpp"

namespace dp::direct {

// Read-only view of one view's LUTs (device or host pointers).
struct LutRef {
    const int32_t* lormap;   // (ny, nx) kernel identifiers in [0, n_kernels)
    const int32_t* offsets;  // (n_offsets, 3) as (dz, dy, dx), point-symmetric order
    const int32_t* flip;     // (n_offsets,) index of the negated offset
    const float* values;     // (n_kernels, n_offsets), unit sum per row
    int n_offsets;
    int n_kernels;
};

struct Dims {
    int nz, ny, nx;
};

// Which kernel row and column weight offset i of a voxel whose own identifier is `own_id`
// (back projection), or whose neighbour at +d_i has identifier `neighbour_id` (forward).
DP_HD int back_weight_index(int own_id, int i, int n_offsets) { return own_id * n_offsets + i; }
DP_HD int forward_weight_index(int neighbour_id, int flipped_i, int n_offsets) {
    return neighbour_id * n_offsets + flipped_i;
}

DP_HD bool inside(const Dims& d, int z, int y, int x) {
    return z >= 0 && z < d.nz && y >= 0 && y < d.ny && x >= 0 && x < d.nx;
}

// One output voxel, bounds-checked (the paper's thread-level form). kForward selects the
// scatter-as-gather forward projection, otherwise the gather back projection.
template <bool kForward>
DP_HD float project_voxel(const float* src, const Dims& d, const LutRef& lut, int z, int y, int x) {
    const int own_id = lut.lormap[y * d.nx + x];
    float acc = 0.0f;
    for (int i = 0; i < lut.n_offsets; ++i) {
        const int sz = z + lut.offsets[3 * i], sy = y + lut.offsets[3 * i + 1],
                  sx = x + lut.offsets[3 * i + 2];
        if (!inside(d, sz, sy, sx)) continue;
        const int w = kForward ? forward_weight_index(lut.lormap[sy * d.nx + sx], lut.flip[i], lut.n_offsets)
                               : back_weight_index(own_id, i, lut.n_offsets);
        acc += src[(static_cast<long long>(sz) * d.ny + sy) * d.nx + sx] * lut.values[w];
    }
    return acc;
}

}  // namespace dp::direct
