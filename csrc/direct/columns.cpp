#include "columns.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <utility>

namespace dp::direct {

std::vector<KernelColumn> kernel_columns(const LutRef& lut, const Dims& d, int halo[3]) {
    halo[0] = halo[1] = halo[2] = 0;
    std::map<std::pair<int, int>, std::map<int, int>> by_column;  // (dy, dx) -> dz -> i
    for (int i = 0; i < lut.n_offsets; ++i) {
        const int dz = lut.offsets[3 * i], dy = lut.offsets[3 * i + 1], dx = lut.offsets[3 * i + 2];
        if (std::abs(dz) >= d.nz || std::abs(dy) >= d.ny || std::abs(dx) >= d.nx) continue;
        by_column[{dy, dx}][dz] = i;
        halo[0] = std::max(halo[0], std::abs(dz));
        halo[1] = std::max(halo[1], std::abs(dy));
        halo[2] = std::max(halo[2], std::abs(dx));
    }
    std::vector<KernelColumn> cols;
    cols.reserve(by_column.size());
    for (const auto& [yx, dzs] : by_column) {
        KernelColumn c{yx.first, yx.second, dzs.begin()->first, {}};
        // Ellipsoid (convex) supports give contiguous dz runs; fill any gap of a user-made
        // support with separate columns so the run stays contiguous.
        int expect = c.dz_min;
        for (const auto& [dz, i] : dzs) {
            if (dz != expect) {
                cols.push_back(c);
                c = KernelColumn{yx.first, yx.second, dz, {}};
            }
            c.taps.push_back(i);
            expect = dz + 1;
        }
        cols.push_back(std::move(c));
    }
    return cols;
}

}  // namespace dp::direct
