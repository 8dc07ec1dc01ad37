// The kernel support mSR regrouped by transaxial offset: offsets sharing (dy, dx) read the same
// neighbour column and, because LORmap is 2D, the same neighbour identifier. Within a column the
// dz values of an ellipsoid form one contiguous run. Both backends build their loops from this.
#pragma once

#include <vector>

#include "worker.hpp"

namespace dp::direct {

struct KernelColumn {
    int dy, dx;
    int dz_min;
    std::vector<int> taps;  // offset index i for dz = dz_min, dz_min + 1, ... (contiguous run)
};

// Columns of the offsets that can reach inside a volume of the given size (|d_k| < n_k on every
// axis; the others only ever read zeros), sorted by (dy, dx). Returns the halo (largest |d| per
// axis over the kept offsets) in halo_zyx.
std::vector<KernelColumn> kernel_columns(const LutRef& lut, const Dims& dims, int halo_zyx[3]);

}  // namespace dp::direct
