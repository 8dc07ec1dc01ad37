// pybind11 binding of DIRECT's cuFFT convolution engine (module directpet._cuda): the terms are checked
// as for the CPU engine (direct_fft_args.hpp); it projects device pointers.
#include "../direct/fft_cuda.hpp"
#include "direct_fft_args.hpp"

namespace dp::bind {

namespace {

using namespace direct_fft_args;

// forward / adjoint of the CUDA engine: device pointers, asynchronous on `stream`.
template <void (fft::gpu::CudaFftEngine::*Fn)(int, const float*, float*, void*)>
auto device_projection() {
    return [](fft::gpu::CudaFftEngine& e, int v, uintptr_t src, uintptr_t out, uintptr_t stream) {
        if (!src || !out) throw ValueError("src/out: null device pointer");
        if (src == out) throw ValueError("out: must not alias the input array");
        py::gil_scoped_release release;
        (e.*Fn)(v, reinterpret_cast<const float*>(src), reinterpret_cast<float*>(out), reinterpret_cast<void*>(stream));
    };
}

}  // namespace

void register_direct_fft_cuda(py::module_& m) {
    using fft::gpu::CudaFftEngine;
    py::class_<CudaFftEngine> cls(m, "DirectFftEngineCuda",
                              "GPU (cuFFT) FFT convolution engine; same terms as DirectFftEngine, "
                              "spectra resident on the device.");
    cls.def(py::init([](std::vector<int> shape, std::vector<int> padded) {
                 const auto n = shape3(shape, "shape"), mm = shape3(padded, "padded");
                 py::gil_scoped_release release;
                 return new CudaFftEngine(n, mm);
             }),
             py::arg("shape"), py::arg("padded"))
        .def("forward", device_projection<&CudaFftEngine::forward>(), py::arg("view"), py::arg("src"),
             py::arg("out"), py::arg("stream") = 0,
             "out = H_v src; device pointers to (nz, ny, nx) float32. Asynchronous on `stream`.")
        .def("adjoint", device_projection<&CudaFftEngine::adjoint>(), py::arg("view"), py::arg("src"),
             py::arg("out"), py::arg("stream") = 0,
             "out = H_v^T src; device pointers to (nz, ny, nx) float32. Asynchronous on `stream`.")
        .def_property_readonly("device", &CudaFftEngine::device);
    bind_view_store(cls, "Upload view `view`'s terms (host NumPy arrays, as for DirectFftEngine); kernels are "
                         "transformed on the device. Synchronous.");
}

}  // namespace dp::bind
