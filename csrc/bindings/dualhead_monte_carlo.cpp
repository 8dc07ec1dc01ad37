// pybind11 bindings of the dual-head event Monte Carlo (csrc/dualhead/monte_carlo*). The Python
// wrapper is directpet.dualhead.monte_carlo.simulate_events; here:
//
//   DualHeadMonteCarlo(scanner, activity): the checked plan (alias table, direction band).
//     scanner  : dict of DualHeadScanner's fields;
//     activity : (n_z D, n_y D, n_planes) float32 C-contiguous, finite, >= 0, not all zero.
//   .run_cpu(seed, first, count, weight, out, threads): decays first .. first + count - 1 on the CPU,
//     adding weight to out (n_lors,) float32 (or None: count only); returns the counters.
//   .trace(seed, first, count): the same decays with their histories (NumPy arrays).
//   dualhead_mc_run_cuda(engine, seed, first, count, weight, out, stream) (CUDA builds): as run_cpu
//     with out a device pointer (0: count only); the alias table is uploaded once per engine.
#include "dualhead_monte_carlo_args.hpp"

namespace dp::bind {

namespace {

using namespace dualhead_monte_carlo_args;

std::unique_ptr<Engine> make_engine(const py::dict& scanner, const py::array& activity) {
    const mc::ScannerSpec s = make_scanner(scanner);
    if (s.n_y < 1 || s.n_z < 1 || s.voxels_per_crystal < 1 || s.n_planes < 1)
        throw ValueError("scanner: n_y, n_z, voxels_per_crystal and n_planes must be positive");
    const py::ssize_t D = s.voxels_per_crystal;
    check_array<float>(activity, "activity", {s.n_z * D, s.n_y * D, s.n_planes});
    auto e = std::make_unique<Engine>();
    const float* a = data_of<float>(activity);
    {
        py::gil_scoped_release release;
        e->plan = mc::make_plan(s, a);
    }
    const int64_t crystals = int64_t(s.n_y) * s.n_z;
    e->n_lors = crystals * crystals;
    return e;
}


py::dict run_cpu(Engine& e, unsigned long long seed, long long first, long long count, double weight,
                 const py::object& out, int threads) {
    const uint64_t f = first_arg(first), n = count_arg(count, "count");
    const float w = weight_arg(weight);
    float* counts = nullptr;
    py::array arr;
    if (!out.is_none()) {
        if (!py::isinstance<py::array>(out)) throw TypeError("out: expected a numpy.ndarray or None");
        arr = out.cast<py::array>();
        check_array<float>(arr, "out", {e.n_lors});
        counts = mutable_data_of<float>(arr);
    }
    mc::Counters c;
    {
        py::gil_scoped_release release;
        c = mc::simulate_cpu(e.plan, seed, f, n, w, counts, threads);
    }
    return to_dict(c);
}

// Decays first .. first + count - 1 with their histories, as a dict of NumPy arrays.
py::dict trace(const Engine& e, unsigned long long seed, long long first, long long count) {
    const uint64_t f = first_arg(first), n = count_arg(count, "count");
    if (n > (1ull << 24)) throw ValueError("count: at most 2^24 decays can be traced, got " + std::to_string(n));
    std::vector<mc::DecayRecord> recs;
    {
        py::gil_scoped_release release;
        recs = mc::trace_cpu(e.plan, seed, f, n);
    }
    const auto m = static_cast<py::ssize_t>(n);
    const py::ssize_t three = 3;
    py::array_t<float> source({m, three}), point({m, three}), dir1({m, three}), dir2({m, three}), hit1({m, three}),
        hit2({m, three}), paths({m, py::ssize_t{2}});
    py::array_t<int32_t> crystal1({m, py::ssize_t{2}}), crystal2({m, py::ssize_t{2}}), fates({m, py::ssize_t{2}}),
        outcome(m);
    py::array_t<int64_t> index(m);
    auto S = source.mutable_unchecked<2>();
    auto P = point.mutable_unchecked<2>();
    auto U = dir1.mutable_unchecked<2>();
    auto W = dir2.mutable_unchecked<2>();
    auto H1 = hit1.mutable_unchecked<2>();
    auto H2 = hit2.mutable_unchecked<2>();
    auto L = paths.mutable_unchecked<2>();
    auto C1 = crystal1.mutable_unchecked<2>();
    auto C2 = crystal2.mutable_unchecked<2>();
    auto F = fates.mutable_unchecked<2>();
    auto O = outcome.mutable_unchecked<1>();
    auto I = index.mutable_unchecked<1>();
    for (py::ssize_t i = 0; i < m; ++i) {
        const mc::DecayRecord& r = recs[static_cast<size_t>(i)];
        const float s[3] = {r.sx, r.sy, r.sz}, p[3] = {r.x, r.y, r.z}, u[3] = {r.ux, r.uy, r.uz},
                    w[3] = {r.wx, r.wy, r.wz}, h1[3] = {r.h1.x, r.h1.y, r.h1.z}, h2[3] = {r.h2.x, r.h2.y, r.h2.z};
        for (int k = 0; k < 3; ++k) {
            S(i, k) = s[k];
            P(i, k) = p[k];
            U(i, k) = u[k];
            W(i, k) = w[k];
            H1(i, k) = h1[k];
            H2(i, k) = h2[k];
        }
        L(i, 0) = r.path1;
        L(i, 1) = r.path2;
        C1(i, 0) = r.h1.cy;
        C1(i, 1) = r.h1.cz;
        C2(i, 0) = r.h2.cy;
        C2(i, 1) = r.h2.cz;
        F(i, 0) = r.fate1;
        F(i, 1) = r.fate2;
        O(i) = r.outcome;
        I(i) = r.index;
    }
    py::dict d;
    d["source"] = source;
    d["point"] = point;
    d["direction1"] = dir1;
    d["direction2"] = dir2;
    d["path"] = paths;
    d["fate"] = fates;
    d["hit1"] = hit1;
    d["hit2"] = hit2;
    d["crystal1"] = crystal1;
    d["crystal2"] = crystal2;
    d["outcome"] = outcome;
    d["index"] = index;
    return d;
}

py::dict band_dict(const Engine& e) {
    const mc::Band& b = e.plan.band;
    py::dict d;
    d["band_fraction"] = b.fraction;
    d["sin_elevation_max"] = b.sin_el_max;
    d["psi_max_rad"] = b.psi_max;
    d["reach_mm"] = b.reach_mm;
    d["full_hemisphere"] = b.full_hemisphere;
    return d;
}

}  // namespace

void register_dualhead_monte_carlo(py::module_& m) {
    m.attr("DUALHEAD_MC_OUTCOMES") = py::make_tuple("out_of_band", "missed", "not_detected", "true");
    m.attr("DUALHEAD_MC_FATES") = py::make_tuple("no_crystal", "passed", "interacted");
    py::class_<Engine>(m, "DualHeadMonteCarlo",
                       "The dual-head event Monte Carlo's plan: the activity's alias table and photon 1's "
                       "direction band (checked scanner and activity).")
        .def(py::init(&make_engine), py::arg("scanner"), py::arg("activity"))
        .def_property_readonly("band", &band_dict)
        .def_property_readonly("n_lors", [](const Engine& e) { return e.n_lors; })
        .def("run_cpu", &run_cpu, py::arg("seed"), py::arg("first"), py::arg("count"), py::arg("weight") = 1.0,
             py::arg("out") = py::none(), py::arg("threads") = 0,
             "Decays first .. first + count - 1 on the CPU (OpenMP): adds weight (+1 or -1) to out[lor] "
             "(n_lors,) float32 for every true (out None: count only). Returns the counters.")
        .def("trace", &trace, py::arg("seed"), py::arg("first"), py::arg("count"),
             "Decays first .. first + count - 1 with their histories (CPU).");
}

}  // namespace dp::bind
