// FIRST event Monte Carlo, host preparation shared by both backends: argument checks, the alias
// table of the activity (common/alias_table.hpp) and photon 1's direction band (monte_carlo_api.hpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "monte_carlo_api.hpp"

namespace dp::first::mc {
namespace {

using dp::emission::kFwhmPerSigma;
using dp::emission::kMaxNormal;
constexpr double kPiD = 3.14159265358979323846;

void positive_int(int v, const char* name) { require_positive_int(v, std::string("scanner ") + name); }
void positive(double v, const char* name) { require_positive(v, std::string("scanner ") + name); }
void non_negative(double v, const char* name) { require_non_negative(v, std::string("scanner ") + name); }

void check_scanner(const ScannerSpec& s) {
    positive_int(s.n_rows, "n_rows");
    positive_int(s.n_columns, "n_columns");
    positive_int(s.n_angles, "n_angles");
    positive_int(s.n_radial, "n_radial");
    positive(s.pitch_mm, "pitch_mm");
    positive(s.crystal_mm, "crystal_mm");
    positive(s.depth_mm, "depth_mm");
    positive(s.mu_per_mm, "mu_per_mm");
    positive(s.head_distance_mm, "head_distance_mm");
    positive(s.radial_bin_mm, "radial_bin_mm");
    non_negative(s.positron_range_fwhm_mm, "positron_range_fwhm_mm");
    non_negative(s.noncollinearity_fwhm_deg, "noncollinearity_fwhm_deg");
    non_negative(s.intrinsic_fwhm_mm, "intrinsic_fwhm_mm");
    if (!(std::isfinite(s.mean_depth_mm) && s.mean_depth_mm >= 0 && s.mean_depth_mm <= s.depth_mm))
        throw ValueError("scanner mean_depth_mm: expected a value in [0, depth_mm], got " + std::to_string(s.mean_depth_mm));
    if (s.crystal_mm > s.pitch_mm)
        throw ValueError("scanner crystal_mm: " + std::to_string(s.crystal_mm) + " mm crystals do not fit a " +
                         std::to_string(s.pitch_mm) + " mm pitch");
}

}  // namespace

void set_seed(McParams& p, uint64_t seed) {
    p.key0 = static_cast<uint32_t>(seed);
    p.key1 = static_cast<uint32_t>(seed >> 32);
}

Plan make_plan(const ScannerSpec& s, const GridSpec& g, const float* activity) {
    check_scanner(s);
    Plan plan{};
    const dp::emission::ActivitySummary act =
        dp::emission::make_alias_source(g, activity, plan.alias_accept, plan.alias_other);
    const uint64_t n = static_cast<uint64_t>(g.nz) * g.ny * g.nx;

    // Source box in mm (voxel edges), widened by the largest positron-range displacement.
    const double sigma_range = s.positron_range_fwhm_mm / kFwhmPerSigma;
    const double margin = kMaxNormal * sigma_range;
    double edge_lo[3], edge_hi[3];
    for (int k = 0; k < 3; ++k) {
        edge_lo[k] = act.edge_lo(g, k, margin);
        edge_hi[k] = act.edge_hi(g, k, margin);
    }
    const double radius = std::hypot(std::max(std::fabs(edge_lo[1]), std::fabs(edge_hi[1])),
                                     std::max(std::fabs(edge_lo[2]), std::fabs(edge_hi[2])));
    const double half_distance = 0.5 * s.head_distance_mm;
    if (!(radius < half_distance))
        throw ValueError("activity: non-zero voxels (with the positron range) reach " + std::to_string(radius) +
                         " mm from the axis, but the heads' front faces are " + std::to_string(half_distance) +
                         " mm away: the source must lie between the heads at every gantry angle");

    // Photon 1 from (x0, y0, z0) along psi, elevation el reaches x' = D/2 after L = D/2 - x0 >=
    // D/2 - R along x' and hits y = y0 + L tan(psi), z = z0 + L tan(el) / cos(psi). It can
    // enter the face (|y| <= W/2, |z| <= H/2) only if |tan psi| <= (W/2 + R) / (D/2 - R) and
    // |tan el| <= (H/2 + |z0|) / (D/2 - R) (cos psi <= 1): the band below is conservative.
    const double half_width = 0.5 * s.n_columns * s.pitch_mm, half_height = 0.5 * s.n_rows * s.pitch_mm;
    const double reach = half_distance - radius;
    const double tan_psi = (half_width + radius) / reach;
    const double tan_el = std::max(half_height - edge_lo[0], half_height + edge_hi[0]) / reach;
    Band& b = plan.band;
    b.psi_max = std::atan(tan_psi);
    b.sin_el_max = tan_el / std::sqrt(1.0 + tan_el * tan_el);
    // Pair axes uniform on the sphere (4 pi); the band and its mirror (photon 1 toward head A)
    // cover 2 x (2 psi_max)(2 sin_el_max).
    b.fraction = 2.0 * b.psi_max * b.sin_el_max / kPiD;
    b.source_radius_mm = radius;

    McParams& p = plan.params;
    p.src.nz = g.nz;
    p.src.ny = g.ny;
    p.src.nx = g.nx;
    p.src.vz = static_cast<float>(g.vz);
    p.src.vy = static_cast<float>(g.vy);
    p.src.vx = static_cast<float>(g.vx);
    p.src.n_voxels = n;
    p.src.alias_accept = nullptr;
    p.src.alias_other = nullptr;
    p.sin_el_max = static_cast<float>(b.sin_el_max);
    p.psi_max = static_cast<float>(b.psi_max);
    p.sigma_range_mm = static_cast<float>(sigma_range);
    p.sigma_nc_rad = static_cast<float>(s.noncollinearity_fwhm_deg * kPiD / 180.0 / kFwhmPerSigma);
    p.sigma_intrinsic_mm = static_cast<float>(s.intrinsic_fwhm_mm / kFwhmPerSigma);
    p.n_rows = s.n_rows;
    p.n_columns = s.n_columns;
    p.pitch = static_cast<float>(s.pitch_mm);
    p.crystal = static_cast<float>(s.crystal_mm);
    p.depth = static_cast<float>(s.depth_mm);
    p.mu = static_cast<float>(s.mu_per_mm);
    p.half_distance = static_cast<float>(half_distance);
    p.half_width = static_cast<float>(half_width);
    p.half_height = static_cast<float>(half_height);
    p.mean_depth = static_cast<float>(s.mean_depth_mm);
    p.n_angles = s.n_angles;
    p.n_radial = s.n_radial;
    p.radial_bin = static_cast<float>(s.radial_bin_mm);
    set_seed(p, 0);
    return plan;
}

}  // namespace dp::first::mc
