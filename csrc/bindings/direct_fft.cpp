// pybind11 bindings of the FFT convolution engines behind FFTProjector and LowRankProjector:
// DirectFftEngine (CPU, FFTW3f) always, DirectFftEngineCuda (cuFFT) when the CUDA backend is
// compiled in. View terms (kernels / spectra / coefficient maps) come in as NumPy arrays; the CUDA
// engine projects device pointers (NumPy inputs are staged by directpet._device.run_on_device).
#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <complex>
#include <vector>

#include "../direct/fft.hpp"
#ifdef DIRECTPET_WITH_CUDA
#include "../direct/fft_cuda.hpp"
#endif
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

template <>
inline const char* dtype_name<std::complex<float>>() { return "complex64"; }

namespace {

fft::Shape3 shape3(const std::vector<int>& s, const char* name) {
    if (s.size() != 3)
        throw ValueError(std::string(name) + ": expected three extents (z, y, x), got " +
                         std::to_string(s.size()));
    return {s[0], s[1], s[2]};
}

// The NumPy array itself (never a converted temporary: the engine reads through raw pointers).
py::array as_array(const py::object& o, const char* name) {
    if (!py::isinstance<py::array>(o))
        throw TypeError(std::string(name) + ": expected a numpy.ndarray, got " +
                        std::string(py::str(py::type::of(o).attr("__name__"))));
    return py::reinterpret_borrow<py::array>(o);
}

// Validates one view's arrays against the engine's shapes; the arrays must outlive the call.
fft::ViewTerms view_terms(const fft::Shape3& n, const fft::Shape3& m, const py::object& kernels,
                          const py::object& spectra, const py::object& coefficients) {
    if (kernels.is_none() == spectra.is_none())
        throw ValueError("set_view: give exactly one of kernels= (spatial, padded grid) or spectra=");
    fft::ViewTerms t;
    if (!kernels.is_none()) {
        const py::array k = as_array(kernels, "kernels");
        check_array<float>(k, "kernels", {-1, m.nz, m.ny, m.nx});
        t.rank = static_cast<int>(k.shape(0));
        t.kernels = data_of<float>(k);
    } else {
        const py::array s = as_array(spectra, "spectra");
        check_array<std::complex<float>>(s, "spectra", {-1, m.nz, m.ny, m.nx / 2 + 1});
        t.rank = static_cast<int>(s.shape(0));
        t.spectra = data_of<std::complex<float>>(s);
    }
    if (t.rank < 1) throw ValueError("kernels/spectra: need at least one term (rank >= 1)");
    if (!coefficients.is_none()) {
        const py::array c = as_array(coefficients, "coefficients");
        check_array<float>(c, "coefficients", {t.rank, n.ny, n.nx});
        t.coefficients = data_of<float>(c);
    } else if (t.rank > 1) {
        throw ValueError("coefficients: a rank-" + std::to_string(t.rank) +
                         " view needs (rank, ny, nx) coefficient maps");
    }
    return t;
}

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

#ifdef DIRECTPET_WITH_CUDA
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
#endif

// The parts of the engine API that are the same on the CPU and the GPU.
template <typename Engine>
void bind_view_store(py::class_<Engine>& cls, const char* set_view_doc) {
    cls.def("set_view",
            [](Engine& e, int v, const py::object& kernels, const py::object& spectra,
               const py::object& coefficients) {
                // The pointers in t point into the argument arrays, which pybind11 keeps alive for
                // the whole call (also while the GIL is released).
                const fft::ViewTerms t = view_terms(e.image_shape(), e.padded_shape(), kernels, spectra,
                                                    coefficients);
                py::gil_scoped_release release;
                e.set_view(v, t);
            },
            py::arg("view"), py::arg("kernels") = py::none(), py::arg("spectra") = py::none(),
            py::arg("coefficients") = py::none(), set_view_doc)
        .def("has_view", &Engine::has_view, py::arg("view"))
        .def("rank", &Engine::rank, py::arg("view"))
        .def("drop_view", &Engine::drop_view, py::arg("view"))
        .def_property_readonly("padded", [](const Engine& e) {
            const auto& p = e.padded_shape();
            return py::make_tuple(p.nz, p.ny, p.nx);
        })
        .def_property_readonly("nbytes", &Engine::bytes);
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

#ifdef DIRECTPET_WITH_CUDA
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
#endif

}  // namespace dp::bind
