// pybind11 binding of the FIRST event Monte Carlo on the GPU (module directpet._cuda); the arguments
// are checked as for the CPU binding (first_monte_carlo_args.hpp).
#include "first_monte_carlo_args.hpp"

namespace dp::bind {

namespace {

using namespace first_monte_carlo_args;

py::dict simulate_cuda(const py::dict& scanner, const py::array& activity, const std::vector<double>& voxel_size,
                       long long n_decays, unsigned long long seed, uintptr_t out, long long chunk_decays,
                       uintptr_t stream, const py::object& progress) {
    const Plan plan = make_plan(scanner, activity, voxel_size);
    const uint64_t n = positive_count(n_decays, "n_decays");
    const uint64_t chunk = positive_count(chunk_decays, "chunk_decays");
    if (!out) throw ValueError("out: null device pointer");
    const first::mc::ChunkHook hook = make_hook(progress);
    Counters c;
    {
        py::gil_scoped_release release;
        c = first::mc::gpu::simulate(plan, n, seed, chunk, reinterpret_cast<float*>(out),
                                     reinterpret_cast<void*>(stream), hook);
    }
    return to_dict(c, plan);
}

}  // namespace

void register_first_monte_carlo_cuda(py::module_& m) {
    m.def("first_mc_simulate_cuda", &simulate_cuda, py::arg("scanner"), py::arg("activity"), py::arg("voxel_size"),
          py::arg("n_decays"), py::arg("seed"), py::arg("out"), py::arg("chunk_decays"),
          py::arg("stream") = 0, py::arg("progress") = py::none(),
          "As first_mc_simulate_cpu on the GPU: out is a device pointer to (n_angles, n_rows, n_rows, "
          "n_radial) float32; runs on `stream` and returns when done.");
}

}  // namespace dp::bind
