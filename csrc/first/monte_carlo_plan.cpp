// FIRST event Monte Carlo, host preparation shared by both backends: argument checks, the alias
// table of the activity and photon 1's direction band (monte_carlo_api.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "monte_carlo_api.hpp"

namespace dp::first::mc {
namespace {

constexpr double kFwhmPerSigma = 2.3548200450309493;  // 2 sqrt(2 ln 2)
constexpr double kPiD = 3.14159265358979323846;
// Largest |normal| that normal_pair can return: sqrt(-2 ln u) with u >= 2^-24 is 5.768 (rounded
// up for float logs): the positron range never moves a point further than this many sigma per axis.
constexpr double kMaxNormal = 5.8;

void positive_int(int v, const char* name) {
    if (v < 1) throw ValueError(std::string("scanner ") + name + ": expected a positive integer, got " + std::to_string(v));
}

void positive(double v, const char* name) {
    if (!(std::isfinite(v) && v > 0))
        throw ValueError(std::string("scanner ") + name + ": expected a positive finite value, got " + std::to_string(v));
}

void non_negative(double v, const char* name) {
    if (!(std::isfinite(v) && v >= 0))
        throw ValueError(std::string("scanner ") + name + ": expected a finite value >= 0, got " + std::to_string(v));
}

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

void check_grid(const GridSpec& g) {
    if (g.nz < 1 || g.ny < 1 || g.nx < 1) throw ValueError("grid: every extent of the shape must be positive");
    if (!(std::isfinite(g.vz) && g.vz > 0 && std::isfinite(g.vy) && g.vy > 0 && std::isfinite(g.vx) && g.vx > 0))
        throw ValueError("grid: voxel sizes must be positive and finite");
}

// Walker's alias table by Vose's method: voxel v is kept with probability accept[v], else
// alias[v] is taken. Exact in double up to the rounding of accept to float (2^-24 relative).
void build_alias_table(const float* activity, uint64_t n, double total, std::vector<float>& accept,
                       std::vector<uint32_t>& alias) {
    accept.assign(n, 1.0f);
    alias.resize(n);
    std::vector<double> q(n);
    std::vector<uint32_t> small, large;
    small.reserve(n);
    large.reserve(n);
    const double scale = static_cast<double>(n) / total;
    for (uint64_t v = 0; v < n; ++v) {
        q[v] = activity[v] * scale;
        alias[v] = static_cast<uint32_t>(v);
        (q[v] < 1.0 ? small : large).push_back(static_cast<uint32_t>(v));
    }
    while (!small.empty() && !large.empty()) {
        const uint32_t s = small.back(), l = large.back();
        small.pop_back();
        accept[s] = static_cast<float>(q[s]);
        alias[s] = l;
        q[l] -= 1.0 - q[s];
        if (q[l] < 1.0) {
            large.pop_back();
            small.push_back(l);
        }
    }
    // What is left is 1 up to rounding: kept with probability 1 (accept was initialised to 1).
}

}  // namespace

void set_seed(McParams& p, uint64_t seed) {
    p.key0 = static_cast<uint32_t>(seed);
    p.key1 = static_cast<uint32_t>(seed >> 32);
}

Plan make_plan(const ScannerSpec& s, const GridSpec& g, const float* activity) {
    check_scanner(s);
    check_grid(g);
    const uint64_t n = static_cast<uint64_t>(g.nz) * g.ny * g.nx;
    if (n >= std::numeric_limits<uint32_t>::max())
        throw ValueError("activity: at most 2^32 - 1 voxels, got " + std::to_string(n));

    // Totals and the bounding box of the non-zero voxels (indices).
    double total = 0;
    int lo[3] = {g.nz, g.ny, g.nx}, hi[3] = {-1, -1, -1};
    for (uint64_t v = 0; v < n; ++v) {
        const float a = activity[v];
        if (!std::isfinite(a)) throw ValueError("activity: contains NaN or inf (voxel " + std::to_string(v) + ")");
        if (a < 0) throw ValueError("activity: must be >= 0, got " + std::to_string(a) + " at voxel " + std::to_string(v));
        if (a == 0) continue;
        total += a;
        const int idx[3] = {static_cast<int>(v / (static_cast<uint64_t>(g.ny) * g.nx)),
                            static_cast<int>((v / g.nx) % g.ny), static_cast<int>(v % g.nx)};
        for (int k = 0; k < 3; ++k) {
            lo[k] = std::min(lo[k], idx[k]);
            hi[k] = std::max(hi[k], idx[k]);
        }
    }
    if (!(total > 0)) throw ValueError("activity: all zero; the source needs some positive activity");

    Plan plan{};
    build_alias_table(activity, n, total, plan.alias_accept, plan.alias_other);

    // Source box in mm (voxel edges), widened by the largest positron-range displacement.
    const double sigma_range = s.positron_range_fwhm_mm / kFwhmPerSigma;
    const double margin = kMaxNormal * sigma_range;
    const int nn[3] = {g.nz, g.ny, g.nx};
    const double vs[3] = {g.vz, g.vy, g.vx};
    double edge_lo[3], edge_hi[3];
    for (int k = 0; k < 3; ++k) {
        edge_lo[k] = (lo[k] - 0.5 * nn[k]) * vs[k] - margin;
        edge_hi[k] = (hi[k] + 1 - 0.5 * nn[k]) * vs[k] + margin;
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
    p.nz = g.nz;
    p.ny = g.ny;
    p.nx = g.nx;
    p.vz = static_cast<float>(g.vz);
    p.vy = static_cast<float>(g.vy);
    p.vx = static_cast<float>(g.vx);
    p.n_voxels = n;
    p.alias_accept = nullptr;
    p.alias_other = nullptr;
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
