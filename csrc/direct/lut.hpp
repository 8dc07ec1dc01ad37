// DIRECT look-up tables for one view: LORmap (2D kernel identifier map), mSR (point-symmetric
// offset list with flip table) and mSRval (kernel values per identifier, unit sum).
// Definitions: science.md section 1.6; the Gaussian / double-Gaussian model section 1.4-1.5.
#pragma once

#include <cstdint>
#include <vector>

namespace dp::direct {

// Orthonormal local axes of a view, in lattice (x, y, z) components.
struct ViewAxes {
    double tof[3];     // e_t = u(phi, theta)
    double radial[3];  // e_r = (-sin phi, cos phi, 0)
    double axial[3];   // e_a = e_t x e_r
};

ViewAxes view_axes(double phi, double theta);

struct Grid {
    int nz, ny, nx;
    double vz, vy, vx;  // voxel size in mm
};

// The support mSR: integer offsets (dz, dy, dx) inside the ellipsoid
//   (d.e_t / R_t)^2 + (d.e_r / R_r)^2 + (d.e_a / R_a)^2 <= 1   (R in mm),
// enumerated lexicographically over a box symmetric about 0, so offsets[N-1-i] = -offsets[i].
std::vector<int32_t> enumerate_support(const Grid& grid, const ViewAxes& axes, double semi_tof,
                                       double semi_radial, double semi_axial);

// LORmap: identifier a(y, x) = floor(s / epsilon) + a0 with s = -x sin(phi) + y cos(phi) the signed
// LOR distance of the voxel centre. Returns (ny * nx) identifiers.
std::vector<int32_t> lor_map(const Grid& grid, double phi, double epsilon, int a0);

// Gaussian kernel parameters per identifier: sigma of the TOF and axial directions (mm) and, per
// identifier, the radial sigma, the weight w of the narrow Gaussian and the shift of the wide one
// (asymmetric model g(rho) = w N(rho; 0, s) + (1 - w) N(rho; shift, 2 s); w = 1 gives the
// symmetric Gaussian). Values are normalised to unit sum per identifier.
struct KernelParams {
    double sigma_tof, sigma_axial;
    std::vector<double> sigma_radial;  // per identifier
    std::vector<double> narrow_weight; // per identifier
    std::vector<double> wide_shift;    // per identifier, mm along e_r
};

// mSRval as (n_kernel * N) floats, row-major by identifier.
std::vector<float> kernel_values(const Grid& grid, const ViewAxes& axes,
                                 const std::vector<int32_t>& offsets, const KernelParams& params);

}  // namespace dp::direct
