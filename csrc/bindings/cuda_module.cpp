// The extension module directpet._cuda: the CUDA backend. It is a module of its own so that the CPU
// module directpet._core never needs the CUDA libraries (cuFFT): directpet._backend imports this one
// only when a CUDA path is asked for, and a machine without cuFFT or without a driver still imports
// directpet and runs on the CPU. The CUDA functions take the models and engines that _core's classes
// hold (FirstModel, DualHeadModel, DualHeadMonteCarlo): pybind11 shares registered classes between
// modules built with the same pybind11 and compiler, and _core is imported first so they exist.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../common/cuda_runtime.hpp"
#include "../common/errors.hpp"

#ifndef DIRECTPET_CUDA_ARCHS
#error "DIRECTPET_CUDA_ARCHS: the CUDA architectures compiled in (set by CMakeLists.txt)"
#endif

namespace py = pybind11;

namespace dp::bind {
void register_direct_cuda(py::module_& m);
void register_direct_fft_cuda(py::module_& m);
void register_direct_events_cuda(py::module_& m);
void register_direct_listmode_cuda(py::module_& m);
void register_first_cuda(py::module_& m);
void register_first_monte_carlo_cuda(py::module_& m);
void register_dualhead_monte_carlo_cuda(py::module_& m);
void register_dualhead_model_cuda(py::module_& m);
void register_dualhead_cuda(py::module_& m);
void register_recon_cuda(py::module_& m);
}  // namespace dp::bind

PYBIND11_MODULE(_cuda, m) {
    m.doc() = "directpet's CUDA backend (loaded on first use by directpet._backend)";
    py::module_::import("directpet._core");
    // module-local: this module's C++ exceptions are translated here, whatever _core registered
    py::register_local_exception<dp::ValueError>(m, "ValueError", PyExc_ValueError);
    py::register_local_exception<dp::TypeError>(m, "TypeError", PyExc_TypeError);
    py::register_local_exception<dp::OutOfMemory>(m, "OutOfMemoryError", PyExc_MemoryError);
    m.def("device_count", &dp::cuda::device_count, "Number of CUDA devices usable now (0 without a driver or GPU).");
    m.def("runtime_status", &dp::cuda::runtime_status, "Why no CUDA device is usable, or 'ok'.");
    m.def("runtime_info", [] {
        const dp::cuda::RuntimeInfo rt = dp::cuda::runtime_info();
        py::dict d;
        d["cuda_architectures"] = std::string(DIRECTPET_CUDA_ARCHS);
        d["cuda_runtime"] = rt.runtime;
        d["cuda_driver"] = rt.driver;
        d["cufft"] = rt.cufft;
        d["cuda_devices"] = rt.devices;
        return d;
    }, "The CUDA architectures compiled in, and the CUDA runtime, driver and cuFFT versions (CUDA's integer "
       "encoding, 0 where none is found) and the usable devices found at run time.");
    dp::bind::register_direct_cuda(m);
    dp::bind::register_direct_fft_cuda(m);
    dp::bind::register_direct_events_cuda(m);
    dp::bind::register_direct_listmode_cuda(m);
    dp::bind::register_first_cuda(m);
    dp::bind::register_first_monte_carlo_cuda(m);
    dp::bind::register_dualhead_monte_carlo_cuda(m);
    dp::bind::register_dualhead_model_cuda(m);
    dp::bind::register_dualhead_cuda(m);
    dp::bind::register_recon_cuda(m);
}
