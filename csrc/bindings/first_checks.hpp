// Argument checks of the FIRST bindings (CPU and CUDA): images, sinograms and angle lists.
#pragma once

#include <pybind11/numpy.h>

#include <string>

#include "../first/model.hpp"
#include "arrays.hpp"

namespace dp::bind {

inline void check_image(const py::array& a, const char* name, const first::Dims& D) {
    check_array<float>(a, name, {D.nz, D.n, D.n});
}

inline void check_sinogram(const py::array& a, const char* name, const first::Dims& D, int n_sel) {
    check_array<float>(a, name, {n_sel, D.n_rows, D.n_rows, D.n});
}

// The angle list: int32 indices in [0, n_angles) of the model's full sinogram.
inline first::AngleList checked_angles(const py::array& angles, const first::HostModel& M) {
    check_array<int32_t>(angles, "angles", {-1});
    return first::make_angles(data_of<int32_t>(angles), static_cast<int>(angles.shape(0)), M.n_angles);
}

}  // namespace dp::bind
