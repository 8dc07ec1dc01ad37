// Activity checks and the alias table of the event Monte Carlos (alias_table.hpp).
#include "alias_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "errors.hpp"

namespace dp::emission {
namespace {

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

double ActivitySummary::edge_lo(const GridSpec& g, int k, double margin) const {
    const int n[3] = {g.nz, g.ny, g.nx};
    const double v[3] = {g.vz, g.vy, g.vx};
    return (lo[k] - 0.5 * n[k]) * v[k] - margin;
}

double ActivitySummary::edge_hi(const GridSpec& g, int k, double margin) const {
    const int n[3] = {g.nz, g.ny, g.nx};
    const double v[3] = {g.vz, g.vy, g.vx};
    return (hi[k] + 1 - 0.5 * n[k]) * v[k] + margin;
}

ActivitySummary make_alias_source(const GridSpec& g, const float* activity, std::vector<float>& accept,
                                  std::vector<uint32_t>& other) {
    check_grid(g);
    const uint64_t n = static_cast<uint64_t>(g.nz) * g.ny * g.nx;
    if (n >= std::numeric_limits<uint32_t>::max())
        throw ValueError("activity: at most 2^32 - 1 voxels, got " + std::to_string(n));

    ActivitySummary s;
    int lo[3] = {g.nz, g.ny, g.nx}, hi[3] = {-1, -1, -1};
    double total = 0;
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
    s.total = total;
    for (int k = 0; k < 3; ++k) {
        s.lo[k] = lo[k];
        s.hi[k] = hi[k];
    }
    build_alias_table(activity, n, total, accept, other);
    return s;
}

}  // namespace dp::emission
