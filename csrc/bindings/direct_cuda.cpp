// pybind11 bindings of the CUDA DIRECT projectors. Arrays are passed as device pointers (from
// DeviceBuffer, CuPy or PyTorch); LUTs are uploaded once per view into a DirectDeviceLut.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../common/cuda_memory.hpp"
#include "../direct/cuda.hpp"
#include "arrays.hpp"
#include "direct_attenuation_args.hpp"
#include "direct_corrections_args.hpp"
#include "direct_lut_check.hpp"

namespace py = pybind11;

namespace dp::bind {

void register_cuda_memory(py::module_& m);

void register_direct_cuda(py::module_& m) {
    register_cuda_memory(m);
    m.def("direct_attenuation_projection_cuda",
          [](uintptr_t mu, int nz, int ny, int nx, std::array<double, 3> voxel, std::array<double, 3> u,
             std::array<double, 3> e1, std::array<double, 3> e2, double lo1, double lo2, double h, int n1, int n2,
             double t0, double dt, int n_t, uintptr_t out, uintptr_t stream) {
              if (!mu || !out) throw ValueError("mu/out: null device pointer");
              const auto g = attenuation_args::make_map(reinterpret_cast<const float*>(mu), nz, ny, nx, voxel);
              const auto P = attenuation_args::make_plane(u, e1, e2, lo1, lo2, h, n1, n2, t0, dt, n_t);
              py::gil_scoped_release release;
              direct::atten::project_cuda(g, P, reinterpret_cast<double*>(out), reinterpret_cast<void*>(stream));
          },
          py::arg("mu"), py::arg("nz"), py::arg("ny"), py::arg("nx"), py::arg("voxel_size"), py::arg("u"),
          py::arg("e1"), py::arg("e2"), py::arg("lo1"), py::arg("lo2"), py::arg("h"), py::arg("n1"), py::arg("n2"),
          py::arg("t0"), py::arg("dt"), py::arg("n_t"), py::arg("out"), py::arg("stream") = 0,
          "direct_attenuation_projection_cpu on the GPU: mu a device pointer to (nz, ny, nx) float32, out "
          "to (n1, n2) float64. Asynchronous on `stream`.");
    m.def("direct_normalisation_cuda",
          [](std::array<double, 3> scanner, std::array<int, 2> rings, uintptr_t dirs, int n_views, int n_dirs,
             uintptr_t zs, int nz, uintptr_t ys, int ny, uintptr_t xs, int nx, uintptr_t values, long long values_size,
             long long stride, double scale, uintptr_t pairs, long long pairs_size, uintptr_t out) {
              const auto s = corrections_args::make_ring(scanner[0], scanner[1], scanner[2], rings[0], rings[1]);
              if (!dirs || !zs || !ys || !xs || !out) throw ValueError("dirs/zs/ys/xs/out: null device pointer");
              if (n_views < 1 || n_dirs < 1 || nz < 1 || ny < 1 || nx < 1 || n_views > 65535)
                  throw ValueError("n_views, n_dirs, nz, ny, nx: expected positive sizes (at most 65535 views)");
              const auto e = corrections_args::make_efficiencies(
                  s, reinterpret_cast<const double*>(values), values_size, stride, scale,
                  reinterpret_cast<const double*>(pairs), pairs_size);
              py::gil_scoped_release release;
              direct::corrections::gpu::normalisation(
                  s, e, reinterpret_cast<const double*>(dirs), n_views, n_dirs, reinterpret_cast<const double*>(zs), nz,
                  reinterpret_cast<const double*>(ys), ny, reinterpret_cast<const double*>(xs), nx,
                  reinterpret_cast<float*>(out));
          },
          py::arg("scanner"), py::arg("rings"), py::arg("dirs"), py::arg("n_views"), py::arg("n_dirs"), py::arg("zs"),
          py::arg("nz"), py::arg("ys"), py::arg("ny"), py::arg("xs"), py::arg("nx"), py::arg("values"),
          py::arg("values_size"), py::arg("stride"), py::arg("scale"), py::arg("pairs"), py::arg("pairs_size"),
          py::arg("out"),
          "direct_normalisation_cpu on the GPU: every array a device pointer (values or pairs 0 when absent); "
          "synchronous.");
    m.def("direct_acceptance_cuda",
          [](std::array<double, 3> scanner, const py::array& cells, uintptr_t cos_sin, int n_quad, double omega_max,
             uintptr_t zs, int nz, uintptr_t ys, int ny, uintptr_t xs, int nx, uintptr_t out) {
              const auto s = corrections_args::make_ring(scanner[0], scanner[1], scanner[2], 1, 1);
              check_array<double>(cells, "cells", {-1, 3});
              const int n_views = static_cast<int>(cells.shape(0));
              if (!cos_sin || !zs || !ys || !xs || !out) throw ValueError("cos_sin/zs/ys/xs/out: null device pointer");
              if (n_views < 1 || n_views > 65535 || n_quad < 1 || nz < 1 || ny < 1 || nx < 1)
                  throw ValueError("cells, n_quad, nz, ny, nx: expected positive sizes (at most 65535 views)");
              corrections_args::check_acceptance(data_of<double>(cells), n_views, omega_max);
              cuda::DeviceBuffer device_cells(static_cast<size_t>(cells.nbytes()));
              device_cells.upload(cells.data(), device_cells.bytes());
              py::gil_scoped_release release;
              direct::corrections::gpu::acceptance(
                  s, device_cells.as<const direct::corrections::AcceptanceCell>(), reinterpret_cast<const double*>(cos_sin),
                  n_views, n_quad, omega_max, reinterpret_cast<const double*>(zs), nz, reinterpret_cast<const double*>(ys),
                  ny, reinterpret_cast<const double*>(xs), nx, reinterpret_cast<float*>(out));
          },
          py::arg("scanner"), py::arg("cells"), py::arg("cos_sin"), py::arg("n_quad"), py::arg("omega_max"),
          py::arg("zs"), py::arg("nz"), py::arg("ys"), py::arg("ny"), py::arg("xs"), py::arg("nx"), py::arg("out"),
          "direct_acceptance_cpu on the GPU: cells a host (n_views, 3) float64 array, every other array a device "
          "pointer; synchronous.");
    using direct::gpu::DeviceLut;
    py::class_<DeviceLut> cls(m, "DirectDeviceLut", "One view's DIRECT LUTs resident on the GPU.");
    cls.def(py::init([](std::vector<int> shape, const py::array& lormap, const py::array& offsets,
                         const py::array& flip, const py::array& values) {
                 if (shape.size() != 3 || shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0)
                     throw ValueError("shape: expected three positive extents (nz, ny, nx)");
                 const direct::Dims d{shape[0], shape[1], shape[2]};
                 const direct::LutRef h = checked_lut(lormap, offsets, flip, values, d);
                 py::gil_scoped_release release;
                 return new DeviceLut(h, d);
             }),
             py::arg("shape"), py::arg("lormap"), py::arg("offsets"), py::arg("flip"), py::arg("values"))
        .def_property_readonly("nbytes", &DeviceLut::bytes)
        .def_property_readonly("factored", [](const DeviceLut& l) {
            return py::make_tuple(l.factored(true), l.factored(false));
        }, "(forward, back): whether the weights factor per column (radial x TOF/axial), which the "
           "default slab kernel exploits.");
    cls.def("slab_launch", [](const DeviceLut& l, bool forward, const std::string& method) -> py::object {
            const auto v = direct::gpu::slab_variant(direct::gpu::parse_method(method));
            const auto& c = l.slab_launch(forward, v);
            if (!c.ready) return py::none();
            py::dict d;
            d["columns"] = c.columns;
            if (!c.columns) {
                d["tile"] = py::make_tuple(c.block[0], c.block[1]);
                d["halo"] = c.halo;
                d["float4_staging"] = c.vec;
                d["row_split"] = c.row_split;
                d["whole_plan"] = c.whole_plan_groups > 0;
                d["shared_bytes"] = c.bytes;
            }
            return d;
        }, py::arg("forward"), py::arg("method") = "default",
        "The launch the slab kernel chose for this LUT, direction and variant at its first projection (a dict: "
        "tile, staged halo, float4 staging, row split, whole plan staged once, shared bytes; columns=True when the halo is too wide "
        "to stage), or None before it.");
    m.def("direct_project_cuda",
          [](bool forward, const std::string& method, uintptr_t src, uintptr_t dst,
             const DeviceLut& lut, uintptr_t stream) {
              if (!src || !dst) throw ValueError("src/out: null device pointer");
              const auto mth = direct::gpu::parse_method(method);
              py::gil_scoped_release release;
              direct::gpu::project(forward, mth, reinterpret_cast<const float*>(src),
                                   reinterpret_cast<float*>(dst), lut, reinterpret_cast<void*>(stream));
          },
          py::arg("forward"), py::arg("method"), py::arg("src"), py::arg("out"), py::arg("lut"),
          py::arg("stream") = 0,
          "out = H src (forward) or H^T src on the GPU; src/out are device pointers to "
          "(nz, ny, nx) float32 arrays of the LUT's shape. Asynchronous on `stream`.");
}

}  // namespace dp::bind
