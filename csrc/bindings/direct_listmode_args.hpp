// Arguments shared by the CPU (direct_listmode.cpp) and CUDA (direct_listmode_cuda.cpp) bindings of the
// compiled list-mode deposition (csrc/direct/listmode.hpp): the lattice, the views, a module-type pair's
// tables, and the totals as a dict. Both classes are driven by directpet.direct.petsird.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "../direct/listmode.hpp"
#include "arrays.hpp"

namespace py = pybind11;

namespace dp::bind::direct_listmode_args {

namespace lm = dp::direct::listmode;

inline lm::Lattice make_lattice(const std::vector<int>& shape, const std::vector<double>& voxel) {
    if (shape.size() != 3 || voxel.size() != 3)
        throw ValueError("shape, voxel_size: expected (nz, ny, nx) and (vz, vy, vx)");
    for (int n : shape) require_positive_int(n, "shape");
    for (double v : voxel) require_positive(v, "voxel_size");
    return {shape[0], shape[1], shape[2], voxel[0], voxel[1], voxel[2]};
}

inline lm::Views make_views(int n_phi, int n_theta, double theta_max) {
    require_positive_int(n_phi, "n_phi");
    require_positive_int(n_theta, "n_theta");
    require_non_negative(theta_max, "theta_max");
    return {n_phi, n_theta, theta_max};
}

inline std::vector<float> float_table(const py::array& a, const char* name, std::vector<py::ssize_t> shape) {
    check_array<float>(a, name, shape);
    const float* p = data_of<float>(a);
    for (py::ssize_t i = 0; i < a.size(); ++i)
        if (!std::isfinite(p[i])) throw ValueError(std::string(name) + ": expected finite values");
    return std::vector<float>(p, p + a.size());
}

// centres0/1: (n_elements, 3) float32 mm of each module type; dt_ps: (n_tof,) float32 TOF-bin centres.
inline lm::PairTables make_tables(const py::array& centres0, const py::array& centres1, const py::array& dt_ps,
                                  long long n_energy0, long long n_energy1) {
    lm::PairTables t;
    t.centres0 = float_table(centres0, "centres0", {-1, 3});
    t.centres1 = float_table(centres1, "centres1", {-1, 3});
    t.dt_ps = float_table(dt_ps, "dt_ps", {-1});
    require_positive_int(n_energy0, "n_energy0");
    require_positive_int(n_energy1, "n_energy1");
    require(!t.dt_ps.empty(), "dt_ps: expected at least one TOF bin");
    const long long n0 = static_cast<long long>(centres0.shape(0)) * n_energy0;
    const long long n1 = static_cast<long long>(centres1.shape(0)) * n_energy1;
    require(n0 < (1ll << 32) && n1 < (1ll << 32), "centres: more detection bins than 32-bit indices hold");
    t.n_energy0 = static_cast<uint32_t>(n_energy0), t.n_energy1 = static_cast<uint32_t>(n_energy1);
    t.n_bins0 = static_cast<uint32_t>(n0), t.n_bins1 = static_cast<uint32_t>(n1);
    return t;
}

inline py::tuple read_tuple(const lm::ListRead& r) {
    return py::make_tuple(r.end_offset, r.records, r.complete);
}

// {"pairs": [per handle: dict of counts and largest indices], "varint_too_long", "value_too_wide"}
inline py::dict totals_dict(const lm::Totals& t) {
    py::list pairs;
    for (const lm::PairTotals& p : t.pairs) {
        py::dict d;
        d["n_events"] = p.events;
        d["n_deposited"] = p.deposited;
        d["n_outside_views"] = p.outside_views;
        d["n_outside_grid"] = p.outside_grid;
        d["n_outside_scanner"] = p.outside_scanner;
        d["max_bin0"] = p.max_bin0;
        d["max_bin1"] = p.max_bin1;
        d["max_tof"] = p.max_tof;
        pairs.append(d);
    }
    py::dict d;
    d["pairs"] = pairs;
    d["varint_too_long"] = t.varint_too_long;
    d["value_too_wide"] = t.value_too_wide;
    return d;
}

constexpr const char* kClassDoc =
    "Deposits PETSIRD coincidence lists read straight from a file descriptor into DIRECT histo-images "
    "(deposit(mode='nearest') of coincidences_to_events of the list): "
    "(shape, voxel_size, n_phi, n_theta, theta_max, chunk_bytes, threads). add_pair(centres0, centres1, "
    "dt_ps, n_energy0, n_energy1) registers a module-type pair's tables and returns its handle; "
    "deposit(pair, fd, offset, n_events, out) reads the list at byte `offset` and returns "
    "(end_offset, events_read, complete); finish() returns the totals ({'pairs': per handle the counts "
    "and largest indices, 'varint_too_long', 'value_too_wide'}) and starts them again.";

}  // namespace dp::bind::direct_listmode_args
