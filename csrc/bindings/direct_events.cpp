// pybind11 bindings of DIRECT's compiled event simulation + deposition (csrc/direct/events*). The
// Python wrapper is directpet.direct.simulation.simulate_deposit; these functions take plain
// numbers and arrays.
//
//   components : (n, 8) float64 rows (kind, x, y, z, radius, length, concentration, activity),
//                kind 0 cylinder about z (x, y ignored), 1 sphere, 2 point source; mm, per mm^3.
//   scanner    : dict radius_mm, half_length_mm, sin_theta_max, blur_sigma_mm, tof_sigma_ps,
//                water_radius_mm, water_half_length_mm, mu_per_mm (0 switches a part off).
//   grid       : shape (nz, ny, nx), voxel_size (vz, vy, vx) mm; views: n_phi, n_theta, theta_max (rad).
#include "direct_events_args.hpp"

namespace dp::bind {

namespace {

using namespace direct_events_args;


py::dict simulate_cpu(const py::array& components, const py::dict& scanner, std::vector<int> shape,
                      std::vector<double> voxel, int n_phi, int n_theta, double theta_max,
                      long long n_events, unsigned long long seed, py::array& out, int threads,
                      const py::object& progress, bool batched) {
    const SimParams P = make_params(components, scanner, shape, voxel, n_phi, n_theta, theta_max);
    const uint64_t n = checked_events(n_events);
    check_array<float>(out, "out", histo_shape(P));
    float* h = mutable_data_of<float>(out);
    const events::RoundHook hook = make_hook(progress);
    Counters c;
    {
        py::gil_scoped_release release;
        c = events::simulate_deposit_cpu(P, n, seed, h, threads, hook, batched);
    }
    return to_dict(c);
}

py::dict deposit_events_cpu(const py::array& p1, const py::array& p2, const py::array& dt,
                            std::vector<int> shape, std::vector<double> voxel, int n_phi, int n_theta,
                            double theta_max, py::array& out, int threads) {
    const events::GridParams g = make_grid(shape, voxel);
    const events::ViewParams v = make_views(n_phi, n_theta, theta_max);
    check_array<float>(p1, "p1", {-1, 3});
    const py::ssize_t n = p1.shape(0);
    check_array<float>(p2, "p2", {n, 3});
    check_array<float>(dt, "dt", {n});
    check_array<float>(out, "out", {static_cast<py::ssize_t>(n_phi) * n_theta, g.nz, g.ny, g.nx});
    float* h = mutable_data_of<float>(out);
    Counters c;
    {
        py::gil_scoped_release release;
        c = events::deposit_events_cpu(g, v, data_of<float>(p1), data_of<float>(p2), data_of<float>(dt), n,
                                    h, threads);
    }
    py::dict d = to_dict(c);
    d["n_events"] = c.trues;
    return d;
}

}  // namespace

void register_direct_events(py::module_& m) {
    m.attr("DIRECT_SIM_CPU_STREAMS") = events::kCpuStreams;
    m.attr("DIRECT_SIM_GPU_STREAMS") = events::kGpuStreams;
    m.def("direct_simulate_deposit_cpu", &simulate_cpu, py::arg("components"), py::arg("scanner"),
          py::arg("shape"), py::arg("voxel_size"), py::arg("n_phi"), py::arg("n_theta"),
          py::arg("theta_max"), py::arg("n_events"), py::arg("seed"), py::arg("out"),
          py::arg("threads") = 0, py::arg("progress") = py::none(), py::arg("batched") = true,
          "Simulate n_events accepted true coincidences and add them to out (n_views, nz, ny, nx) "
          "float32 on the CPU (OpenMP). Returns the counters as a dict. batched=False runs the "
          "CUDA kernel's decay-by-decay code path (tests).");
    m.def("direct_deposit_events_cpu", &deposit_events_cpu, py::arg("p1"), py::arg("p2"), py::arg("dt"),
          py::arg("shape"), py::arg("voxel_size"), py::arg("n_phi"), py::arg("n_theta"),
          py::arg("theta_max"), py::arg("out"), py::arg("threads") = 0,
          "Deposit list-mode events (p1, p2 (n, 3) float32 mm, dt (n,) float32 ps) into out like "
          "deposit(mode='nearest'), with the compiled per-event code.");
}

}  // namespace dp::bind
