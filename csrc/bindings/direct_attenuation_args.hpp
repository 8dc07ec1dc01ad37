// Argument checks shared by the CPU (direct.cpp) and CUDA (direct_cuda.cpp) bindings of the
// attenuation map's parallel projections (csrc/direct/attenuation.hpp).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cmath>
#include <string>

#include "../common/errors.hpp"
#include "../direct/attenuation.hpp"

namespace dp::bind::attenuation_args {

inline void finite3(const std::array<double, 3>& v, const char* name) {
    for (double c : v)
        if (!std::isfinite(c)) throw ValueError(std::string(name) + ": expected three finite numbers");
}

inline direct::atten::Plane make_plane(const std::array<double, 3>& u, const std::array<double, 3>& e1,
                                       const std::array<double, 3>& e2, double lo1, double lo2, double h, int n1,
                                       int n2, double t0, double dt, int n_t) {
    finite3(u, "u"), finite3(e1, "e1"), finite3(e2, "e2");
    if (!std::isfinite(lo1) || !std::isfinite(lo2) || !std::isfinite(t0))
        throw ValueError("lo1, lo2, t0: expected finite numbers");
    if (!(h > 0) || !std::isfinite(h)) throw ValueError("h: expected a positive lattice spacing (mm)");
    if (!(dt > 0) || !std::isfinite(dt)) throw ValueError("dt: expected a positive step (mm)");
    if (n1 < 1 || n2 < 1 || n1 > 65535 || n_t < 1)
        throw ValueError("n1, n2, n_t: expected a lattice of 1 to 65535 rows, at least one column and one step");
    direct::atten::Plane P{};
    for (int a = 0; a < 3; ++a) P.u[a] = u[a], P.e1[a] = e1[a], P.e2[a] = e2[a];
    P.lo1 = lo1, P.lo2 = lo2, P.h = h, P.n1 = n1, P.n2 = n2, P.t0 = t0, P.dt = dt, P.n_t = n_t;
    return P;
}

inline direct::atten::MapGrid make_map(const float* mu, int nz, int ny, int nx, const std::array<double, 3>& voxel) {
    finite3(voxel, "voxel_size");
    if (!(voxel[0] > 0 && voxel[1] > 0 && voxel[2] > 0)) throw ValueError("voxel_size: expected positive sizes (mm)");
    if (nz < 1 || ny < 1 || nx < 1) throw ValueError("mu: expected a non-empty (nz, ny, nx) map");
    return {mu, nz, ny, nx, voxel[0], voxel[1], voxel[2]};
}

}  // namespace dp::bind::attenuation_args
