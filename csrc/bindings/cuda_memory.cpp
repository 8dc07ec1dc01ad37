// pybind11 binding of device buffers: the CUDA backend's way to hold NumPy data on the GPU
// without requiring CuPy or PyTorch.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../common/cuda_memory.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

void register_cuda_memory(py::module_& m) {
    py::class_<cuda::DeviceBuffer>(m, "DeviceBuffer",
                                   "Raw device allocation; .ptr is its address, .nbytes its size.")
        .def(py::init<size_t>(), py::arg("nbytes"))
        .def_property_readonly("ptr", [](const cuda::DeviceBuffer& b) {
            return reinterpret_cast<uintptr_t>(b.get());
        })
        .def_property_readonly("nbytes", &cuda::DeviceBuffer::bytes)
        .def("upload", [](cuda::DeviceBuffer& b, const py::array& a) {
            if (!(a.flags() & py::array::c_style)) throw ValueError("upload: array must be C-contiguous");
            if (static_cast<size_t>(a.nbytes()) > b.bytes()) throw ValueError("upload: array larger than the buffer");
            const void* p = a.data();
            const size_t n = a.nbytes();
            py::gil_scoped_release release;
            b.upload(p, n);
        }, py::arg("array"), "Copy a C-contiguous NumPy array to the start of the buffer (synchronous).")
        .def("download", [](const cuda::DeviceBuffer& b, py::array& a) {
            if (!(a.flags() & py::array::c_style)) throw ValueError("download: array must be C-contiguous");
            if (!a.writeable()) throw ValueError("download: array is read-only");
            if (static_cast<size_t>(a.nbytes()) > b.bytes()) throw ValueError("download: array larger than the buffer");
            void* p = a.mutable_data();
            const size_t n = a.nbytes();
            py::gil_scoped_release release;
            b.download(p, n);
        }, py::arg("array"), "Copy the start of the buffer into a C-contiguous NumPy array (synchronous).");
    m.def("cuda_current_device", &cuda::current_device, "The current CUDA device (cudaGetDevice), checked.");
    m.def("cuda_pointer_device", &cuda::pointer_device, py::arg("ptr"),
          "The CUDA device a pointer's memory lives on (-1: host or unknown memory), checked.");
    m.def("cuda_synchronize", [] {
        py::gil_scoped_release release;
        cuda::synchronize();
    }, "cudaDeviceSynchronize, checked.");
}

}  // namespace dp::bind
