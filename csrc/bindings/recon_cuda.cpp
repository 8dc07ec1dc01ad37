// pybind11 binding of the pairwise priors on the GPU (module directpet._cuda): device pointers (CuPy),
// arguments checked as for the CPU pass (recon_args.hpp).
#include "recon_args.hpp"

namespace dp::bind {

using namespace recon_args;

void register_recon_cuda(py::module_& m) {
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
}

}  // namespace dp::bind
