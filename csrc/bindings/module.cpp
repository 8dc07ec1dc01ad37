// The extension module directpet._core: one register_* function per projector family.
#include <pybind11/pybind11.h>

#include "../common/errors.hpp"
#include "../common/cuda_runtime.hpp"

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
