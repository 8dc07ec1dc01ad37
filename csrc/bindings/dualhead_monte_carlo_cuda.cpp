// pybind11 binding of the dual-head event Monte Carlo on the GPU (module directpet._cuda): runs a
// DualHeadMonteCarlo engine (a class of directpet._core) on the current device.
#include "dualhead_monte_carlo_args.hpp"

namespace dp::bind {

namespace {

using namespace dualhead_monte_carlo_args;

py::dict run_cuda(Engine& e, unsigned long long seed, long long first, long long count, double weight, uintptr_t out,
                  uintptr_t stream) {
    const uint64_t f = first_arg(first), n = count_arg(count, "count");
    if (n > mc::gpu::kMaxCount) throw ValueError("count: at most 2^31 decays per CUDA run, got " + std::to_string(n));
    const float w = weight_arg(weight);
    mc::Counters c;
    {
        py::gil_scoped_release release;
        auto* plan = static_cast<mc::gpu::DevicePlan*>(e.device.get());
        if (!plan || plan->device() != mc::gpu::current_device()) {  // first run, or another device
            auto fresh = std::make_shared<mc::gpu::DevicePlan>(e.plan);
            plan = fresh.get();
            e.device = std::move(fresh);
        }
        c = plan->simulate(seed, f, n, w, reinterpret_cast<float*>(out), reinterpret_cast<void*>(stream));
    }
    return to_dict(c);
}

}  // namespace

void register_dualhead_monte_carlo_cuda(py::module_& m) {
    m.def("dualhead_mc_run_cuda", &run_cuda, py::arg("engine"), py::arg("seed"), py::arg("first"), py::arg("count"),
          py::arg("weight") = 1.0, py::arg("out") = 0, py::arg("stream") = 0,
          "As DualHeadMonteCarlo.run_cpu on the current GPU: out is a device pointer to (n_lors,) float32 "
          "(0: count only); runs on `stream` and returns when done. At most 2^31 decays per call.");
}

}  // namespace dp::bind
