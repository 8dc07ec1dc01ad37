// Argument checks and the engine shared by the CPU (dualhead_monte_carlo.cpp) and CUDA
// (dualhead_monte_carlo_cuda.cpp) bindings of the dual-head event Monte Carlo.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "../dualhead/monte_carlo_api.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind::dualhead_monte_carlo_args {

namespace mc = dualhead::mc;

inline mc::ScannerSpec make_scanner(const py::dict& d) {
    mc::ScannerSpec s{};
    s.n_y = dict_value<int>(d, "n_y");
    s.n_z = dict_value<int>(d, "n_z");
    s.voxels_per_crystal = dict_value<int>(d, "voxels_per_crystal");
    s.n_planes = dict_value<int>(d, "n_planes");
    s.pitch_mm = dict_value<double>(d, "pitch_mm");
    s.crystal_mm = dict_value<double>(d, "crystal_mm");
    s.depth_mm = dict_value<double>(d, "depth_mm");
    s.gap_mm = dict_value<double>(d, "gap_mm");
    s.plane_mm = dict_value<double>(d, "plane_mm");
    s.mu_per_mm = dict_value<double>(d, "mu_per_mm");
    s.positron_range_fwhm_mm = dict_value<double>(d, "positron_range_fwhm_mm");
    s.acollinearity_fwhm_deg = dict_value<double>(d, "acollinearity_fwhm_deg");
    return s;
}

inline uint64_t count_arg(long long v, const char* name) {
    if (v < 1) throw ValueError(std::string(name) + ": expected a positive integer, got " + std::to_string(v));
    return static_cast<uint64_t>(v);
}

inline uint64_t first_arg(long long v) {
    if (v < 0) throw ValueError("first: expected a decay number >= 0, got " + std::to_string(v));
    return static_cast<uint64_t>(v);
}

inline float weight_arg(double w) {
    if (w != 1.0 && w != -1.0) throw ValueError("weight: expected +1 or -1, got " + std::to_string(w));
    return static_cast<float>(w);
}

inline py::dict to_dict(const mc::Counters& c) {
    py::dict d;
    d["n_decays"] = c.decays;
    d["n_in_band"] = c.in_band;
    d["n_crossed"] = c.crossed;
    d["n_trues"] = c.trues;
    return d;
}

// The plan and the CUDA backend's copy of it on the device (a mc::gpu::DevicePlan, made by
// directpet._cuda at the first CUDA run). The copy is type-erased so that this struct is the same
// in the CPU module, which compiles without CUDA, and in the CUDA module, which shares the class.
struct Engine {
    mc::Plan plan;
    int64_t n_lors = 0;
    std::shared_ptr<void> device;
};

}  // namespace dp::bind::dualhead_monte_carlo_args
