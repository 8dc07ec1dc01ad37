// pybind11 bindings of the dual-head family: the patch model (DualHeadModel) and the CPU projectors
// (the CUDA ones are added by dualhead_cuda.cpp when the CUDA backend is compiled in).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../dualhead/cpu.hpp"
#include "../dualhead/model.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

dualhead::HostModel build_model(int n_y, int n_z, int D, int n_planes, const py::array& tap_start,
                                const py::array& tap_dy, const py::array& tap_dz, const py::array& tap_w) {
    const dualhead::Layout L{n_y, n_z, D, n_planes};
    if (n_y <= 0 || n_z <= 0 || D <= 0 || n_planes <= 0)
        throw ValueError("scanner: expected positive n_y, n_z, voxels_per_crystal and n_planes");
    check_array<int64_t>(tap_start, "tap_start", {int64_t(L.n_classes()) * n_planes + 1});
    const py::ssize_t n = tap_w.ndim() == 1 ? tap_w.shape(0) : -1;
    check_array<float>(tap_w, "tap_w", {-1});
    check_array<int16_t>(tap_dy, "tap_dy", {n});
    check_array<int16_t>(tap_dz, "tap_dz", {n});
    const auto* s = static_cast<const int64_t*>(tap_start.data());
    const auto* dy = static_cast<const int16_t*>(tap_dy.data());
    const auto* dz = static_cast<const int16_t*>(tap_dz.data());
    const auto* w = static_cast<const float*>(tap_w.data());
    py::gil_scoped_release release;
    return dualhead::make_model(L, s, dy, dz, w, n);
}

// The validated class list of a projection call (int32, 1-D, indices in range).
dualhead::ClassList checked_classes(const py::array& classes, const dualhead::HostModel& M) {
    check_array<int32_t>(classes, "classes", {-1});
    return dualhead::make_class_list(M.L, data_of<int32_t>(classes), static_cast<int>(classes.shape(0)));
}

void check_image(const py::array& a, const char* name, const dualhead::Layout& L) {
    check_array<float>(a, name, {L.image_nz(), L.image_ny(), L.n_planes});
}

void check_lors(const py::array& a, const char* name, const dualhead::ClassList& C) {
    check_array<float>(a, name, {static_cast<py::ssize_t>(C.n_lors())});
}

void forward_cpu(const dualhead::HostModel& M, const py::array& image, const py::array& classes,
                 const py::object& skip, py::array& out, int threads) {
    const dualhead::ClassList C = checked_classes(classes, M);
    check_image(image, "image", M.L);
    const float* m = nullptr;
    if (!skip.is_none()) {
        if (!py::isinstance<py::array>(skip)) throw TypeError("skip: expected a numpy.ndarray or None");
        const py::array sa = skip.cast<py::array>();
        check_lors(sa, "skip", C);
        m = data_of<float>(sa);
    }
    check_lors(out, "out", C);
    const float* x = data_of<float>(image);
    float* y = mutable_data_of<float>(out);
    py::gil_scoped_release release;
    dualhead::forward_cpu(M, C, x, m, y, threads);
}

void back_cpu(const dualhead::HostModel& M, const py::array& y, const py::array& classes, py::array& out,
              int threads) {
    const dualhead::ClassList C = checked_classes(classes, M);
    check_lors(y, "y", C);
    check_image(out, "out", M.L);
    const float* yd = data_of<float>(y);
    float* x = mutable_data_of<float>(out);
    py::gil_scoped_release release;
    dualhead::back_cpu(M, C, yd, x, threads);
}

}  // namespace

void register_dualhead(py::module_& m) {
    py::class_<dualhead::HostModel>(m, "DualHeadModel", "The dual-head patch model in host memory (validated copy).")
        .def(py::init(&build_model), py::arg("n_y"), py::arg("n_z"), py::arg("voxels_per_crystal"),
             py::arg("n_planes"), py::arg("tap_start"), py::arg("tap_dy"), py::arg("tap_dz"), py::arg("tap_w"))
        .def_property_readonly("n_taps", &dualhead::HostModel::n_taps);
    m.def("dualhead_forward_cpu", &forward_cpu, py::arg("model"), py::arg("image"), py::arg("classes"),
          py::arg("skip"), py::arg("out"), py::arg("threads") = 0,
          "out (n_lors of the classes,) = H image for the listed classes (blocks in list order), on the "
          "CPU (OpenMP); where skip (same shape, or None) is 0 the LOR is not projected and out is 0.");
    m.def("dualhead_back_cpu", &back_cpu, py::arg("model"), py::arg("y"), py::arg("classes"), py::arg("out"),
          py::arg("threads") = 0,
          "out (n_z D, n_y D, n_planes) = H^T y for the listed classes' LOR vector y, on the CPU (OpenMP, "
          "no atomics; the same bits for any thread count).");
}

}  // namespace dp::bind
