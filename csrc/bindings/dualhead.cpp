// pybind11 bindings of the dual-head family: the patch model (DualHeadModel) and the CPU projectors
// (the CUDA ones are added by dualhead_cuda.cpp when the CUDA backend is compiled in).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../dualhead/model.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

template <typename T>
void check_typed(const py::array& a, const char* name, const char* dtype, py::ssize_t n) {
    if (!a.dtype().is(py::dtype::of<T>()))
        throw TypeError(std::string(name) + ": expected dtype " + dtype + ", got " + std::string(py::str(a.dtype())));
    if (a.ndim() != 1 || (n >= 0 && a.shape(0) != n))
        throw ValueError(std::string(name) + ": expected a 1-D array" +
                         (n >= 0 ? " of length " + std::to_string(n) : std::string()) + ", got shape " + shape_str(a));
    if (!(a.flags() & py::array::c_style)) throw ValueError(std::string(name) + ": array must be C-contiguous");
}

dualhead::HostModel build_model(int n_y, int n_z, int D, int n_planes, const py::array& tap_start,
                                const py::array& tap_dy, const py::array& tap_dz, const py::array& tap_w) {
    const dualhead::Layout L{n_y, n_z, D, n_planes};
    if (n_y <= 0 || n_z <= 0 || D <= 0 || n_planes <= 0)
        throw ValueError("scanner: expected positive n_y, n_z, voxels_per_crystal and n_planes");
    check_typed<int64_t>(tap_start, "tap_start", "int64", int64_t(L.n_classes()) * n_planes + 1);
    const py::ssize_t n = tap_w.ndim() == 1 ? tap_w.shape(0) : -1;
    check_typed<float>(tap_w, "tap_w", "float32", -1);
    check_typed<int16_t>(tap_dy, "tap_dy", "int16", n);
    check_typed<int16_t>(tap_dz, "tap_dz", "int16", n);
    const auto* s = static_cast<const int64_t*>(tap_start.data());
    const auto* dy = static_cast<const int16_t*>(tap_dy.data());
    const auto* dz = static_cast<const int16_t*>(tap_dz.data());
    const auto* w = static_cast<const float*>(tap_w.data());
    py::gil_scoped_release release;
    return dualhead::make_model(L, s, dy, dz, w, n);
}

}  // namespace

void register_dualhead(py::module_& m) {
    py::class_<dualhead::HostModel>(m, "DualHeadModel", "The dual-head patch model in host memory (validated copy).")
        .def(py::init(&build_model), py::arg("n_y"), py::arg("n_z"), py::arg("voxels_per_crystal"),
             py::arg("n_planes"), py::arg("tap_start"), py::arg("tap_dy"), py::arg("tap_dz"), py::arg("tap_w"))
        .def_property_readonly("n_taps", &dualhead::HostModel::n_taps);
}

}  // namespace dp::bind
