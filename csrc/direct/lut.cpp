#include "lut.hpp"

#include <cmath>

#include "../common/errors.hpp"

namespace dp::direct {

ViewAxes view_axes(double phi, double theta) {
    const double cp = std::cos(phi), sp = std::sin(phi), ct = std::cos(theta), st = std::sin(theta);
    return ViewAxes{{ct * cp, ct * sp, st}, {-sp, cp, 0.0}, {-st * cp, -st * sp, ct}};
}

namespace {

double dot_mm(const double axis[3], int dz, int dy, int dx, const Grid& g) {
    return axis[0] * dx * g.vx + axis[1] * dy * g.vy + axis[2] * dz * g.vz;
}

// Largest |offset| along one lattice axis that can lie inside the ellipsoid: the ellipsoid's
// half-width along lattice axis k is sqrt(sum_dir R_dir^2 e_dir,k^2).
int half_extent(const ViewAxes& a, int k, double rt, double rr, double ra, double voxel) {
    const double w = std::sqrt(rt * rt * a.tof[k] * a.tof[k] + rr * rr * a.radial[k] * a.radial[k] +
                               ra * ra * a.axial[k] * a.axial[k]);
    return static_cast<int>(std::floor(w / voxel + 1e-9));
}

}  // namespace

std::vector<int32_t> enumerate_support(const Grid& g, const ViewAxes& a, double rt, double rr,
                                       double ra) {
    require(rt > 0 && rr > 0 && ra > 0, "support semi-axes must be positive");
    const int hx = half_extent(a, 0, rt, rr, ra, g.vx);
    const int hy = half_extent(a, 1, rt, rr, ra, g.vy);
    const int hz = half_extent(a, 2, rt, rr, ra, g.vz);
    const double box = double(2 * hx + 1) * (2 * hy + 1) * (2 * hz + 1);
    require(box < 2.0e8, "kernel support too large (more than 2e8 candidate offsets)");
    std::vector<int32_t> out;
    for (int dz = -hz; dz <= hz; ++dz)
        for (int dy = -hy; dy <= hy; ++dy)
            for (int dx = -hx; dx <= hx; ++dx) {
                const double t = dot_mm(a.tof, dz, dy, dx, g) / rt;
                const double r = dot_mm(a.radial, dz, dy, dx, g) / rr;
                const double x = dot_mm(a.axial, dz, dy, dx, g) / ra;
                // The tolerance keeps offsets that sit on the surface on both sides of 0, which
                // preserves point symmetry under rounding.
                if (t * t + r * r + x * x <= 1.0 + 1e-12) {
                    out.push_back(dz);
                    out.push_back(dy);
                    out.push_back(dx);
                }
            }
    return out;
}

std::vector<int32_t> lor_map(const Grid& g, double phi, double epsilon, int a0) {
    require(epsilon > 0, "epsilon must be positive");
    std::vector<int32_t> ids(static_cast<size_t>(g.ny) * g.nx);
    const double sp = std::sin(phi), cp = std::cos(phi);
    for (int iy = 0; iy < g.ny; ++iy) {
        const double y = (iy - 0.5 * (g.ny - 1)) * g.vy;
        for (int ix = 0; ix < g.nx; ++ix) {
            const double x = (ix - 0.5 * (g.nx - 1)) * g.vx;
            const double s = -x * sp + y * cp;
            ids[static_cast<size_t>(iy) * g.nx + ix] =
                static_cast<int32_t>(std::floor(s / epsilon)) + a0;
        }
    }
    return ids;
}

std::vector<float> kernel_values(const Grid& g, const ViewAxes& a,
                                 const std::vector<int32_t>& offsets, const KernelParams& p) {
    const size_t n = offsets.size() / 3;
    const size_t nk = p.sigma_radial.size();
    require(p.narrow_weight.size() == nk && p.wide_shift.size() == nk,
            "kernel parameter arrays must have one entry per identifier");
    require(p.sigma_tof > 0 && p.sigma_axial > 0, "kernel sigmas must be positive");
    std::vector<double> tof_axial(n), radial(n);
    for (size_t i = 0; i < n; ++i) {
        const int dz = offsets[3 * i], dy = offsets[3 * i + 1], dx = offsets[3 * i + 2];
        const double t = dot_mm(a.tof, dz, dy, dx, g) / p.sigma_tof;
        const double x = dot_mm(a.axial, dz, dy, dx, g) / p.sigma_axial;
        tof_axial[i] = std::exp(-0.5 * (t * t + x * x));
        radial[i] = dot_mm(a.radial, dz, dy, dx, g);
    }
    std::vector<float> values(nk * n);
    std::vector<double> row(n);
    for (size_t k = 0; k < nk; ++k) {
        const double s = p.sigma_radial[k], w = p.narrow_weight[k], shift = p.wide_shift[k];
        require(s > 0, "radial sigma must be positive for every identifier");
        double sum = 0.0;
        for (size_t i = 0; i < n; ++i) {
            const double r0 = radial[i] / s, r1 = (radial[i] - shift) / (2.0 * s);
            // Area-normalised Gaussians, so that w is the narrow component's share.
            const double prof = w * std::exp(-0.5 * r0 * r0) + (1.0 - w) * 0.5 * std::exp(-0.5 * r1 * r1);
            row[i] = tof_axial[i] * prof;
            sum += row[i];
        }
        require(sum > 0, "kernel sums to zero for some identifier (support too small)");
        for (size_t i = 0; i < n; ++i) values[k * n + i] = static_cast<float>(row[i] / sum);
    }
    return values;
}

}  // namespace dp::direct
