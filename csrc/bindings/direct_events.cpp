// pybind11 bindings of DIRECT's compiled event simulation + deposition (csrc/direct/events*). The
// Python wrapper is directpet.direct.simulation.simulate_deposit; these functions take plain
// numbers and arrays.
//
//   components : (n, 8) float64 rows (kind, x, y, z, radius, length, concentration, activity),
//                kind 0 cylinder about z (x, y ignored), 1 sphere, 2 point source; mm, per mm^3.
//   scanner    : dict radius_mm, half_length_mm, sin_theta_max, blur_sigma_mm, tof_sigma_ps,
//                water_radius_mm, water_half_length_mm, mu_per_mm (0 switches a part off).
//   grid       : shape (nz, ny, nx), voxel_size (vz, vy, vx) mm; views: n_phi, n_theta, theta_max (rad).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "../direct/events.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace events = dp::direct::events;

namespace {

using events::Component;
using events::Counters;
using events::SimParams;

double finite(double v, const std::string& name) {
    if (!std::isfinite(v)) throw ValueError(name + ": expected a finite value, got " + std::to_string(v));
    return v;
}

double positive(double v, const std::string& name) {
    if (!(std::isfinite(v) && v > 0))
        throw ValueError(name + ": expected a positive finite value, got " + std::to_string(v));
    return v;
}

double non_negative(double v, const std::string& name) {
    if (!(std::isfinite(v) && v >= 0))
        throw ValueError(name + ": expected a finite value >= 0, got " + std::to_string(v));
    return v;
}

// Positive-activity components first (with the cumulative table), then the negative (cold) ones;
// components of zero activity are dropped, as AnalyticPhantom.sample does.
events::Phantom make_phantom(const py::array& components) {
    if (!components.dtype().is(py::dtype::of<double>()))
        throw TypeError("components: expected dtype float64, got " + std::string(py::str(components.dtype())));
    if (components.ndim() != 2 || components.shape(1) != 8)
        throw ValueError("components: expected an (n, 8) array (kind, x, y, z, radius, length, "
                         "concentration, activity), got shape " + shape_str(components));
    if (!(components.flags() & py::array::c_style))
        throw ValueError("components: array must be C-contiguous");
    const auto n = components.shape(0);
    if (n < 1 || n > events::kMaxComponents)
        throw ValueError("components: expected 1 to " + std::to_string(events::kMaxComponents) +
                         " phantom components, got " + std::to_string(n));
    const double* a = data_of<double>(components);
    std::vector<Component> pos, neg;
    std::vector<double> w;
    for (py::ssize_t i = 0; i < n; ++i) {
        const double* r = a + 8 * i;
        const std::string row = "components[" + std::to_string(i) + "]";
        for (int k = 0; k < 8; ++k) finite(r[k], row);
        const int kind = static_cast<int>(r[0]);
        if (kind != r[0] || kind < events::kCylinder || kind > events::kPoint)
            throw ValueError(row + ": kind must be 0 (cylinder), 1 (sphere) or 2 (point), got " +
                             std::to_string(r[0]));
        if (kind != events::kPoint) positive(r[4], row + " radius");
        if (kind == events::kCylinder) positive(r[5], row + " length");
        if (kind == events::kPoint && r[7] < 0)
            throw ValueError(row + ": a point source needs a non-negative activity");
        const Component c{kind, static_cast<float>(r[1]), static_cast<float>(r[2]),
                          static_cast<float>(r[3]), static_cast<float>(r[4]),
                          static_cast<float>(0.5 * r[5]), static_cast<float>(r[6])};
        if (r[7] > 0) {
            pos.push_back(c);
            w.push_back(r[7]);
        } else if (r[7] < 0) {
            neg.push_back(c);
        }
    }
    double total = 0, net = 0;
    for (double v : w) total += v;
    for (py::ssize_t i = 0; i < n; ++i) net += a[8 * i + 7];
    if (pos.empty() || !(total > 0) || !(net > 0))
        throw ValueError("components: the phantom's total activity must be positive (got " +
                         std::to_string(net) + ")");
    events::Phantom p{};
    p.n_pos = static_cast<int>(pos.size());
    p.n_all = static_cast<int>(pos.size() + neg.size());
    p.has_cold = neg.empty() ? 0 : 1;
    double acc = 0;
    for (int k = 0; k < p.n_pos; ++k) {
        acc += w[k];
        p.cum[k] = acc / total;
        p.comp[k] = pos[k];
    }
    for (size_t k = 0; k < neg.size(); ++k) p.comp[p.n_pos + k] = neg[k];
    return p;
}

double get(const py::dict& d, const char* key) {
    if (!d.contains(key)) throw ValueError(std::string("scanner: missing key '") + key + "'");
    return d[key].cast<double>();
}

events::ScannerParams make_scanner(const py::dict& d) {
    events::ScannerParams s{};
    s.radius = static_cast<float>(positive(get(d, "radius_mm"), "scanner radius_mm"));
    s.half_length = static_cast<float>(positive(get(d, "half_length_mm"), "scanner half_length_mm"));
    const double st = get(d, "sin_theta_max");
    if (!(st > 0 && st < 1)) throw ValueError("scanner sin_theta_max: expected a value in (0, 1), got " + std::to_string(st));
    s.sin_theta_max = static_cast<float>(st);
    s.blur_sigma = static_cast<float>(non_negative(get(d, "blur_sigma_mm"), "scanner blur_sigma_mm"));
    s.tof_sigma = static_cast<float>(non_negative(get(d, "tof_sigma_ps"), "scanner tof_sigma_ps"));
    s.mu = static_cast<float>(non_negative(get(d, "mu_per_mm"), "scanner mu_per_mm"));
    if (s.mu > 0) {
        s.water_radius = static_cast<float>(positive(get(d, "water_radius_mm"), "scanner water_radius_mm"));
        s.water_half_length =
            static_cast<float>(positive(get(d, "water_half_length_mm"), "scanner water_half_length_mm"));
    }
    return s;
}

events::GridParams make_grid(const std::vector<int>& shape, const std::vector<double>& voxel) {
    require(shape.size() == 3, "shape: expected (nz, ny, nx)");
    require(voxel.size() == 3, "voxel_size: expected (vz, vy, vx)");
    for (int k = 0; k < 3; ++k) {
        require(shape[k] > 0, "shape: every extent must be positive");
        positive(voxel[k], "voxel_size");
    }
    return {shape[0], shape[1], shape[2], static_cast<float>(voxel[0]), static_cast<float>(voxel[1]),
            static_cast<float>(voxel[2])};
}

events::ViewParams make_views(int n_phi, int n_theta, double theta_max) {
    require(n_phi > 0, "n_phi: expected a positive integer");
    require(n_theta > 0, "n_theta: expected a positive integer");
    if (!(theta_max >= 0 && theta_max < 1.5707963267948966))
        throw ValueError("theta_max: expected radians in [0, pi/2), got " + std::to_string(theta_max));
    return {n_phi, n_theta, static_cast<float>(theta_max)};
}

SimParams make_params(const py::array& components, const py::dict& scanner,
                      const std::vector<int>& shape, const std::vector<double>& voxel, int n_phi,
                      int n_theta, double theta_max) {
    SimParams P{};
    P.phantom = make_phantom(components);
    P.scanner = make_scanner(scanner);
    P.grid = make_grid(shape, voxel);
    P.views = make_views(n_phi, n_theta, theta_max);
    return P;
}

std::vector<py::ssize_t> histo_shape(const SimParams& P) {
    return {static_cast<py::ssize_t>(P.views.n_phi) * P.views.n_theta, P.grid.nz, P.grid.ny, P.grid.nx};
}

py::dict to_dict(const Counters& c) {
    py::dict d;
    d["n_decays"] = c.decays;
    d["n_trues"] = c.trues;
    d["n_deposited"] = c.deposited;
    d["n_outside_views"] = c.outside_views;
    d["n_outside_grid"] = c.outside_grid;
    return d;
}

// Between rounds: let Ctrl-C through (KeyboardInterrupt) and report progress (accepted events).
events::RoundHook make_hook(const py::object& progress) {
    return [progress](const Counters& c) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!progress.is_none()) progress(c.trues);
    };
}

uint64_t checked_events(long long n_events) {
    if (n_events < 1) throw ValueError("n_events: expected a positive integer, got " + std::to_string(n_events));
    return static_cast<uint64_t>(n_events);
}

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

#ifdef DIRECTPET_WITH_CUDA
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
#endif

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
#ifdef DIRECTPET_WITH_CUDA
    m.def("direct_simulate_deposit_cuda", &simulate_cuda, py::arg("components"), py::arg("scanner"),
          py::arg("shape"), py::arg("voxel_size"), py::arg("n_phi"), py::arg("n_theta"),
          py::arg("theta_max"), py::arg("n_events"), py::arg("seed"), py::arg("out"),
          py::arg("stream") = 0, py::arg("progress") = py::none(),
          "As direct_simulate_deposit_cpu on the GPU: out is a device pointer to (n_views, nz, ny, nx) "
          "float32; runs on `stream` and returns when done.");
#endif
}

}  // namespace dp::bind
