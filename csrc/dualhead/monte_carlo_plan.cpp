// Dual-head event Monte Carlo, host preparation shared by both backends: argument checks, the
// alias table of the activity (common/alias_table.hpp) and photon 1's direction band.
#include <algorithm>
#include <cmath>
#include <string>

#include "../common/errors.hpp"
#include "monte_carlo_api.hpp"

namespace dp::dualhead::mc {
namespace {

using dp::emission::kFwhmPerSigma;
using dp::emission::kMaxNormal;
constexpr double kPiD = 3.14159265358979323846;

void positive_int(int v, const char* name) { require_positive_int(v, std::string("scanner ") + name); }
void positive(double v, const char* name) { require_positive(v, std::string("scanner ") + name); }
void non_negative(double v, const char* name) { require_non_negative(v, std::string("scanner ") + name); }

void check_scanner(const ScannerSpec& s) {
    positive_int(s.n_y, "n_y");
    positive_int(s.n_z, "n_z");
    positive_int(s.voxels_per_crystal, "voxels_per_crystal");
    positive_int(s.n_planes, "n_planes");
    positive(s.pitch_mm, "pitch_mm");
    positive(s.crystal_mm, "crystal_mm");
    positive(s.depth_mm, "depth_mm");
    positive(s.gap_mm, "gap_mm");
    positive(s.plane_mm, "plane_mm");
    positive(s.mu_per_mm, "mu_per_mm");
    non_negative(s.positron_range_fwhm_mm, "positron_range_fwhm_mm");
    non_negative(s.acollinearity_fwhm_deg, "acollinearity_fwhm_deg");
    if (s.crystal_mm > s.pitch_mm)
        throw ValueError("scanner crystal_mm: " + std::to_string(s.crystal_mm) + " mm crystals do not fit a " +
                         std::to_string(s.pitch_mm) + " mm pitch");
    if (s.n_planes * s.plane_mm > s.gap_mm * (1 + 1e-9))
        throw ValueError("scanner n_planes: the planes do not fit between the heads");
    // LOR indices in int64, crystal indices and the DDA's cell counter in int
    if (static_cast<int64_t>(s.n_y) * s.n_z > (1 << 24))
        throw ValueError("scanner n_y: at most 2^24 crystals per head");
}

// The float nearest above v (the band must not shrink when rounded to float).
float round_up(double v) {
    const float f = static_cast<float>(v);
    return static_cast<double>(f) < v ? std::nextafter(f, 2.0f * f + 1.0f) : f;
}

}  // namespace

void set_seed(McParams& p, uint64_t seed) {
    p.key0 = static_cast<uint32_t>(seed);
    p.key1 = static_cast<uint32_t>(seed >> 32);
}

Plan make_plan(const ScannerSpec& s, const float* activity) {
    check_scanner(s);
    const double voxel = s.pitch_mm / s.voxels_per_crystal;
    const dp::emission::GridSpec g{s.n_z * s.voxels_per_crystal, s.n_y * s.voxels_per_crystal, s.n_planes,
                                   voxel, voxel, s.plane_mm};
    Plan plan{};
    const dp::emission::ActivitySummary act =
        dp::emission::make_alias_source(g, activity, plan.alias_accept, plan.alias_other);

    // The source box (mm, voxel edges), widened by the largest positron-range displacement.
    const double sigma_range = s.positron_range_fwhm_mm / kFwhmPerSigma;
    const double margin = kMaxNormal * sigma_range;
    const double x_max = act.edge_hi(g, 2, margin);
    const double y_max = std::max(std::fabs(act.edge_lo(g, 1, margin)), std::fabs(act.edge_hi(g, 1, margin)));
    const double z_max = std::max(std::fabs(act.edge_lo(g, 0, margin)), std::fabs(act.edge_hi(g, 0, margin)));
    const double front = 0.5 * s.gap_mm;
    const double half_w = 0.5 * s.n_y * s.pitch_mm, half_h = 0.5 * s.n_z * s.pitch_mm;

    // Photon 1 from (x0, y0, z0) along (cos el cos psi, cos el sin psi, sin el) is at
    // y = y0 + L tan(psi), z = z0 + L tan(el) / cos(psi) after L = x - x0 >= front - x_max along x.
    // It can reach a crystal (|y| <= W/2, |z| <= H/2 at some x >= front) only if
    // |tan psi| <= (W/2 + y_max) / (front - x_max) and |tan el| <= (H/2 + z_max) / (front - x_max)
    // (cos psi <= 1): the band below is conservative. No band when the box reaches a front face.
    Band& b = plan.band;
    b.reach_mm = front - x_max;
    float psi_max, sin_el_max;
    if (b.reach_mm > 0) {
        const double tan_psi = (half_w + y_max) / b.reach_mm;
        const double tan_el = (half_h + z_max) / b.reach_mm;
        psi_max = round_up(std::atan(tan_psi));
        sin_el_max = std::min(1.0f, round_up(tan_el / std::sqrt(1.0 + tan_el * tan_el)));
        b.full_hemisphere = false;
    } else {
        psi_max = static_cast<float>(0.5 * kPiD);
        sin_el_max = 1.0f;
        b.full_hemisphere = true;
    }
    // Photon 1's direction is uniform on the +x hemisphere (2 pi sr; the pair axis is isotropic and
    // photon 1 is the photon heading up); the band is (2 psi_max)(2 sin_el_max) of it, in the float
    // values the decays use.
    const double fraction =
        std::min(1.0, 2.0 * static_cast<double>(psi_max) * static_cast<double>(sin_el_max) / kPiD);
    const uint64_t threshold = static_cast<uint64_t>(std::llround(std::ldexp(fraction, 32)));
    b.fraction = std::ldexp(static_cast<double>(threshold), -32);
    b.psi_max = psi_max;
    b.sin_el_max = sin_el_max;

    McParams& p = plan.params;
    p.src.nz = g.nz;
    p.src.ny = g.ny;
    p.src.nx = g.nx;
    p.src.vz = static_cast<float>(g.vz);
    p.src.vy = static_cast<float>(g.vy);
    p.src.vx = static_cast<float>(g.vx);
    p.src.n_voxels = static_cast<uint64_t>(g.nz) * g.ny * g.nx;
    p.src.alias_accept = nullptr;
    p.src.alias_other = nullptr;
    p.band_threshold = threshold;
    p.sin_el_max = sin_el_max;
    p.psi_max = psi_max;
    p.sigma_range_mm = static_cast<float>(sigma_range);
    p.sigma_acol_rad = static_cast<float>(s.acollinearity_fwhm_deg * kPiD / 180.0 / kFwhmPerSigma);
    p.layout = Layout{s.n_y, s.n_z, s.voxels_per_crystal, s.n_planes};
    p.pitch = static_cast<float>(s.pitch_mm);
    p.crystal_lo = static_cast<float>(0.5 * (s.pitch_mm - s.crystal_mm));
    p.crystal_hi = static_cast<float>(0.5 * (s.pitch_mm + s.crystal_mm));
    p.half_w = static_cast<float>(half_w);
    p.half_h = static_cast<float>(half_h);
    p.front = static_cast<float>(front);
    p.back = static_cast<float>(front + s.depth_mm);
    p.mu = static_cast<float>(s.mu_per_mm);
    set_seed(p, 0);
    return plan;
}

}  // namespace dp::dualhead::mc
