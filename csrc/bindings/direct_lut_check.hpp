// Validation of one view's LUT arrays before any backend indexes with them: identifiers in range,
// flip a permutation that negates offsets. A bad LUT is a ValueError, never an out-of-bounds read.
#pragma once

#include <pybind11/numpy.h>

#include <string>

#include "../direct/worker.hpp"
#include "arrays.hpp"

namespace dp::bind {

inline direct::LutRef checked_lut(const py::array& lormap, const py::array& offsets,
                                  const py::array& flip, const py::array& values,
                                  const direct::Dims& d) {
    check_array<int32_t>(lormap, "lormap", {d.ny, d.nx});
    check_array<int32_t>(offsets, "offsets", {-1, 3});
    const auto n = static_cast<py::ssize_t>(offsets.shape(0));
    if (n == 0) throw ValueError("offsets: the kernel support is empty");
    check_array<int32_t>(flip, "flip", {n});
    check_array<float>(values, "values", {-1, n});
    const auto nk = static_cast<int>(values.shape(0));
    if (nk == 0) throw ValueError("values: needs at least one kernel row");
    const auto* ids = data_of<int32_t>(lormap);
    for (py::ssize_t k = 0; k < lormap.size(); ++k)
        if (ids[k] < 0 || ids[k] >= nk)
            throw ValueError("lormap: identifier " + std::to_string(ids[k]) + " outside [0, " +
                             std::to_string(nk) + ") (values has " + std::to_string(nk) + " rows)");
    const auto* o = data_of<int32_t>(offsets);
    const auto* f = data_of<int32_t>(flip);
    for (py::ssize_t i = 0; i < n; ++i) {
        const int j = f[i];
        if (j < 0 || j >= n || o[3 * j] != -o[3 * i] || o[3 * j + 1] != -o[3 * i + 1] ||
            o[3 * j + 2] != -o[3 * i + 2])
            throw ValueError("flip: entry " + std::to_string(i) +
                             " does not point at the negated offset");
    }
    return {ids, o, f, data_of<float>(values), static_cast<int>(n), nk};
}

}  // namespace dp::bind
