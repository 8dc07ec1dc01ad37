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

py::array_t<double> response_cuda(const py::dict& scanner, const py::array& c_u, const py::array& c_l,
                                  const py::array& voxel, int angle_samples, int voxel_samples) {
    const auto P = dualhead::make_response_params(dualhead_scanner(scanner), angle_samples, voxel_samples);
    const std::vector<dualhead::Query> q = dualhead_queries(P, c_u, c_l, voxel);
    py::array_t<double> out(static_cast<py::ssize_t>(q.size()));
    double* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        dualhead::gpu::evaluate(P, q.data(), static_cast<int64_t>(q.size()), o);
    }
    return out;
}

py::dict build_cuda(const py::dict& scanner, int angle_samples, int voxel_samples, double threshold,
                    const py::array& classes, long long chunk, const py::object& progress) {
    const dualhead::ScannerSpec s = dualhead_scanner(scanner);
    const auto P = dualhead::make_response_params(s, angle_samples, voxel_samples);
    const std::vector<int32_t> k = dualhead_classes(classes);
    const dualhead::BuildHook hook = dualhead_hook(progress);
    const dualhead::Evaluator eval = [P](const dualhead::Query* q, int64_t n, double* out) {
        dualhead::gpu::evaluate(P, q, n, out);
    };
    dualhead::PatchBuild B;
    {
        py::gil_scoped_release release;
        B = dualhead::build_patches(P, s.n_y, s.n_z, k.data(), static_cast<int>(k.size()), threshold, chunk, eval,
                                    hook);
    }
    return dualhead_build_result(B);
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
