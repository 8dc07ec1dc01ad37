// Argument checks and the engine API shared by the CPU (direct_fft.cpp) and CUDA (direct_fft_cuda.cpp)
// bindings of DIRECT's FFT convolution engines.
#pragma once

#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <complex>
#include <vector>

#include "../direct/fft.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

template <>
inline const char* dtype_name<std::complex<float>>() { return "complex64"; }

namespace direct_fft_args {

inline fft::Shape3 shape3(const std::vector<int>& s, const char* name) {
    if (s.size() != 3)
        throw ValueError(std::string(name) + ": expected three extents (z, y, x), got " +
                         std::to_string(s.size()));
    return {s[0], s[1], s[2]};
}

// The NumPy array itself (never a converted temporary: the engine reads through raw pointers).
inline py::array as_array(const py::object& o, const char* name) {
    if (!py::isinstance<py::array>(o))
        throw TypeError(std::string(name) + ": expected a numpy.ndarray, got " +
                        std::string(py::str(py::type::of(o).attr("__name__"))));
    return py::reinterpret_borrow<py::array>(o);
}

// Validates one view's arrays against the engine's shapes; the arrays must outlive the call.
inline fft::ViewTerms view_terms(const fft::Shape3& n, const fft::Shape3& m, const py::object& kernels,
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

}  // namespace direct_fft_args
}  // namespace dp::bind
