// Host preparation of an activity image for the event Monte Carlos (emission.hpp): checks, the
// bounding box of its non-zero voxels, and Walker's alias table by Vose's method.
#pragma once

#include <cstdint>
#include <vector>

namespace dp::emission {

constexpr double kFwhmPerSigma = 2.3548200450309493;  // 2 sqrt(2 ln 2)
// Largest |normal| that normal_pair (random.hpp, portable_math.hpp) can return: sqrt(-2 ln u) with
// u >= 2^-24 is 5.768 (rounded up for float logs): a Gaussian blur never moves a point further than
// this many sigma per axis.
constexpr double kMaxNormal = 5.8;

// The activity's lattice: (nz, ny, nx) voxels of (vz, vy, vx) mm, C order with x fastest, voxel
// centres (i - (n - 1) / 2) * v on every axis.
struct GridSpec {
    int nz, ny, nx;
    double vz, vy, vx;
};

// What make_alias_source found: the total and the index bounding box of the non-zero voxels.
struct ActivitySummary {
    double total = 0;
    int lo[3] = {0, 0, 0};  // (z, y, x) smallest index of a non-zero voxel
    int hi[3] = {0, 0, 0};  // (z, y, x) largest
    // Edges (mm) of the non-zero voxels' box along axis k (0 = z, 1 = y, 2 = x), widened by margin.
    double edge_lo(const GridSpec& g, int k, double margin) const;
    double edge_hi(const GridSpec& g, int k, double margin) const;
};

// Validates grid and activity (finite, >= 0, not all zero, fewer than 2^32 - 1 voxels) with
// dp::ValueError naming the argument ("grid", "activity"), fills accept / other with the alias
// table (voxel v kept with probability accept[v], else other[v]) and returns the summary.
ActivitySummary make_alias_source(const GridSpec& grid, const float* activity, std::vector<float>& accept,
                                  std::vector<uint32_t>& other);

}  // namespace dp::emission
