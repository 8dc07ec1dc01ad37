// pybind11 bindings of the pairwise priors (csrc/recon/pair_prior.hpp): one pass over the image that
// writes the gradient (or adds it), the Hessian diagonal and the per-voxel value partials. NumPy
// float32 C-contiguous arrays on the CPU; device pointers (CuPy) on the GPU.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>

#include "../recon/pair_prior.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

recon::NeighbourWeights neighbour_weights(const py::array& weights) {
    check_array<float>(weights, "weights", {27});
    recon::NeighbourWeights W{};
    const float* w = data_of<float>(weights);
    for (int k = 0; k < 27; ++k) {
        if (!(w[k] >= 0.0f) || !std::isfinite(w[k])) throw ValueError("weights: expected finite values >= 0");
        W.w[k] = w[k];
    }
    return W;
}

recon::PriorShape prior_shape(int nz, int ny, int nx, float scale, float p0, float p1) {
    if (nz < 1 || ny < 1 || nx < 1)
        throw ValueError("x: expected a non-empty (nz, ny, nx) image, got (" + std::to_string(nz) + ", " +
                         std::to_string(ny) + ", " + std::to_string(nx) + ")");
    if (!std::isfinite(scale) || !std::isfinite(p0) || !std::isfinite(p1))
        throw ValueError("scale, p0, p1: expected finite numbers");
    return {nz, ny, nx, scale, p0, p1};
}

// An optional output image of x's shape (None: not computed).
float* optional_out(std::optional<py::array>& a, const char* name, const py::array& x) {
    if (!a) return nullptr;
    check_array<float>(*a, name, {x.shape(0), x.shape(1), x.shape(2)});
    return mutable_data_of<float>(*a, name);
}

}  // namespace

void register_recon(py::module_& m) {
    m.def("pair_prior_cpu",
          [](int kind, const py::array& x, std::optional<py::array> kappa, const py::array& weights, float scale,
             float p0, float p1, std::optional<py::array> grad, bool accumulate, std::optional<py::array> hess,
             std::optional<py::array> value, int threads) {
              check_array<float>(x, "x", {-1, -1, -1});
              const auto P = prior_shape(static_cast<int>(x.shape(0)), static_cast<int>(x.shape(1)),
                                         static_cast<int>(x.shape(2)), scale, p0, p1);
              const auto W = neighbour_weights(weights);
              const float* k = nullptr;
              if (kappa) {
                  check_array<float>(*kappa, "kappa", {x.shape(0), x.shape(1), x.shape(2)});
                  k = data_of<float>(*kappa);
              }
              float* g = optional_out(grad, "grad", x);
              float* h = optional_out(hess, "hess", x);
              float* v = optional_out(value, "value", x);
              const float* xd = data_of<float>(x);
              py::gil_scoped_release release;
              recon::pair_prior_cpu(kind, xd, k, W, P, g, accumulate, h, v, threads);
          },
          py::arg("kind"), py::arg("x"), py::arg("kappa"), py::arg("weights"), py::arg("scale"), py::arg("p0"),
          py::arg("p1"), py::arg("grad"), py::arg("accumulate"), py::arg("hess"), py::arg("value"),
          py::arg("threads") = 0,
          "One pass of a pairwise prior over x (nz, ny, nx) float32: grad = scale sum w df/da (added when "
          "accumulate), hess = scale sum w d2f/da2, value = sum w f / 2 per voxel; each only when given. "
          "kind: 0 RDP (p0 gamma, p1 epsilon), 1 quadratic, 2 log-cosh (p0 delta); weights: the 3 x 3 x 3 "
          "neighbour weights, flattened.");
#if defined(DIRECTPET_WITH_CUDA)
    m.def("pair_prior_cuda",
          [](int kind, uintptr_t x, uintptr_t kappa, const py::array& weights, int nz, int ny, int nx, float scale,
             float p0, float p1, uintptr_t grad, bool accumulate, uintptr_t hess, uintptr_t value, uintptr_t stream) {
              const auto P = prior_shape(nz, ny, nx, scale, p0, p1);
              const auto W = neighbour_weights(weights);
              py::gil_scoped_release release;
              recon::pair_prior_cuda(kind, device_pointer<const float>(x, "x"),
                                     device_pointer<const float>(kappa, "kappa", false), W, P,
                                     device_pointer<float>(grad, "grad", false), accumulate,
                                     device_pointer<float>(hess, "hess", false),
                                     device_pointer<float>(value, "value", false), reinterpret_cast<void*>(stream));
          },
          py::arg("kind"), py::arg("x"), py::arg("kappa"), py::arg("weights"), py::arg("nz"), py::arg("ny"),
          py::arg("nx"), py::arg("scale"), py::arg("p0"), py::arg("p1"), py::arg("grad"), py::arg("accumulate"),
          py::arg("hess"), py::arg("value"), py::arg("stream") = 0,
          "pair_prior_cpu on the GPU (device pointers, 0 for kappa / outputs not given; asynchronous on stream).");
#endif
}

}  // namespace dp::bind
