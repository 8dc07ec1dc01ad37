// Correction histo-images of a cylindrical scanner, one compiled pass per view over the grid with every
// sampled direction of the view in registers (the NumPy / CuPy array code runs some twenty array
// operations per direction):
//
//   normalisation (directpet.direct.normalisation): the mean coincidence efficiency of the accepted LORs
//     through the voxel centre along the view's sampled directions, each LOR's crystals found where it
//     meets the detector cylinder;
//   acceptance (directpet.direct.sensitivity_attenuation without attenuation): the solid angle of the
//     view cell's accepted directions through the voxel centre, the tilt window exact per sampled azimuth.
//
// The arithmetic is the Python code's (normalisation_histo_images, cylinder_interval, crystals_of_points,
// _cell_integral, _tilt_window) operation for operation in double precision, including NumPy's NaN
// propagation in maximum / minimum; the files that include this header compile without floating-point
// contraction, so the sums and products round as NumPy's and CuPy's do.
#pragma once

#include <cmath>
#include <cstdint>

#include "../common/hd.hpp"

namespace dp::direct::corrections {

struct RingScanner {
    double radius, half_length, axial_length;  // mm
    int n_per_ring, n_rings;
};

// e_ij of crystals i, j (index k * n_rings + r): scale * (values[i * stride] * values[j * stride]) for
// per-crystal (or per-detection-bin) efficiencies, or pairs[i * n_crystals + j] for a pair table.
struct Efficiencies {
    const double* values = nullptr;
    int64_t stride = 1;
    double scale = 1.0;
    const double* pairs = nullptr;  // used when non-null
    int64_t n_crystals = 0;
};

// crystals_of_points: the module nearest in azimuth, the axial slab of z (clipped to the rings).
DP_HD int64_t crystal_of_point(const RingScanner& s, double x, double y, double z) {
    constexpr double kTwoPi = 2.0 * 3.141592653589793;
    int64_t k = static_cast<int64_t>(rint(atan2(y, x) * (static_cast<double>(s.n_per_ring) / kTwoPi)));
    k %= s.n_per_ring;
    if (k < 0) k += s.n_per_ring;  // Python's modulo
    int64_t r = static_cast<int64_t>(floor((z / s.axial_length + 0.5) * static_cast<double>(s.n_rings)));
    r = r < 0 ? 0 : (r > s.n_rings - 1 ? s.n_rings - 1 : r);
    return k * s.n_rings + r;
}

// cylinder_interval on the infinite detector cylinder: the parameters t0 <= t1 where (x, y) + t (ux, uy)
// meets the circle of radius R, with c2 = x^2 + y^2 - R^2 (both 0 where the line misses it).
DP_HD void circle_interval(double x, double y, double c2, double ux, double uy, double* t0, double* t1) {
    const double a = ux * ux + uy * uy;
    const double b = x * ux + y * uy;
    const double disc = b * b - a * c2;
    const bool miss = disc < 0.0;
    const double sq = sqrt(miss ? 0.0 : disc);
    *t0 = miss ? 0.0 : (-b - sq) / a;
    *t1 = miss ? 0.0 : (-b + sq) / a;
}

DP_HD double pair_efficiency(const Efficiencies& e, int64_t i, int64_t j) {
    if (e.pairs) return e.pairs[i * e.n_crystals + j];
    return e.scale * (e.values[i * e.stride] * e.values[j * e.stride]);
}

// The mean efficiency of the accepted LORs through (x, y, z) along the n_dirs unit directions dirs
// ((n_dirs, 3)), or 1 when none is accepted (the bin's geometric sensitivity is 0 anyway).
DP_HD float voxel_normalisation(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_dirs, double x,
                                double y, double z) {
    double total = 0.0, count = 0.0;
    const double c = x * x + y * y - s.radius * s.radius;
    for (int d = 0; d < n_dirs; ++d) {
        const double ux = dirs[3 * d], uy = dirs[3 * d + 1], uz = dirs[3 * d + 2];
        // cylinder_interval (infinite cylinder), then the axial extent at both ends (_exits)
        double t0, t1;
        circle_interval(x, y, c, ux, uy, &t0, &t1);
        const bool hit = fabs(z + t1 * uz) <= s.half_length && fabs(z + t0 * uz) <= s.half_length;
        if (!hit) continue;
        const double t_minus = -t0;
        const int64_t i = crystal_of_point(s, x + t1 * ux, y + t1 * uy, z + t1 * uz);
        const int64_t j = crystal_of_point(s, x - t_minus * ux, y - t_minus * uy, z - t_minus * uz);
        total += pair_efficiency(e, i, j);
        count += 1.0;
    }
    return static_cast<float>(count > 0.0 ? total / count : 1.0);
}

// NumPy's maximum / minimum: NaN when either argument is NaN.
DP_HD double nan_max(double a, double b) { return (a != a || b != b) ? a + b : (a >= b ? a : b); }
DP_HD double nan_min(double a, double b) { return (a != a || b != b) ? a + b : (a <= b ? a : b); }

// One view cell of the acceptance: the azimuth samples' (cos, sin), the azimuth step and the cell's
// tilt edges (radians).
struct AcceptanceCell {
    double dphi, theta_lo, theta_hi;
};

// _cell_integral(..., antiderivative=sin) / omega_max at (x, y, z): sum over the azimuth samples of the
// exact tilt integral of cos(theta) over the accepted tilts inside the cell, times the azimuth step.
DP_HD float voxel_acceptance(const RingScanner& s, const AcceptanceCell& cell, const double* cos_sin, int n_quad,
                             double omega_max, double x, double y, double z) {
    double acc = 0.0;
    const double c2 = x * x + y * y - s.radius * s.radius;
    const double h = s.half_length;
    for (int q = 0; q < n_quad; ++q) {
        const double c = cos_sin[2 * q], sn = cos_sin[2 * q + 1];
        // _tilt_window: the in-plane distances to the detector circle along +-(cos phi, sin phi)
        double t0, t1;
        circle_interval(x, y, c2, c, sn, &t0, &t1);
        const double rho_p = t1, rho_m = -t0;
        const double tan_lo = nan_max((-h - z) / rho_p, (z - h) / rho_m);
        const double tan_hi = nan_min((h - z) / rho_p, (z + h) / rho_m);
        const double lo = nan_max(atan(tan_lo), cell.theta_lo);
        const double hi = nan_min(atan(tan_hi), cell.theta_hi);
        acc = acc + (hi > lo ? sin(hi) - sin(lo) : 0.0) * cell.dphi;
    }
    return static_cast<float>(acc / omega_max);
}

// Every bin of views [0, n_views) of the acceptance: out (n_views, nz, ny, nx) float32; cells (n_views,);
// cos_sin (n_views, n_quad, 2).
void acceptance_cpu(const RingScanner& s, const AcceptanceCell* cells, const double* cos_sin, int n_views, int n_quad,
                    double omega_max, const double* zs, int nz, const double* ys, int ny, const double* xs, int nx,
                    float* out, int threads);

// Every bin of views [0, n_views): out (n_views, nz, ny, nx) float32; dirs (n_views, n_dirs, 3) unit
// directions; xs, ys, zs the voxel-centre coordinates (mm) along each axis.
void normalisation_cpu(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_views, int n_dirs,
                       const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out,
                       int threads);

namespace gpu {
// The same on the GPU: every pointer a device pointer; runs on the legacy default stream and returns when
// done.
void normalisation(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_views, int n_dirs,
                   const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out);
// cells: a device pointer to (n_views,) AcceptanceCell.
void acceptance(const RingScanner& s, const AcceptanceCell* cells, const double* cos_sin, int n_views, int n_quad,
                double omega_max, const double* zs, int nz, const double* ys, int ny, const double* xs, int nx,
                float* out);
}  // namespace gpu

}  // namespace dp::direct::corrections
