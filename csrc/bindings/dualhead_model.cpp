// pybind11 bindings of the dual-head analytic system model (csrc/dualhead/response*, patch_builder).
// The Python wrappers are directpet.dualhead.response.lor_response / build_patch_model; these take
//
//   scanner : dict of DualHeadScanner's fields (n_y, n_z, voxels_per_crystal, n_planes, pitch_mm,
//             crystal_mm, depth_mm, gap_mm, plane_mm, mu_per_mm; others are ignored);
//   c_u, c_l: (n, 2) int32 (c_y, c_z) on the extended crystal lattice; voxel: (n, 3) int32 (v_z, v_y, p).
// The CUDA variants (dualhead_model_cuda.cpp) take the same host arrays.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../dualhead/response_api.hpp"
#include "arrays.hpp"
#include "dualhead_model.hpp"

namespace py = pybind11;

namespace dp::bind {

dualhead::ScannerSpec dualhead_scanner(const py::dict& d) {
    dualhead::ScannerSpec s;
    s.n_y = dict_value<int>(d, "n_y");
    s.n_z = dict_value<int>(d, "n_z");
    s.D = dict_value<int>(d, "voxels_per_crystal");
    s.n_planes = dict_value<int>(d, "n_planes");
    s.pitch_mm = dict_value<double>(d, "pitch_mm");
    s.crystal_mm = dict_value<double>(d, "crystal_mm");
    s.depth_mm = dict_value<double>(d, "depth_mm");
    s.gap_mm = dict_value<double>(d, "gap_mm");
    s.plane_mm = dict_value<double>(d, "plane_mm");
    s.mu_per_mm = dict_value<double>(d, "mu_per_mm");
    return s;
}

std::vector<dualhead::Query> dualhead_queries(const dualhead::ResponseParams& P, const py::array& c_u,
                                              const py::array& c_l, const py::array& voxel) {
    check_array<int32_t>(c_u, "c_u", {-1, 2});
    const py::ssize_t n = c_u.shape(0);
    check_array<int32_t>(c_l, "c_l", {n, 2});
    check_array<int32_t>(voxel, "voxel", {n, 3});
    const int32_t* u = data_of<int32_t>(c_u);
    const int32_t* l = data_of<int32_t>(c_l);
    const int32_t* v = data_of<int32_t>(voxel);
    std::vector<dualhead::Query> q(static_cast<size_t>(n));
    const int64_t lim = 16383;  // offsets must fit int16 with room
    for (py::ssize_t i = 0; i < n; ++i) {
        const int32_t vz = v[3 * i], vy = v[3 * i + 1], p = v[3 * i + 2];
        if (p < 0 || p >= P.n_planes)
            throw ValueError("voxel: plane index " + std::to_string(p) + " outside [0, " +
                             std::to_string(P.n_planes) + ") (row " + std::to_string(i) + ")");
        if (vz < -lim * P.D || vz > lim * P.D || vy < -lim * P.D || vy > lim * P.D)
            throw ValueError("voxel: index out of range (row " + std::to_string(i) + ")");
        q[i] = dualhead::make_query(P.D, u[2 * i], u[2 * i + 1], l[2 * i], l[2 * i + 1], vz, vy, p);
        const int64_t cy = (int64_t(vy) - q[i].a) / P.D, cz = (int64_t(vz) - q[i].b) / P.D;
        const int64_t o[4] = {int64_t(u[2 * i]) - cy, int64_t(u[2 * i + 1]) - cz, int64_t(l[2 * i]) - cy,
                              int64_t(l[2 * i + 1]) - cz};
        for (int64_t x : o)
            if (x < -lim || x > lim)
                throw ValueError("c_u, c_l: crystal offset from the voxel's cell beyond 16383 (row " +
                                 std::to_string(i) + ")");
    }
    return q;
}

py::dict dualhead_build_result(const dualhead::PatchBuild& B) {
    auto vec = [](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
        std::copy(v.begin(), v.end(), a.mutable_data());
        return a;
    };
    py::dict d;
    d["tap_start"] = vec(B.tap_start);
    d["tap_dy"] = vec(B.tap_dy);
    d["tap_dz"] = vec(B.tap_dz);
    d["tap_w"] = vec(B.tap_w);
    d["candidates"] = B.candidates;
    d["evaluated"] = B.evaluated;
    d["dropped_below_threshold"] = B.dropped_below;
    d["seconds_generate"] = B.seconds_generate;
    d["seconds_evaluate"] = B.seconds_evaluate;
    d["seconds_assemble"] = B.seconds_assemble;
    return d;
}

std::vector<int32_t> dualhead_classes(const py::array& classes) {
    check_array<int32_t>(classes, "classes", {-1});
    const int32_t* c = data_of<int32_t>(classes);
    return std::vector<int32_t>(c, c + classes.shape(0));
}

dualhead::BuildHook dualhead_hook(const py::object& progress) {
    return [progress](int64_t done, int64_t total) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!progress.is_none()) progress(done, total);
    };
}

