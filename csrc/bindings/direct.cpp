// pybind11 bindings of the DIRECT family: LUT builder, CPU projectors and the attenuation map's
// projections (the CUDA ones are in direct_cuda.cpp, module directpet._cuda).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../direct/cpu.hpp"
#include "../direct/lut.hpp"
#include "arrays.hpp"
#include "direct_attenuation_args.hpp"
#include "direct_corrections_args.hpp"
#include "direct_lut_check.hpp"

namespace py = pybind11;

namespace dp::bind {

namespace {

direct::Grid make_grid(const std::vector<int>& shape, const std::vector<double>& voxel) {
    require(shape.size() == 3, "shape: expected (nz, ny, nx)");
    require(voxel.size() == 3, "voxel_size: expected (vz, vy, vx)");
    for (int k = 0; k < 3; ++k) {
        require(shape[k] > 0, "shape: every extent must be positive");
        require(voxel[k] > 0, "voxel_size: every size must be positive (mm)");
    }
    return {shape[0], shape[1], shape[2], voxel[0], voxel[1], voxel[2]};
}

template <typename T>
py::array_t<T> to_numpy(const std::vector<T>& v, std::vector<py::ssize_t> shape) {
    py::array_t<T> out(shape);
    std::copy(v.begin(), v.end(), out.mutable_data());
    return out;
}

py::array_t<int32_t> support(std::vector<int> shape, std::vector<double> voxel, double phi,
                             double theta, double semi_tof, double semi_radial, double semi_axial) {
    const auto g = make_grid(shape, voxel);
    std::vector<int32_t> offs;
    {
        py::gil_scoped_release release;
        offs = direct::enumerate_support(g, direct::view_axes(phi, theta), semi_tof, semi_radial,
                                         semi_axial);
    }
    return to_numpy(offs, {static_cast<py::ssize_t>(offs.size() / 3), 3});
}

py::array_t<int32_t> lormap(std::vector<int> shape, std::vector<double> voxel, double phi,
                            double epsilon, int a0) {
    const auto g = make_grid(shape, voxel);
    return to_numpy(direct::lor_map(g, phi, epsilon, a0), {g.ny, g.nx});
}

py::array_t<float> kernel_values(std::vector<int> shape, std::vector<double> voxel, double phi,
                                 double theta, const py::array& offsets, double sigma_tof,
                                 double sigma_axial, std::vector<double> sigma_radial,
                                 std::vector<double> narrow_weight, std::vector<double> wide_shift) {
    const auto g = make_grid(shape, voxel);
    check_array<int32_t>(offsets, "offsets", {-1, 3});
    const auto* o = data_of<int32_t>(offsets);
    std::vector<int32_t> offs(o, o + offsets.size());
    direct::KernelParams p{sigma_tof, sigma_axial, std::move(sigma_radial), std::move(narrow_weight),
                           std::move(wide_shift)};
    std::vector<float> vals;
    {
        py::gil_scoped_release release;
        vals = direct::kernel_values(g, direct::view_axes(phi, theta), offs, p);
    }
    return to_numpy(vals, {static_cast<py::ssize_t>(p.sigma_radial.size()),
                           static_cast<py::ssize_t>(offsets.shape(0))});
}

void project_cpu(bool forward, const py::array& src, py::array& dst, const py::array& lormap,
                 const py::array& offsets, const py::array& flip, const py::array& values,
                 int threads) {
    const char* src_name = forward ? "image" : "histo_image";
    check_array<float>(src, src_name, {-1, -1, -1});
    const direct::Dims d{static_cast<int>(src.shape(0)), static_cast<int>(src.shape(1)),
                         static_cast<int>(src.shape(2))};
    check_array<float>(dst, "out", {d.nz, d.ny, d.nx});
    if (src.data() == dst.data()) throw ValueError("out: must not alias the input array");
    const direct::LutRef lut = checked_lut(lormap, offsets, flip, values, d);
    const float* s = data_of<float>(src);
    float* o = mutable_data_of<float>(dst);
    py::gil_scoped_release release;
    direct::project_cpu(forward, s, o, d, lut, threads);
}

// The correction kernels' voxel-centre axes (zs, ys, xs: 1-D float64, mm) and their output
// (n_views, nz, ny, nx) float32, checked; returns (nz, ny, nx).
std::array<int, 3> voxel_axes(const py::array& zs, const py::array& ys, const py::array& xs, const py::array& out,
                              int n_views) {
    for (const auto& [a, name] : {std::pair{&zs, "zs"}, {&ys, "ys"}, {&xs, "xs"}}) check_array<double>(*a, name, {-1});
    const std::array<int, 3> n{static_cast<int>(zs.shape(0)), static_cast<int>(ys.shape(0)),
                               static_cast<int>(xs.shape(0))};
    check_array<float>(out, "out", {n_views, n[0], n[1], n[2]});
    return n;
}

}  // namespace

void register_direct(py::module_& m) {
    m.def("direct_attenuation_projection_cpu",
          [](const py::array& mu, std::array<double, 3> voxel, std::array<double, 3> u, std::array<double, 3> e1,
             std::array<double, 3> e2, double lo1, double lo2, double h, int n1, int n2, double t0, double dt, int n_t,
             int threads) {
              check_array<float>(mu, "mu", {-1, -1, -1});
              const auto g = attenuation_args::make_map(data_of<float>(mu), static_cast<int>(mu.shape(0)),
                                                        static_cast<int>(mu.shape(1)), static_cast<int>(mu.shape(2)), voxel);
              const auto P = attenuation_args::make_plane(u, e1, e2, lo1, lo2, h, n1, n2, t0, dt, n_t);
              py::array_t<double> out({static_cast<py::ssize_t>(n1), static_cast<py::ssize_t>(n2)});
              double* o = out.mutable_data();
              py::gil_scoped_release release;
              direct::atten::project_cpu(g, P, o, threads);
              return out;
          },
          py::arg("mu"), py::arg("voxel_size"), py::arg("u"), py::arg("e1"), py::arg("e2"), py::arg("lo1"),
          py::arg("lo2"), py::arg("h"), py::arg("n1"), py::arg("n2"), py::arg("t0"), py::arg("dt"), py::arg("n_t"),
          py::arg("threads") = 0,
          "Parallel projection of the attenuation map mu (nz, ny, nx) float32 (voxel_size (vz, vy, vx) mm, "
          "centred) along u onto the lattice s1 = lo1 + h i, s2 = lo2 + h j (axes e1, e2; (x, y, z) "
          "components): (n1, n2) float64 line integrals, midpoint rule t0 + (k + 1/2) dt, k < n_t.");
    m.def("direct_normalisation_cpu",
          [](std::array<double, 3> scanner, std::array<int, 2> rings, const py::array& dirs, const py::array& zs,
             const py::array& ys, const py::array& xs, const py::object& values, long long stride, double scale,
             const py::object& pairs, py::array& out, int threads) {
              const auto s = corrections_args::make_ring(scanner[0], scanner[1], scanner[2], rings[0], rings[1]);
              check_array<double>(dirs, "dirs", {-1, -1, 3});
              const int n_views = static_cast<int>(dirs.shape(0)), n_dirs = static_cast<int>(dirs.shape(1));
              const auto [nz, ny, nx] = voxel_axes(zs, ys, xs, out, n_views);
              py::array v, p;
              if (!values.is_none()) check_array<double>(v = values.cast<py::array>(), "values", {-1});
              if (!pairs.is_none()) check_array<double>(p = pairs.cast<py::array>(), "pairs", {-1, -1});
              const auto e = corrections_args::make_efficiencies(
                  s, values.is_none() ? nullptr : data_of<double>(v), values.is_none() ? 0 : v.size(), stride, scale,
                  pairs.is_none() ? nullptr : data_of<double>(p), pairs.is_none() ? 0 : p.size());
              float* o = mutable_data_of<float>(out);
              py::gil_scoped_release release;
              direct::corrections::normalisation_cpu(s, e, data_of<double>(dirs), n_views, n_dirs, data_of<double>(zs),
                                                       nz, data_of<double>(ys), ny, data_of<double>(xs), nx, o, threads);
          },
          py::arg("scanner"), py::arg("rings"), py::arg("dirs"), py::arg("zs"), py::arg("ys"), py::arg("xs"),
          py::arg("values"), py::arg("stride"), py::arg("scale"), py::arg("pairs"), py::arg("out"),
          py::arg("threads") = 0,
          "Normalisation histo-images of a ring scanner into out (n_views, nz, ny, nx) float32: scanner "
          "(radius, half_length, axial_length) mm, rings (n_per_ring, n_rings), dirs (n_views, n_dirs, 3) "
          "float64 unit directions, zs / ys / xs the voxel centres (mm, float64); efficiencies "
          "scale * values[i * stride] * values[j * stride] (values float64) or pairs (n_crystals, n_crystals).");
    m.def("direct_acceptance_cpu",
          [](std::array<double, 3> scanner, const py::array& cells, const py::array& cos_sin, double omega_max,
             const py::array& zs, const py::array& ys, const py::array& xs, py::array& out, int threads) {
              const auto s = corrections_args::make_ring(scanner[0], scanner[1], scanner[2], 1, 1);
              check_array<double>(cells, "cells", {-1, 3});
              const int n_views = static_cast<int>(cells.shape(0));
              check_array<double>(cos_sin, "cos_sin", {n_views, -1, 2});
              const int n_quad = static_cast<int>(cos_sin.shape(1));
              const auto [nz, ny, nx] = voxel_axes(zs, ys, xs, out, n_views);
              corrections_args::check_acceptance(data_of<double>(cells), n_views, omega_max);
              float* o = mutable_data_of<float>(out);
              py::gil_scoped_release release;
              direct::corrections::acceptance_cpu(
                  s, reinterpret_cast<const direct::corrections::AcceptanceCell*>(data_of<double>(cells)),
                  data_of<double>(cos_sin), n_views, n_quad, omega_max, data_of<double>(zs), nz, data_of<double>(ys),
                  ny, data_of<double>(xs), nx, o, threads);
          },
          py::arg("scanner"), py::arg("cells"), py::arg("cos_sin"), py::arg("omega_max"), py::arg("zs"),
          py::arg("ys"), py::arg("xs"), py::arg("out"), py::arg("threads") = 0,
          "Geometric acceptance histo-images (sensitivity_attenuation without attenuation) into out "
          "(n_views, nz, ny, nx) float32: scanner (radius, half_length, axial_length) mm, cells (n_views, 3) "
          "float64 (azimuth step, tilt edges), cos_sin (n_views, n_quad, 2) of the azimuth samples, the "
          "largest cell's solid angle omega_max, zs / ys / xs the voxel centres (mm).");
    m.def("direct_support", &support, py::arg("shape"), py::arg("voxel_size"), py::arg("phi"),
          py::arg("theta"), py::arg("semi_tof"), py::arg("semi_radial"), py::arg("semi_axial"),
          "mSR offsets (N, 3) as (dz, dy, dx) inside the view's truncation ellipsoid (semi-axes in mm), "
          "in point-symmetric order.");
    m.def("direct_lormap", &lormap, py::arg("shape"), py::arg("voxel_size"), py::arg("phi"),
          py::arg("epsilon"), py::arg("a0"),
          "LORmap (ny, nx): floor(s / epsilon) + a0 with s the signed LOR distance in mm.");
    m.def("direct_kernel_values", &kernel_values, py::arg("shape"), py::arg("voxel_size"),
          py::arg("phi"), py::arg("theta"), py::arg("offsets"), py::arg("sigma_tof"),
          py::arg("sigma_axial"), py::arg("sigma_radial"), py::arg("narrow_weight"),
          py::arg("wide_shift"),
          "mSRval (n_kernels, N): unit-sum (double-)Gaussian kernel values per identifier.");
    m.def("direct_project_cpu", &project_cpu, py::arg("forward"), py::arg("src"), py::arg("out"),
          py::arg("lormap"), py::arg("offsets"), py::arg("flip"), py::arg("values"),
          py::arg("threads") = 0,
          "out = H src (forward=True) or H^T src for one view, on the CPU (OpenMP).");
}

}  // namespace dp::bind
