// pybind11 bindings of the FIRST event-level Monte Carlo (csrc/first/monte_carlo*). The Python
// wrapper is directpet.first.monte_carlo.simulate_sinogram; these functions take plain numbers
// and arrays:
//
//   scanner    : dict of RotatingScanner's fields plus mean_depth_mm (E0 = depth_moments(0)[0]);
//   activity   : (nz, ny, nx) float32 C-contiguous, finite, >= 0, not all zero;
//   voxel_size : (vz, vy, vx) mm of the activity's ImageGrid.
#include "first_monte_carlo_args.hpp"

namespace dp::bind {

namespace {

using namespace first_monte_carlo_args;


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

}  // namespace dp::bind
