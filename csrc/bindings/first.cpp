// pybind11 bindings of the FIRST family: the projector model and the CPU projectors (the CUDA ones
// are added by first_cuda.cpp when the CUDA backend is compiled in).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "../first/model.hpp"
#include "arrays.hpp"
#include "first_checks.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

first::HostModel build_model(int n, int n_rows, int n_angles, const py::array& table, const py::array& super_of_delta,
                             const py::array& flip_k, const py::array& slope) {
    require(n > 0, "n: expected a positive number of radial bins");
    require(n_rows > 0, "n_rows: expected a positive number of rows");
    check_array<float>(table, "table", {-1, n, -1, -1});
    const int nd = 2 * n_rows - 1;
    check_array<int32_t>(super_of_delta, "super_of_delta", {nd});
    if (!flip_k.dtype().is(py::dtype::of<bool>()))
        throw TypeError("flip_k: expected dtype bool, got " + std::string(py::str(flip_k.dtype())));
    if (flip_k.ndim() != 1 || flip_k.shape(0) != nd || !(flip_k.flags() & py::array::c_style))
        throw ValueError("flip_k: expected a contiguous (" + std::to_string(nd) + ",) array");
    check_array<float>(slope, "slope", {nd});
    require(table.shape(2) % 2 == 1 && table.shape(3) % 2 == 1, "table: expected odd tube extents (2J+1, 2K+1)");
    const first::Dims D{n, 2 * n_rows - 1, n_rows, static_cast<int>(table.shape(2) / 2),
                        static_cast<int>(table.shape(3) / 2), static_cast<int>(table.shape(0))};
    const float* t = data_of<float>(table);
    const int* s = data_of<int32_t>(super_of_delta);
    const auto* f = static_cast<const unsigned char*>(flip_k.data());
    const float* sl = data_of<float>(slope);
    py::gil_scoped_release release;
    return first::make_model(D, n_angles, t, s, f, sl);
}

void forward_cpu(const std::string& method, const first::HostModel& M, const py::array& image,
                 const py::array& angles, py::array& out, int threads) {
    const auto mth = first::parse_method(method);
    const first::AngleList A = checked_angles(angles, M);
    check_image(image, "image", M.D);
    check_sinogram(out, "out", M.D, static_cast<int>(A.index.size()));
    const float* x = data_of<float>(image);
    float* y = mutable_data_of<float>(out);
    py::gil_scoped_release release;
    first::forward_cpu(mth, M, A, x, y, threads);
}

void back_cpu(const std::string& method, const first::HostModel& M, const py::array& sino,
              const py::array& angles, py::array& out, int threads) {
    const auto mth = first::parse_method(method);
    const first::AngleList A = checked_angles(angles, M);
    check_sinogram(sino, "sinogram", M.D, static_cast<int>(A.index.size()));
    check_image(out, "out", M.D);
    const float* y = data_of<float>(sino);
    float* x = mutable_data_of<float>(out);
    py::gil_scoped_release release;
    first::back_cpu(mth, M, A, y, x, threads);
}

void back_faithful_cpu(const first::HostModel& M, const py::array& sino, const py::object& factors,
                       const py::array& angles, py::array& out, const py::object& sens, int threads) {
    const first::AngleList A = checked_angles(angles, M);
    const int n_sel = static_cast<int>(A.index.size());
    check_sinogram(sino, "sinogram", M.D, n_sel);
    check_image(out, "out", M.D);
    const float* f = nullptr;
    if (!factors.is_none()) {
        const py::array fa = factors.cast<py::array>();
        check_sinogram(fa, "factors", M.D, n_sel);
        f = data_of<float>(fa);
    }
    float* s = nullptr;
    if (!sens.is_none()) {
        py::array sa = sens.cast<py::array>();
        check_image(sa, "sens", M.D);
        s = mutable_data_of<float>(sa, "sens");
    }
    const float* y = data_of<float>(sino);
    float* x = mutable_data_of<float>(out);
    py::gil_scoped_release release;
    first::back_faithful_cpu(M, A, y, f, x, s, threads);
}

}  // namespace

