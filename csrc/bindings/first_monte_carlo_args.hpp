// Argument checks shared by the CPU (first_monte_carlo.cpp) and CUDA (first_monte_carlo_cuda.cpp)
// bindings of the FIRST event-level Monte Carlo:
//   scanner    : dict of RotatingScanner's fields plus mean_depth_mm (E0 = depth_moments(0)[0]);
//   activity   : (nz, ny, nx) float32 C-contiguous, finite, >= 0, not all zero;
//   voxel_size : (vz, vy, vx) mm of the activity's ImageGrid.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "../first/monte_carlo_api.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind::first_monte_carlo_args {

using first::mc::Counters;
using first::mc::Plan;

inline first::mc::ScannerSpec make_scanner(const py::dict& d) {
    first::mc::ScannerSpec s{};
    s.n_rows = dict_value<int>(d, "n_rows");
    s.n_columns = dict_value<int>(d, "n_columns");
    s.n_angles = dict_value<int>(d, "n_angles");
    s.n_radial = dict_value<int>(d, "n_radial");
    s.pitch_mm = dict_value<double>(d, "pitch_mm");
    s.crystal_mm = dict_value<double>(d, "crystal_mm");
    s.depth_mm = dict_value<double>(d, "depth_mm");
    s.mu_per_mm = dict_value<double>(d, "mu_per_mm");
    s.head_distance_mm = dict_value<double>(d, "head_distance_mm");
    s.radial_bin_mm = dict_value<double>(d, "radial_bin_mm");
    s.mean_depth_mm = dict_value<double>(d, "mean_depth_mm");
    s.positron_range_fwhm_mm = dict_value<double>(d, "positron_range_fwhm_mm");
    s.noncollinearity_fwhm_deg = dict_value<double>(d, "noncollinearity_fwhm_deg");
    s.intrinsic_fwhm_mm = dict_value<double>(d, "intrinsic_fwhm_mm");
    return s;
}

// The checked plan: scanner values, the activity's dtype / rank / contiguity here, its values
// (finite, >= 0, not all zero, between the heads) in make_plan.
inline Plan make_plan(const py::dict& scanner, const py::array& activity, const std::vector<double>& voxel_size) {
    const first::mc::ScannerSpec s = make_scanner(scanner);
    check_array<float>(activity, "activity", {-1, -1, -1});
    if (voxel_size.size() != 3) throw ValueError("voxel_size: expected (vz, vy, vx)");
    for (py::ssize_t k = 0; k < 3; ++k)
        if (activity.shape(k) < 1 || activity.shape(k) > (1 << 30))
            throw ValueError("activity: every extent must be in [1, 2^30], got shape " + shape_str(activity));
    const first::mc::GridSpec g{static_cast<int>(activity.shape(0)), static_cast<int>(activity.shape(1)),
                                static_cast<int>(activity.shape(2)), voxel_size[0], voxel_size[1], voxel_size[2]};
    return first::mc::make_plan(s, g, data_of<float>(activity));
}

inline std::vector<py::ssize_t> sinogram_shape(const Plan& plan) {
    const first::mc::McParams& p = plan.params;
    return {p.n_angles, p.n_rows, p.n_rows, p.n_radial};
}

inline uint64_t positive_count(long long v, const char* name) {
    if (v < 1) throw ValueError(std::string(name) + ": expected a positive integer, got " + std::to_string(v));
    return static_cast<uint64_t>(v);
}

inline py::dict to_dict(const Counters& c, const Plan& plan) {
    py::dict d;
    d["n_decays"] = c.decays;
    d["n_entered_both"] = c.entered_both;
    d["n_detected_both"] = c.detected_both;
    d["n_binned"] = c.binned;
    d["n_outside_radial"] = c.outside_radial;
    d["band_fraction"] = plan.band.fraction;
    d["sin_elevation_max"] = plan.band.sin_el_max;
    d["psi_max_rad"] = plan.band.psi_max;
    d["source_radius_mm"] = plan.band.source_radius_mm;
    return d;
}

// Between chunks: let Ctrl-C through (KeyboardInterrupt) and report progress (decays so far).
inline first::mc::ChunkHook make_hook(const py::object& progress) {
    return [progress](const Counters& c) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!progress.is_none()) progress(c.decays);
    };
}

}  // namespace dp::bind::first_monte_carlo_args