py::array_t<double> dualhead_response(const py::dict& scanner, const py::array& c_u, const py::array& c_l,
                                      const py::array& voxel, int angle_samples, int voxel_samples,
                                      const EvaluatorFactory& backend) {
    const auto P = dualhead::make_response_params(dualhead_scanner(scanner), angle_samples, voxel_samples);
    const std::vector<dualhead::Query> q = dualhead_queries(P, c_u, c_l, voxel);
    const dualhead::Evaluator eval = backend(P);
    py::array_t<double> out(static_cast<py::ssize_t>(q.size()));
    double* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        eval(q.data(), static_cast<int64_t>(q.size()), o);
    }
    return out;
}

py::dict dualhead_build(const py::dict& scanner, int angle_samples, int voxel_samples, double threshold,
                        const py::array& classes, long long chunk, const py::object& progress,
                        const EvaluatorFactory& backend) {
    const dualhead::ScannerSpec s = dualhead_scanner(scanner);
    const auto P = dualhead::make_response_params(s, angle_samples, voxel_samples);
    const std::vector<int32_t> k = dualhead_classes(classes);
    const dualhead::BuildHook hook = dualhead_hook(progress);
    const dualhead::Evaluator eval = backend(P);
    dualhead::PatchBuild B;
    {
        py::gil_scoped_release release;
        B = dualhead::build_patches(P, s.n_y, s.n_z, k.data(), static_cast<int>(k.size()), threshold, chunk, eval,
                                    hook);
    }
    return dualhead_build_result(B);
}

namespace {

// The OpenMP evaluator with `threads` threads (0: OpenMP's default).
EvaluatorFactory cpu_backend(int threads) {
    return [threads](const dualhead::ResponseParams& P) -> dualhead::Evaluator {
        return [P, threads](const dualhead::Query* q, int64_t n, double* out) {
            dualhead::evaluate_cpu(P, q, n, out, threads);
        };
    };
}

py::array_t<double> response_cpu(const py::dict& scanner, const py::array& c_u, const py::array& c_l,
                                 const py::array& voxel, int angle_samples, int voxel_samples, int threads) {
    return dualhead_response(scanner, c_u, c_l, voxel, angle_samples, voxel_samples, cpu_backend(threads));
}

py::dict build_cpu(const py::dict& scanner, int angle_samples, int voxel_samples, double threshold,
                   const py::array& classes, long long chunk, int threads, const py::object& progress) {
    return dualhead_build(scanner, angle_samples, voxel_samples, threshold, classes, chunk, progress,
                          cpu_backend(threads));
}

py::tuple candidates(const py::dict& scanner, const py::array& classes) {
    const dualhead::ScannerSpec s = dualhead_scanner(scanner);
    const auto P = dualhead::make_response_params(s, 1, 1);
    const std::vector<int32_t> k = dualhead_classes(classes);
    for (int32_t c : k)
        if (c < 0 || c >= s.n_y * s.n_z) throw ValueError("classes: index " + std::to_string(c) + " out of range");
    py::array_t<int64_t> ev(static_cast<py::ssize_t>(k.size())), all(static_cast<py::ssize_t>(k.size()));
    int64_t* e = ev.mutable_data();
    int64_t* a = all.mutable_data();
    {
        py::gil_scoped_release release;
        dualhead::patch_candidates(P, k.data(), static_cast<int>(k.size()), s.n_z, e, a);
    }
    return py::make_tuple(ev, all);
}

}  // namespace

void register_dualhead_model(py::module_& m) {
    m.def("dualhead_response_cpu", &response_cpu, py::arg("scanner"), py::arg("c_u"), py::arg("c_l"),
          py::arg("voxel"), py::arg("angle_samples"), py::arg("voxel_samples"), py::arg("threads") = 0,
          "h(c_u, c_l; voxel) (float64, (n,)) of the analytic dual-head response on the CPU: c_u, c_l (n, 2) "
          "int32 (c_y, c_z), voxel (n, 3) int32 (v_z, v_y, p).");
    m.def("dualhead_patch_candidates", &candidates, py::arg("scanner"), py::arg("classes"),
          "(evaluated, all_planes): int64 candidate counts per listed class over the planes x <= 0 and over "
          "all planes.");
    m.def("dualhead_build_patches_cpu", &build_cpu, py::arg("scanner"), py::arg("angle_samples"),
          py::arg("voxel_samples"), py::arg("threshold"), py::arg("classes"), py::arg("chunk"),
          py::arg("threads") = 0, py::arg("progress") = py::none(),
          "The patch model of the listed classes (ascending int32) on the CPU: dict with tap_start, tap_dy, "
          "tap_dz, tap_w and the build statistics. progress(done_classes, total) is called between chunks.");
}

}  // namespace dp::bind
