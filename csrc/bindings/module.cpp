// The extension module directpet._core: one register_* function per projector family.
#include <fftw3.h>
#include <omp.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../common/cpu_dispatch.hpp"
#include "../common/cuda_runtime.hpp"
#include "../common/errors.hpp"

#ifndef DIRECTPET_CUDA_ARCHS
#define DIRECTPET_CUDA_ARCHS ""
#endif

namespace py = pybind11;

namespace dp::bind {
void register_direct(py::module_& m);
void register_direct_fft(py::module_& m);
void register_direct_events(py::module_& m);
void register_random(py::module_& m);
void register_first(py::module_& m);
void register_first_monte_carlo(py::module_& m);
void register_dualhead(py::module_& m);
void register_dualhead_monte_carlo(py::module_& m);
void register_dualhead_model(py::module_& m);
void register_io(py::module_& m);
void register_recon(py::module_& m);
#ifdef DIRECTPET_WITH_CUDA
void register_direct_cuda(py::module_& m);
void register_direct_fft_cuda(py::module_& m);
void register_first_cuda(py::module_& m);
void register_first_monte_carlo_cuda(py::module_& m);
void register_dualhead_monte_carlo_cuda(py::module_& m);
void register_dualhead_model_cuda(py::module_& m);
void register_dualhead_cuda(py::module_& m);
#endif
}  // namespace dp::bind

PYBIND11_MODULE(_core, m) {
    m.doc() = "directpet compiled backends (CPU: C++/OpenMP; CUDA when compiled in)";
    py::register_exception<dp::ValueError>(m, "ValueError", PyExc_ValueError);
    py::register_exception<dp::TypeError>(m, "TypeError", PyExc_TypeError);
    py::register_exception<dp::OutOfMemory>(m, "OutOfMemoryError", PyExc_MemoryError);
    m.def("has_cuda", [] {
#ifdef DIRECTPET_WITH_CUDA
        return true;
#else
        return false;
#endif
    }, "True when the CUDA backend was compiled into this module.");
    m.def("cuda_device_count", &dp::cuda::device_count,
          "Number of CUDA devices usable now (0 without the CUDA backend or without a GPU).");
    m.def("cuda_runtime_status", &dp::cuda::runtime_status,
          "Why no CUDA device is usable, or 'ok'.");
    m.def("build_info", [] {
        py::dict d;
        d["cpu_dispatch"] = dp::cpu_dispatch_level();
#ifdef DIRECTPET_NATIVE_BUILD
        d["native"] = true;
#else
        d["native"] = false;
#endif
#if defined(__clang__)
        d["compiler"] = std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
        d["compiler"] = std::string("GCC ") + __VERSION__;
#else
        d["compiler"] = std::string(__VERSION__);
#endif
        d["openmp_threads"] = omp_get_max_threads();
        d["fftw"] = std::string(fftwf_version);
        d["cuda_architectures"] = std::string(DIRECTPET_CUDA_ARCHS);
        const dp::cuda::RuntimeInfo rt = dp::cuda::runtime_info();
        d["cuda_runtime"] = rt.runtime;
        d["cuda_driver"] = rt.driver;
        d["cufft"] = rt.cufft;
        d["cuda_devices"] = rt.devices;
        return d;
    }, "What this build holds and finds: the CPU dispatch level, compiler, OpenMP threads, FFTW version, "
       "CUDA architectures compiled in, and the CUDA runtime, driver, cuFFT and devices found at run time.");
    dp::bind::register_direct(m);
    dp::bind::register_direct_fft(m);
    dp::bind::register_direct_events(m);
    dp::bind::register_random(m);
    dp::bind::register_first(m);
    dp::bind::register_first_monte_carlo(m);
    dp::bind::register_dualhead(m);
    dp::bind::register_dualhead_monte_carlo(m);
    dp::bind::register_dualhead_model(m);
    dp::bind::register_io(m);
    dp::bind::register_recon(m);
#ifdef DIRECTPET_WITH_CUDA
    dp::bind::register_direct_cuda(m);
    dp::bind::register_direct_fft_cuda(m);
    dp::bind::register_first_cuda(m);
    dp::bind::register_first_monte_carlo_cuda(m);
    dp::bind::register_dualhead_monte_carlo_cuda(m);
    dp::bind::register_dualhead_model_cuda(m);
    dp::bind::register_dualhead_cuda(m);
#endif
}
