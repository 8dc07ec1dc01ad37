// Argument checks shared by the CPU (direct_events.cpp) and CUDA (direct_events_cuda.cpp) bindings of
// DIRECT's compiled event simulation + deposition: plain Python values and arrays in, checked
// simulation parameters out.
//
//   components : (n, 8) float64 rows (kind, x, y, z, radius, length, concentration, activity),
//                kind 0 cylinder about z (x, y ignored), 1 sphere, 2 point source; mm, per mm^3.
//   scanner    : dict radius_mm, half_length_mm, sin_theta_max, blur_sigma_mm, tof_sigma_ps,
//                water_radius_mm, water_half_length_mm, mu_per_mm (0 switches a part off).
//   grid       : shape (nz, ny, nx), voxel_size (vz, vy, vx) mm; views: n_phi, n_theta, theta_max (rad).
#pragma once

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

namespace dp::bind::direct_events_args {

namespace events = dp::direct::events;

using events::Component;
using events::Counters;
using events::SimParams;

inline double finite(double v, const std::string& name) {
    if (!std::isfinite(v)) throw ValueError(name + ": expected a finite value, got " + std::to_string(v));
    return v;
}

inline double positive(double v, const std::string& name) {
    if (!(std::isfinite(v) && v > 0))
        throw ValueError(name + ": expected a positive finite value, got " + std::to_string(v));
    return v;
}

inline double non_negative(double v, const std::string& name) {
    if (!(std::isfinite(v) && v >= 0))
        throw ValueError(name + ": expected a finite value >= 0, got " + std::to_string(v));
    return v;
}

// Positive-activity components first (with the cumulative table), then the negative (cold) ones;
// components of zero activity are dropped, as AnalyticPhantom.sample does.
inline events::Phantom make_phantom(const py::array& components) {
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

inline double get(const py::dict& d, const char* key) {
    if (!d.contains(key)) throw ValueError(std::string("scanner: missing key '") + key + "'");
    return d[key].cast<double>();
}

inline events::ScannerParams make_scanner(const py::dict& d) {
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

inline events::GridParams make_grid(const std::vector<int>& shape, const std::vector<double>& voxel) {
    require(shape.size() == 3, "shape: expected (nz, ny, nx)");
    require(voxel.size() == 3, "voxel_size: expected (vz, vy, vx)");
    for (int k = 0; k < 3; ++k) {
        require(shape[k] > 0, "shape: every extent must be positive");
        positive(voxel[k], "voxel_size");
    }
    return {shape[0], shape[1], shape[2], static_cast<float>(voxel[0]), static_cast<float>(voxel[1]),
            static_cast<float>(voxel[2])};
}

inline events::ViewParams make_views(int n_phi, int n_theta, double theta_max) {
    require(n_phi > 0, "n_phi: expected a positive integer");
    require(n_theta > 0, "n_theta: expected a positive integer");
    if (!(theta_max >= 0 && theta_max < 1.5707963267948966))
        throw ValueError("theta_max: expected radians in [0, pi/2), got " + std::to_string(theta_max));
    return {n_phi, n_theta, static_cast<float>(theta_max)};
}

inline SimParams make_params(const py::array& components, const py::dict& scanner,
                      const std::vector<int>& shape, const std::vector<double>& voxel, int n_phi,
                      int n_theta, double theta_max) {
    SimParams P{};
    P.phantom = make_phantom(components);
    P.scanner = make_scanner(scanner);
    P.grid = make_grid(shape, voxel);
    P.views = make_views(n_phi, n_theta, theta_max);
    return P;
}

inline std::vector<py::ssize_t> histo_shape(const SimParams& P) {
    return {static_cast<py::ssize_t>(P.views.n_phi) * P.views.n_theta, P.grid.nz, P.grid.ny, P.grid.nx};
}

inline py::dict to_dict(const Counters& c) {
    py::dict d;
    d["n_decays"] = c.decays;
    d["n_trues"] = c.trues;
    d["n_deposited"] = c.deposited;
    d["n_outside_views"] = c.outside_views;
    d["n_outside_grid"] = c.outside_grid;
    return d;
}

// Between rounds: let Ctrl-C through (KeyboardInterrupt) and report progress (accepted events).
inline events::RoundHook make_hook(const py::object& progress) {
    return [progress](const Counters& c) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!progress.is_none()) progress(c.trues);
    };
}

inline uint64_t checked_events(long long n_events) {
    if (n_events < 1) throw ValueError("n_events: expected a positive integer, got " + std::to_string(n_events));
    return static_cast<uint64_t>(n_events);
}

}  // namespace dp::bind::direct_events_args
