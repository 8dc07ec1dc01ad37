// The extension module directpet._core: the CPU backend, one register_* function per projector family.
// The CUDA backend is the separate module directpet._cuda (cuda_module.cpp), loaded only when a CUDA
// path is used, so that this module imports on a machine without the CUDA libraries.
#include <fftw3.h>
#include <omp.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../common/cpu_dispatch.hpp"
#include "../common/errors.hpp"

namespace py = pybind11;

namespace dp::bind {
void register_direct(py::module_& m);
void register_direct_fft(py::module_& m);
void register_direct_events(py::module_& m);
void register_direct_listmode(py::module_& m);
void register_random(py::module_& m);
void register_first(py::module_& m);
void register_first_monte_carlo(py::module_& m);
void register_dualhead(py::module_& m);
void register_dualhead_monte_carlo(py::module_& m);
void register_dualhead_model(py::module_& m);
void register_io(py::module_& m);
void register_recon(py::module_& m);
}  // namespace dp::bind

PYBIND11_MODULE(_core, m) {
    m.doc() = "directpet's CPU backend (C++ / OpenMP, FFTW3f)";
    py::register_exception<dp::ValueError>(m, "ValueError", PyExc_ValueError);
    py::register_exception<dp::TypeError>(m, "TypeError", PyExc_TypeError);
    py::register_exception<dp::OutOfMemory>(m, "OutOfMemoryError", PyExc_MemoryError);
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
        return d;
    }, "What the CPU backend holds and finds: the CPU dispatch level, compiler, OpenMP threads and FFTW version.");
    dp::bind::register_direct(m);
    dp::bind::register_direct_fft(m);
    dp::bind::register_direct_events(m);
    dp::bind::register_direct_listmode(m);
    dp::bind::register_random(m);
    dp::bind::register_first(m);
    dp::bind::register_first_monte_carlo(m);
    dp::bind::register_dualhead(m);
    dp::bind::register_dualhead_monte_carlo(m);
    dp::bind::register_dualhead_model(m);
    dp::bind::register_io(m);
    dp::bind::register_recon(m);
}
