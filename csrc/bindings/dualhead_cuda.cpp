// pybind11 bindings of the CUDA dual-head projectors. Arrays are device pointers (DeviceBuffer, CuPy
// or PyTorch); the model (regrouped taps, row boxes) is uploaded once into a DualHeadDeviceModel.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../dualhead/cuda.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

dualhead::ClassList checked_classes(const py::array& classes, const dualhead::Layout& L) {
    check_array<int32_t>(classes, "classes", {-1});
    return dualhead::make_class_list(L, data_of<int32_t>(classes), static_cast<int>(classes.shape(0)));
}

}  // namespace

void register_dualhead_cuda(py::module_& m) {
    using dualhead::gpu::DeviceModel;
    py::class_<DeviceModel>(m, "DualHeadDeviceModel",
                            "The dual-head patch model resident on the GPU (taps regrouped by sub-position residue, "
                            "row boxes) and the projectors' workspaces.")
        .def(py::init([](const dualhead::HostModel& host, size_t window_limit) {
                 py::gil_scoped_release release;
                 return new DeviceModel(host, window_limit);
             }),
             py::arg("model"), py::arg("window_limit") = 0,
             "window_limit: bytes of shared memory the default kernels may use for their two staging windows "
             "(0: as much as the device allows); classes needing more use the global-memory kernels.")
        .def_property_readonly("nbytes", &DeviceModel::bytes, "Device memory held now (model and workspaces).")
        .def_property_readonly("model_nbytes", &DeviceModel::model_bytes, "Device memory of the model arrays alone.")
        .def_property_readonly("n_taps", &DeviceModel::n_taps)
        .def_property_readonly("n_classes", [](const DeviceModel& d) { return d.layout().n_classes(); })
        .def_property("plane_groups", &DeviceModel::plane_groups, &DeviceModel::set_plane_groups,
                      "Plane-range launches of the default forward (accumulating into y); 0: automatic.")
        .def_property("narrow_blocks", &DeviceModel::narrow_blocks, &DeviceModel::set_narrow_blocks,
                      "Default forward: give classes with wide windows blocks of fewer LORs (two blocks per SM) "
                      "instead of larger-shared-memory launches.")
        .def_property("back_heavy_first", &DeviceModel::back_heavy_first, &DeviceModel::set_back_heavy_first,
                      "Default back projection: start the blocks in decreasing estimated cost (on by default); off: "
                      "in index order. The same results either way.")
        .def_property("fwd_groups_per_launch", &DeviceModel::fwd_groups_per_launch,
                      &DeviceModel::set_fwd_groups_per_launch,
                      "Default forward: plane groups per launch (0, the default: all whose sums fit a 64 MB "
                      "workspace; 1: one launch per group, as before; n: at most n). The same results either way.");
    m.def("dualhead_forward_cuda",
          [](const std::string& method, DeviceModel& model, uintptr_t image, const py::array& classes, uintptr_t skip,
             uintptr_t out, uintptr_t stream) {
              const auto mth = dualhead::gpu::parse_method(method);
              const dualhead::ClassList C = checked_classes(classes, model.layout());
              py::gil_scoped_release release;
              dualhead::gpu::forward(mth, model, C, device_pointer<const float>(image, "image"),
                                     device_pointer<const float>(skip, "skip", false), device_pointer<float>(out, "out"),
                                     reinterpret_cast<void*>(stream));
          },
          py::arg("method"), py::arg("model"), py::arg("image"), py::arg("classes"), py::arg("skip"), py::arg("out"),
          py::arg("stream") = 0,
          "out (the classes' LORs) = H image on the GPU (device pointers, asynchronous on stream); skip 0: none, "
          "else LORs whose skip value is 0 get 0 and are not projected.");
    m.def("dualhead_back_cuda",
          [](const std::string& method, DeviceModel& model, uintptr_t y, const py::array& classes, uintptr_t out,
             uintptr_t stream) {
              const auto mth = dualhead::gpu::parse_method(method);
              const dualhead::ClassList C = checked_classes(classes, model.layout());
              py::gil_scoped_release release;
              dualhead::gpu::back(mth, model, C, device_pointer<const float>(y, "y"), device_pointer<float>(out, "out"),
                                  reinterpret_cast<void*>(stream));
          },
          py::arg("method"), py::arg("model"), py::arg("y"), py::arg("classes"), py::arg("out"), py::arg("stream") = 0,
          "out (n_z D, n_y D, n_planes) = H^T y on the GPU (device pointers, asynchronous on stream).");
}

}  // namespace dp::bind
