// pybind11 bindings of the CUDA DIRECT projectors. Arrays are passed as device pointers (from
// DeviceBuffer, CuPy or PyTorch); LUTs are uploaded once per view into a DirectDeviceLut.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../direct/cuda.hpp"
#include "arrays.hpp"
#include "direct_lut_check.hpp"

namespace py = pybind11;

namespace dp::bind {

void register_cuda_memory(py::module_& m);

void register_direct_cuda(py::module_& m) {
    register_cuda_memory(m);
    using direct::gpu::DeviceLut;
    py::class_<DeviceLut>(m, "DirectDeviceLut", "One view's DIRECT LUTs resident on the GPU.")
        .def(py::init([](std::vector<int> shape, const py::array& lormap, const py::array& offsets,
                         const py::array& flip, const py::array& values) {
                 if (shape.size() != 3 || shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0)
                     throw ValueError("shape: expected three positive extents (nz, ny, nx)");
                 const direct::Dims d{shape[0], shape[1], shape[2]};
                 const direct::LutRef h = checked_lut(lormap, offsets, flip, values, d);
                 py::gil_scoped_release release;
                 return new DeviceLut(h, d);
             }),
             py::arg("shape"), py::arg("lormap"), py::arg("offsets"), py::arg("flip"), py::arg("values"))
        .def_property_readonly("nbytes", &DeviceLut::bytes)
        .def_property_readonly("factored", [](const DeviceLut& l) {
            return py::make_tuple(l.factored(true), l.factored(false));
        }, "(forward, back): whether the weights factor per column (radial x TOF/axial), which the "
           "default slab kernel exploits.");
    m.def("direct_project_cuda",
          [](bool forward, const std::string& method, uintptr_t src, uintptr_t dst,
             const DeviceLut& lut, uintptr_t stream) {
              if (!src || !dst) throw ValueError("src/out: null device pointer");
              const auto mth = direct::gpu::parse_method(method);
              py::gil_scoped_release release;
              direct::gpu::project(forward, mth, reinterpret_cast<const float*>(src),
                                   reinterpret_cast<float*>(dst), lut, reinterpret_cast<void*>(stream));
          },
          py::arg("forward"), py::arg("method"), py::arg("src"), py::arg("out"), py::arg("lut"),
          py::arg("stream") = 0,
          "out = H src (forward) or H^T src on the GPU; src/out are device pointers to "
          "(nz, ny, nx) float32 arrays of the LUT's shape. Asynchronous on `stream`.");
}

}  // namespace dp::bind
