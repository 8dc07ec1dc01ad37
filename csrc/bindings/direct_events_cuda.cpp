// pybind11 binding of DIRECT's event simulation + deposition on the GPU (module directpet._cuda);
// the arguments are checked as for the CPU binding (direct_events_args.hpp).
#include "direct_events_args.hpp"

namespace dp::bind {

namespace {

using namespace direct_events_args;

py::dict simulate_cuda(const py::array& components, const py::dict& scanner, std::vector<int> shape,
                       std::vector<double> voxel, int n_phi, int n_theta, double theta_max,
                       long long n_events, unsigned long long seed, uintptr_t out, uintptr_t stream,
                       const py::object& progress) {
    const SimParams P = make_params(components, scanner, shape, voxel, n_phi, n_theta, theta_max);
    const uint64_t n = checked_events(n_events);
    if (!out) throw ValueError("out: null device pointer");
    const events::RoundHook hook = make_hook(progress);
    Counters c;
    {
        py::gil_scoped_release release;
        c = events::gpu::simulate_deposit(P, n, seed, reinterpret_cast<float*>(out),
                                       reinterpret_cast<void*>(stream), hook);
    }
    return to_dict(c);
}

}  // namespace

void register_direct_events_cuda(py::module_& m) {
    m.def("direct_simulate_deposit_cuda", &simulate_cuda, py::arg("components"), py::arg("scanner"),
          py::arg("shape"), py::arg("voxel_size"), py::arg("n_phi"), py::arg("n_theta"),
          py::arg("theta_max"), py::arg("n_events"), py::arg("seed"), py::arg("out"),
          py::arg("stream") = 0, py::arg("progress") = py::none(),
          "As direct_simulate_deposit_cpu on the GPU: out is a device pointer to (n_views, nz, ny, nx) "
          "float32; runs on `stream` and returns when done.");
}

}  // namespace dp::bind
