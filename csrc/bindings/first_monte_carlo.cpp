// pybind11 bindings of the FIRST event-level Monte Carlo (csrc/first/monte_carlo*). The Python
// wrapper is directpet.first.monte_carlo.simulate_sinogram; these functions take plain numbers
// and arrays:
//
//   scanner    : dict of RotatingScanner's fields plus mean_depth_mm (E0 = depth_moments(0)[0]);
//   activity   : (nz, ny, nx) float32 C-contiguous, finite, >= 0, not all zero;
//   voxel_size : (vz, vy, vx) mm of the activity's ImageGrid.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "../first/monte_carlo_api.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

using first::mc::Counters;
using first::mc::Plan;

first::mc::ScannerSpec make_scanner(const py::dict& d) {
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
Plan make_plan(const py::dict& scanner, const py::array& activity, const std::vector<double>& voxel_size) {
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

std::vector<py::ssize_t> sinogram_shape(const Plan& plan) {
    const first::mc::McParams& p = plan.params;
    return {p.n_angles, p.n_rows, p.n_rows, p.n_radial};
}

uint64_t positive_count(long long v, const char* name) {
    if (v < 1) throw ValueError(std::string(name) + ": expected a positive integer, got " + std::to_string(v));
    return static_cast<uint64_t>(v);
}

py::dict to_dict(const Counters& c, const Plan& plan) {
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
first::mc::ChunkHook make_hook(const py::object& progress) {
    return [progress](const Counters& c) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!progress.is_none()) progress(c.decays);
    };
}

py::dict simulate_cpu(const py::dict& scanner, const py::array& activity, const std::vector<double>& voxel_size,
                      long long n_decays, unsigned long long seed, py::array& out, long long chunk_decays,
                      int threads, const py::object& progress) {
    const Plan plan = make_plan(scanner, activity, voxel_size);
    const uint64_t n = positive_count(n_decays, "n_decays");
    const uint64_t chunk = positive_count(chunk_decays, "chunk_decays");
    check_array<float>(out, "out", sinogram_shape(plan));
    float* sino = mutable_data_of<float>(out);
    const first::mc::ChunkHook hook = make_hook(progress);
    Counters c;
    {
        py::gil_scoped_release release;
        c = first::mc::simulate_cpu(plan, n, seed, chunk, sino, threads, hook);
    }
    return to_dict(c, plan);
}

// Decays 0 .. n_decays - 1 with their histories, as a dict of NumPy arrays (tests, inspection).
py::dict trace_cpu(const py::dict& scanner, const py::array& activity, const std::vector<double>& voxel_size,
                   long long n_decays, unsigned long long seed) {
    const Plan plan = make_plan(scanner, activity, voxel_size);
    const uint64_t n = positive_count(n_decays, "n_decays");
    if (n > (1ull << 26)) throw ValueError("n_decays: at most 2^26 decays can be traced, got " + std::to_string(n));
    std::vector<first::mc::DecayRecord> recs;
    {
        py::gil_scoped_release release;
        recs = first::mc::trace_cpu(plan, n, seed);
    }
    const auto m = static_cast<py::ssize_t>(n);
    py::array_t<float> point({m, py::ssize_t{3}}), direction({m, py::ssize_t{3}}), gantry(m), y_a(m), y_b(m);
    py::array_t<int32_t> row_a(m), row_b(m), outcome(m);
    py::array_t<int64_t> index(m);
    auto P = point.mutable_unchecked<2>();
    auto U = direction.mutable_unchecked<2>();
    auto G = gantry.mutable_unchecked<1>();
    auto YA = y_a.mutable_unchecked<1>();
    auto YB = y_b.mutable_unchecked<1>();
    auto RA = row_a.mutable_unchecked<1>();
    auto RB = row_b.mutable_unchecked<1>();
    auto O = outcome.mutable_unchecked<1>();
    auto I = index.mutable_unchecked<1>();
    for (py::ssize_t i = 0; i < m; ++i) {
        const first::mc::DecayRecord& r = recs[static_cast<size_t>(i)];
        P(i, 0) = r.x;
        P(i, 1) = r.y;
        P(i, 2) = r.z;
        U(i, 0) = r.ux;
        U(i, 1) = r.uy;
        U(i, 2) = r.uz;
        G(i) = r.gantry;
        YA(i) = r.a.y;
        YB(i) = r.b.y;
        RA(i) = r.a.row;
        RB(i) = r.b.row;
        O(i) = r.outcome;
        I(i) = r.index;
    }
    py::dict d;
    d["point"] = point;
    d["direction"] = direction;
    d["gantry"] = gantry;
    d["y_a"] = y_a;
    d["y_b"] = y_b;
    d["row_a"] = row_a;
    d["row_b"] = row_b;
    d["outcome"] = outcome;
    d["index"] = index;
    return d;
}

#ifdef DIRECTPET_WITH_CUDA
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
#endif

}  // namespace

void register_first_monte_carlo(py::module_& m) {
    m.attr("FIRST_MC_OUTCOMES") = py::make_tuple("missed", "not_detected", "outside_radial", "binned");
    m.def("first_mc_simulate_cpu", &simulate_cpu, py::arg("scanner"), py::arg("activity"), py::arg("voxel_size"),
          py::arg("n_decays"), py::arg("seed"), py::arg("out"), py::arg("chunk_decays"), py::arg("threads") = 0,
          py::arg("progress") = py::none(),
          "Simulate decays 0 .. n_decays - 1 of the FIRST event Monte Carlo on the CPU (OpenMP) and add "
          "the binned coincidences to out (n_angles, n_rows, n_rows, n_radial) float32. Returns the "
          "counters and the direction band as a dict.");
    m.def("first_mc_trace_cpu", &trace_cpu, py::arg("scanner"), py::arg("activity"), py::arg("voxel_size"),
          py::arg("n_decays"), py::arg("seed"),
          "Decays 0 .. n_decays - 1 of the FIRST event Monte Carlo with their histories: annihilation "
          "point (world, mm), photon 1 direction (gantry frame), gantry angle, detections (y mm, row) "
          "in heads A and B, outcome (index into FIRST_MC_OUTCOMES) and flat sinogram index (-1 unless binned).");
}

#ifdef DIRECTPET_WITH_CUDA
void register_first_monte_carlo_cuda(py::module_& m) {
    m.def("first_mc_simulate_cuda", &simulate_cuda, py::arg("scanner"), py::arg("activity"), py::arg("voxel_size"),
          py::arg("n_decays"), py::arg("seed"), py::arg("out"), py::arg("chunk_decays"),
          py::arg("stream") = 0, py::arg("progress") = py::none(),
          "As first_mc_simulate_cpu on the GPU: out is a device pointer to (n_angles, n_rows, n_rows, "
          "n_radial) float32; runs on `stream` and returns when done.");
}
#endif

}  // namespace dp::bind
