// pybind11 bindings of the dual-head analytic model's CUDA evaluation (compiled with the CUDA backend
// only): the same host arrays as dualhead_model.cpp, h evaluated on the current device.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../dualhead/response_api.hpp"
#include "arrays.hpp"
#include "dualhead_model.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

// h evaluated on the current CUDA device.
dualhead::Evaluator gpu_evaluator(const dualhead::ResponseParams& P) {
    return [P](const dualhead::Query* q, int64_t n, double* out) { dualhead::gpu::evaluate(P, q, n, out); };
}

py::array_t<double> response_cuda(const py::dict& scanner, const py::array& c_u, const py::array& c_l,
                                  const py::array& voxel, int angle_samples, int voxel_samples) {
    return dualhead_response(scanner, c_u, c_l, voxel, angle_samples, voxel_samples, gpu_evaluator);
}

py::dict build_cuda(const py::dict& scanner, int angle_samples, int voxel_samples, double threshold,
                    const py::array& classes, long long chunk, const py::object& progress) {
    return dualhead_build(scanner, angle_samples, voxel_samples, threshold, classes, chunk, progress, gpu_evaluator);
}

}  // namespace

void register_dualhead_model_cuda(py::module_& m) {
    m.def("dualhead_response_cuda", &response_cuda, py::arg("scanner"), py::arg("c_u"), py::arg("c_l"),
          py::arg("voxel"), py::arg("angle_samples"), py::arg("voxel_samples"),
          "As dualhead_response_cpu, h evaluated on the current CUDA device.");
    m.def("dualhead_build_patches_cuda", &build_cuda, py::arg("scanner"), py::arg("angle_samples"),
          py::arg("voxel_samples"), py::arg("threshold"), py::arg("classes"), py::arg("chunk"),
          py::arg("progress") = py::none(),
          "As dualhead_build_patches_cpu with h evaluated on the current CUDA device (candidates and "
          "assembly on the host).");
}

}  // namespace dp::bind