void register_first(py::module_& m) {
    py::class_<first::HostModel>(m, "FirstModel",
                                 "Super-LOR tables, ring-difference map and folded slice taps (host).")
        .def(py::init(&build_model), py::arg("n"), py::arg("n_rows"), py::arg("n_angles"), py::arg("table"), py::arg("super_of_delta"),
             py::arg("flip_k"), py::arg("slope"))
        .def_property_readonly("folded_taps", [](const first::HostModel& M) {
            const auto& D = M.D;
            py::array_t<float> q({D.n_deltas(), D.n, D.n_j(), D.n_taps()});
            std::copy(M.Q.begin(), M.Q.end(), q.mutable_data());
            return q;
        }, "Q (n_deltas, n, 2J+1, 2K+2): the axial interpolation folded into slice taps per (delta, i, j).")
        .def_property_readonly("base", [](const first::HostModel& M) {
            py::array_t<int32_t> b({M.D.n_deltas(), M.D.n});
            std::copy(M.base.begin(), M.base.end(), b.mutable_data());
            return b;
        }, "floor of the axial offset (slices) of along-sample i per ring difference: (n_deltas, n).")
        .def("footprint", [](const first::HostModel& M, int a) {
            require(a >= 0 && a < M.n_angles, "a: angle index outside [0, n_angles)");
            const auto& D = M.D;
            const int64_t cells = static_cast<int64_t>(D.n) * D.n_rows_ext(), first_cell = a * cells;
            py::array_t<float> w({D.n, D.n_rows_ext(), first::kFootprintSide, first::kFootprintSide});
            py::array_t<int32_t> o({D.n, D.n_rows_ext(), 2});
            std::copy_n(M.fp_weight.begin() + first_cell * first::kFootprintSlots, cells * first::kFootprintSlots,
                        w.mutable_data());
            int32_t* od = o.mutable_data();
            for (int64_t k = 0; k < cells; ++k) {
                od[2 * k] = M.fp_origin[first_cell + k].ix0;
                od[2 * k + 1] = M.fp_origin[first_cell + k].iy0;
            }
            return py::make_tuple(w, o);
        }, py::arg("a"),
           "The in-plane footprint of angle a: (weights (n, n + 2J, 3, 3) [i, row + J, iy - iy0, ix - ix0], "
           "origins (n, n + 2J, 2) [i, row + J, (ix0, iy0)]): the overlap areas of each lattice cell with the "
           "3 x 3 voxels from its origin.");
    m.def("first_cell_voxel_overlap", &first::cell_voxel_overlap, py::arg("dx"), py::arg("dy"), py::arg("cos_phi"),
          py::arg("sin_phi"),
          "Overlap area of the unit square centred at (dx, dy) with the unit square centred at 0 turned by phi.");
    m.def("first_forward_cpu", &forward_cpu, py::arg("method"), py::arg("model"), py::arg("image"),
          py::arg("angles"), py::arg("out"), py::arg("threads") = 0,
          "out (n_sel, n_rows, n_rows, n) = H image for the listed angles, on the CPU (OpenMP).");
    m.def("first_back_cpu", &back_cpu, py::arg("method"), py::arg("model"), py::arg("sinogram"),
          py::arg("angles"), py::arg("out"), py::arg("threads") = 0,
          "out (nz, n, n) = back projection of the listed angles' sinogram ('faithful': the paper's "
          "interpolating back projector; 'matched' and 'fast': H^T).");
    m.def("first_back_faithful_cpu", &back_faithful_cpu, py::arg("model"), py::arg("sinogram"),
          py::arg("factors"), py::arg("angles"), py::arg("out"), py::arg("sens"), py::arg("threads") = 0,
          "The paper's back projector with the sensitivity in the same pass: out = B sinogram, "
          "sens = B factors (ones when factors is None; sens may be None).");
}

}  // namespace dp::bind
