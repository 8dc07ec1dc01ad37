// pybind11 bindings of the pairwise priors (csrc/recon/pair_prior.hpp): one pass over the image that
// writes the gradient (or adds it), the Hessian diagonal and the per-voxel value partials. NumPy
// float32 C-contiguous arrays on the CPU; device pointers (CuPy) on the GPU.
#include "recon_args.hpp"

namespace dp::bind {

namespace {

using namespace recon_args;

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
}

}  // namespace dp::bind
