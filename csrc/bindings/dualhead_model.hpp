// Helpers shared by the CPU and CUDA bindings of the dual-head analytic model (dualhead_model*.cpp).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <functional>
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

// A backend's evaluation of h for given parameters (CPU: OpenMP; CUDA: the current device).
using EvaluatorFactory = std::function<dualhead::Evaluator(const dualhead::ResponseParams&)>;
// h (float64, (n,)) of the checked (c_u, c_l, voxel) queries, evaluated by the backend (GIL released).
py::array_t<double> dualhead_response(const py::dict& scanner, const py::array& c_u, const py::array& c_l,
                                      const py::array& voxel, int angle_samples, int voxel_samples,
                                      const EvaluatorFactory& backend);
// The patch build of the listed classes, its response evaluated by the backend (GIL released).
py::dict dualhead_build(const py::dict& scanner, int angle_samples, int voxel_samples, double threshold,
                        const py::array& classes, long long chunk, const py::object& progress,
                        const EvaluatorFactory& backend);

}  // namespace dp::bind
