// Helpers shared by the CPU and CUDA bindings of the dual-head analytic model (dualhead_model*.cpp).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

#include "../dualhead/response_api.hpp"

namespace dp::bind {

namespace py = pybind11;

// DualHeadScanner's dict -> ScannerSpec (missing key: ValueError, wrong type: TypeError).
dualhead::ScannerSpec dualhead_scanner(const py::dict& d);
// Checked (n, 2) / (n, 2) / (n, 3) int32 arrays -> queries (voxel plane in range, offsets fit int16).
std::vector<dualhead::Query> dualhead_queries(const dualhead::ResponseParams& P, const py::array& c_u,
                                              const py::array& c_l, const py::array& voxel);
// 1-D int32 class list (values are checked by the builder).
std::vector<int32_t> dualhead_classes(const py::array& classes);
// Ctrl-C check and the Python progress callback between chunks.
dualhead::BuildHook dualhead_hook(const py::object& progress);
// The builder's arrays and statistics as a dict.
py::dict dualhead_build_result(const dualhead::PatchBuild& B);

}  // namespace dp::bind
