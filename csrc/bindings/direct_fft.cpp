// pybind11 bindings of the FFT convolution engines behind FFTProjector and LowRankProjector:
// DirectFftEngine (CPU, FFTW3f) always, DirectFftEngineCuda (cuFFT) when the CUDA backend is
// compiled in. View terms (kernels / spectra / coefficient maps) come in as NumPy arrays; the CUDA
// engine projects device pointers (NumPy inputs are staged by directpet._device.run_on_device).
#include "direct_fft_args.hpp"

namespace dp::bind {

namespace {

using namespace direct_fft_args;

void check_volume_pair(const py::array& src, py::array& dst, const fft::Shape3& n, const char* src_name) {
    check_array<float>(src, src_name, {n.nz, n.ny, n.nx});
    check_array<float>(dst, "out", {n.nz, n.ny, n.nx});
    if (src.data() == dst.data()) throw ValueError("out: must not alias the input array");
    if (!dst.writeable()) throw ValueError("out: array is read-only");
}

// forward / adjoint of the CPU engine: checked NumPy arrays, GIL released.
template <void (fft::CpuFftEngine::*Fn)(int, const float*, float*)>
auto host_projection(const char* src_name) {
    return [src_name](fft::CpuFftEngine& e, int v, const py::array& src, py::array& out) {
        check_volume_pair(src, out, e.image_shape(), src_name);
        const float* s = data_of<float>(src);
        float* o = mutable_data_of<float>(out);
        py::gil_scoped_release release;
        (e.*Fn)(v, s, o);
    };
}

}  // namespace

void register_direct_fft(py::module_& m) {
    using fft::CpuFftEngine;
    py::class_<CpuFftEngine> cls(m, "DirectFftEngine",
                             "CPU (FFTW3f) FFT convolution engine: per view r kernel spectra on the padded "
                             "grid and r coefficient maps (see csrc/direct/fft.hpp).");
    cls.def(py::init([](std::vector<int> shape, std::vector<int> padded, int threads,
                         const std::string& planner) {
                 const auto n = shape3(shape, "shape"), mm = shape3(padded, "padded");
                 const auto p = fft::parse_planner(planner);
                 py::gil_scoped_release release;  // FFTW_MEASURE planning can take a while
                 return new CpuFftEngine(n, mm, threads, p);
             }),
             py::arg("shape"), py::arg("padded"), py::arg("threads") = 0, py::arg("planner") = "measure")
        .def("forward", host_projection<&CpuFftEngine::forward>("image"), py::arg("view"), py::arg("src"),
             py::arg("out"))
        .def("adjoint", host_projection<&CpuFftEngine::adjoint>("histo_image"), py::arg("view"),
             py::arg("src"), py::arg("out"))
        .def_property_readonly("threads", &CpuFftEngine::threads);
    bind_view_store(cls, "Store view `view`'s terms: kernels (r, Mz, My, Mx) float32 laid out on the padded grid "
                         "(transformed here) or spectra (r, Mz, My, Mx//2+1) complex64; coefficients (r, ny, nx) "
                         "float32 or None (only for r = 1).");
}

}  // namespace dp::bind
