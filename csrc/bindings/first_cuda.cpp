// pybind11 bindings of the CUDA FIRST projectors. Arrays are device pointers (DeviceBuffer, CuPy or
// PyTorch); the model (tables, folded taps, texture) is uploaded once into a FirstDeviceModel.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../first/cuda.hpp"
#include "arrays.hpp"
#include "first_checks.hpp"

namespace py = pybind11;

namespace dp::bind {

void register_first_cuda(py::module_& m) {
    using first::gpu::DeviceModel;
    py::class_<DeviceModel>(m, "FirstDeviceModel", "The FIRST projector model resident on the GPU.")
        .def(py::init([](const first::HostModel& host) {
                 py::gil_scoped_release release;
                 return new DeviceModel(host);
             }),
             py::arg("model"))
        .def_property_readonly("nbytes", &DeviceModel::bytes, "Device memory held (model and workspaces).")
        .def_property_readonly("fast_supported", &DeviceModel::fast_supported)
        .def_property_readonly("fast_unsupported_reason", &DeviceModel::fast_unsupported_reason,
                               "Why the fast kernels cannot run this model ('' when they can).")
        .def_property("fast_forward_tma", &DeviceModel::fast_forward_tma, &DeviceModel::set_fast_forward_tma,
                      "Whether the fast forward stages its lattice planes by TMA box copies (sm_90+; off by default "
                      "until verified on a GPU) rather than cp.async copies; both give the same bits. Setting "
                      "True where they cannot run raises ValueError.")
        .def_property_readonly("fast_forward_tma_unsupported_reason", &DeviceModel::fast_forward_tma_unsupported_reason,
                               "Why the TMA staging cannot run here ('' when it can).");
    m.def("first_forward_cuda",
          [](const std::string& method, DeviceModel& model, uintptr_t image, const py::array& angles, uintptr_t out,
             uintptr_t stream) {
              const auto mth = first::parse_method(method);
              const first::AngleList A = checked_angles(angles, model.host());
              py::gil_scoped_release release;
              first::gpu::forward(mth, model, A, device_pointer<const float>(image, "image"), device_pointer<float>(out, "out"),
                                  reinterpret_cast<void*>(stream));
          },
          py::arg("method"), py::arg("model"), py::arg("image"), py::arg("angles"), py::arg("out"),
          py::arg("stream") = 0,
          "out (n_sel, n_rows, n_rows, n) = H image on the GPU (device pointers, asynchronous on stream).");
    m.def("first_back_cuda",
          [](const std::string& method, DeviceModel& model, uintptr_t sino, const py::array& angles, uintptr_t out,
             uintptr_t stream) {
              const auto mth = first::parse_method(method);
              const first::AngleList A = checked_angles(angles, model.host());
              py::gil_scoped_release release;
              first::gpu::back(mth, model, A, device_pointer<const float>(sino, "sinogram"), device_pointer<float>(out, "out"),
                               reinterpret_cast<void*>(stream));
          },
          py::arg("method"), py::arg("model"), py::arg("sinogram"), py::arg("angles"), py::arg("out"),
          py::arg("stream") = 0, "out (nz, n, n) = back projection on the GPU (device pointers).");
    m.def("first_back_faithful_cuda",
          [](DeviceModel& model, uintptr_t sino, uintptr_t factors, const py::array& angles, uintptr_t out,
             uintptr_t sens, uintptr_t stream) {
              const first::AngleList A = checked_angles(angles, model.host());
              py::gil_scoped_release release;
              first::gpu::back_faithful(model, A, device_pointer<const float>(sino, "sinogram"),
                                        device_pointer<const float>(factors, "factors", false), device_pointer<float>(out, "out"),
                                        device_pointer<float>(sens, "sens", false), reinterpret_cast<void*>(stream));
          },
          py::arg("model"), py::arg("sinogram"), py::arg("factors"), py::arg("angles"), py::arg("out"),
          py::arg("sens"), py::arg("stream") = 0,
          "The paper's back projector on the GPU: out = B sinogram, sens = B factors (factors 0: ones; "
          "sens 0: not computed).");
}

}  // namespace dp::bind
