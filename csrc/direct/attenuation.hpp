// Parallel projections of an attenuation map for DIRECT's attenuation histo-images
// (src/directpet/direct/attenuation.py): p(s1, s2) = integral of mu(s1 e1 + s2 e2 + t u) dt on a plane
// lattice perpendicular to the direction u, by the midpoint rule in t with trilinear samples of the
// map (zero outside its voxel centres' box). One plane point is one line: the OpenMP backend takes
// rows of the lattice per thread, the CUDA backend one point per thread; both call line_integral.
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/hd.hpp"

namespace dp::direct::atten {

// The map: (nz, ny, nx) float32, voxel sizes in mm, centred on the scanner axis.
struct MapGrid {
    const float* mu;
    int nz, ny, nx;
    double vz, vy, vx;
};

// The plane lattice of one direction and the steps along it (all in mm).
struct Plane {
    double u[3], e1[3], e2[3];  // (x, y, z) components: the direction and the plane's axes
    double lo1, lo2, h;         // the lattice: s1 = lo1 + h i, s2 = lo2 + h j
    int n1, n2;
    double t0, dt;              // midpoints t0 + (k + 1/2) dt, k < n_t
    int n_t;
};

// One axis of a trilinear sample: the lower index and weight, false outside [0, n - 1] (the
// clipped, nearest-mode interpolation of scipy's map_coordinates at the upper edge).
DP_HD bool axis_cell(double c, int n, int& i0, double& f) {
    if (!(c >= 0.0) || c > n - 1) return false;
    if (n == 1) {
        i0 = 0, f = 0.0;
        return true;
    }
    i0 = static_cast<int>(c);
    if (i0 > n - 2) i0 = n - 2;
    f = c - i0;
    return true;
}

DP_HD double trilinear_or_zero(const MapGrid& g, double x, double y, double z) {
    const double cx = x / g.vx + 0.5 * (g.nx - 1), cy = y / g.vy + 0.5 * (g.ny - 1), cz = z / g.vz + 0.5 * (g.nz - 1);
    int ix, iy, iz;
    double fx, fy, fz;
    if (!axis_cell(cx, g.nx, ix, fx) || !axis_cell(cy, g.ny, iy, fy) || !axis_cell(cz, g.nz, iz, fz)) return 0.0;
    const int dx = g.nx > 1, dy = g.ny > 1 ? g.nx : 0, dz = g.nz > 1 ? g.nx * g.ny : 0;
    const float* p = g.mu + (static_cast<int64_t>(iz) * g.ny + iy) * g.nx + ix;
    const double c00 = p[0] + fx * (p[dx] - p[0]);
    const double c01 = p[dy] + fx * (p[dy + dx] - p[dy]);
    const double c10 = p[dz] + fx * (p[dz + dx] - p[dz]);
    const double c11 = p[dz + dy] + fx * (p[dz + dy + dx] - p[dz + dy]);
    const double c0 = c00 + fy * (c01 - c00), c1 = c10 + fy * (c11 - c10);
    return c0 + fz * (c1 - c0);
}

// Narrow [t_lo, t_hi] to the t where b + t d lies within [-half, half] on one axis (slab method).
DP_HD void clip_slab(double b, double d, double half, double& t_lo, double& t_hi) {
    if (d == 0.0) {
        if (b < -half || b > half) t_lo = 1.0, t_hi = 0.0;  // parallel to the slab and outside it
        return;
    }
    double a = (-half - b) / d, c = (half - b) / d;
    if (a > c) {
        const double s = a;
        a = c, c = s;
    }
    if (a > t_lo) t_lo = a;
    if (c < t_hi) t_hi = c;
}

// p at lattice point (i, j). Only the steps whose points can lie inside the map's box are sampled
// (one step of margin on each side; the samples outside are zero all the same).
DP_HD double line_integral(const MapGrid& g, const Plane& P, int i, int j) {
    const double s1 = P.lo1 + P.h * i, s2 = P.lo2 + P.h * j;
    const double bx = s1 * P.e1[0] + s2 * P.e2[0], by = s1 * P.e1[1] + s2 * P.e2[1], bz = s1 * P.e1[2] + s2 * P.e2[2];
    double t_lo = P.t0, t_hi = P.t0 + P.n_t * P.dt;
    clip_slab(bx, P.u[0], 0.5 * (g.nx - 1) * g.vx, t_lo, t_hi);
    clip_slab(by, P.u[1], 0.5 * (g.ny - 1) * g.vy, t_lo, t_hi);
    clip_slab(bz, P.u[2], 0.5 * (g.nz - 1) * g.vz, t_lo, t_hi);
    if (t_lo > t_hi) return 0.0;
    const double k_lo = floor((t_lo - P.t0) / P.dt - 0.5) - 1.0, k_hi = ceil((t_hi - P.t0) / P.dt - 0.5) + 1.0;
    const int k0 = k_lo < 0.0 ? 0 : static_cast<int>(k_lo);
    const int k1 = k_hi > P.n_t - 1 ? P.n_t - 1 : static_cast<int>(k_hi);
    double sum = 0.0;
    for (int k = k0; k <= k1; ++k) {
        const double t = P.t0 + (k + 0.5) * P.dt;
        sum += trilinear_or_zero(g, bx + t * P.u[0], by + t * P.u[1], bz + t * P.u[2]);
    }
    return sum * P.dt;
}

// out[i n2 + j] = p(i, j), float64 (n1, n2).
void project_cpu(const MapGrid& g, const Plane& P, double* out, int threads);
void project_cuda(const MapGrid& g, const Plane& P, double* out, void* stream);

}  // namespace dp::direct::atten
