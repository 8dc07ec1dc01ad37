// Dual-head event Monte Carlo, host API (plain C++: the bindings need no CUDA headers).
//
// make_plan turns the scanner and the activity image into the per-decay parameters (alias table,
// direction band); simulate_cpu / gpu::DevicePlan::simulate run the decays first .. first + count - 1
// of the seed's stream and add `weight` to counts[lor] for each true coincidence (monte_carlo.hpp).
//
// Decay d draws from Philox counter d only, and the arithmetic is bit-reproducible, so the result
// depends on (seed, first, count) alone: not on threads, chunks, launch shape or backend. Running
// [0, n) in any split into ranges gives the same histogram. weight = -1 takes a range back out
// (the Python driver uses it to stop at an exact number of trues); counts = nullptr only counts.
// Counts are float32 additions of +-1, exact in any order while every LOR holds fewer than 2^24.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../common/alias_table.hpp"
#include "monte_carlo.hpp"

namespace dp::dualhead::mc {

// DualHeadScanner's fields (mm, per mm, degrees).
struct ScannerSpec {
    int n_y, n_z, voxels_per_crystal, n_planes;
    double pitch_mm, crystal_mm, depth_mm, gap_mm, plane_mm, mu_per_mm;
    double positron_range_fwhm_mm, acollinearity_fwhm_deg;
};

// Photon 1's direction band and its share of all decays.
struct Band {
    double sin_el_max;       // |sin(elevation)| <= sin_el_max
    double psi_max;          // |angle from +x in the x-y plane| <= psi_max (rad)
    double fraction;         // share of isotropic pair axes in the band: band_threshold / 2^32
    double reach_mm;         // gap / 2 minus the source box's largest x (positron range included)
    bool full_hemisphere;    // the source box reaches a front face: no restriction (fraction 1)
};

// Everything the backends need; params' alias pointers are filled by each backend.
struct Plan {
    McParams params;
    std::vector<float> alias_accept;
    std::vector<uint32_t> alias_other;
    Band band;
};

// Validates the scanner (dp::ValueError naming "scanner <field>") and the activity, an image of
// scanner.grid's shape (n_z D, n_y D, n_planes) [v_z, v_y, p] (finite, >= 0, not all zero), and
// builds the alias table and the band.
Plan make_plan(const ScannerSpec& scanner, const float* activity);

// The Philox key of a seed.
void set_seed(McParams& params, uint64_t seed);

struct Counters {
    uint64_t decays = 0;   // decays simulated
    uint64_t in_band = 0;  // pair axis in the band
    uint64_t crossed = 0;  // both photons' lines cross crystals of their heads
    uint64_t trues = 0;    // both detected: added to the histogram
    Counters& operator+=(const Counters& o) {
        decays += o.decays;
        in_band += o.in_band;
        crossed += o.crossed;
        trues += o.trues;
        return *this;
    }
};

// CPU (OpenMP): decays first .. first + count - 1; counts is the float32 (n_lors,) vector to add
// weight into, or nullptr to count only; threads <= 0 uses OpenMP's default.
Counters simulate_cpu(const Plan& plan, uint64_t seed, uint64_t first, uint64_t count, float weight, float* counts,
                      int threads);

// Decays first .. first + count - 1 with their full history (tests, inspection).
std::vector<DecayRecord> trace_cpu(const Plan& plan, uint64_t seed, uint64_t first, uint64_t count);

namespace gpu {
// Largest count of one simulate call (its per-thread counters are 32 bits).
constexpr uint64_t kMaxCount = 1ull << 31;

// The current CUDA device (checked).
int current_device();

// The plan on the current CUDA device (alias table uploaded once).
class DevicePlan {
public:
    explicit DevicePlan(const Plan& plan);
    ~DevicePlan();
    DevicePlan(const DevicePlan&) = delete;
    DevicePlan& operator=(const DevicePlan&) = delete;
    // As simulate_cpu with counts a device pointer (or nullptr); runs on `stream` (a cudaStream_t,
    // 0 = legacy default) and returns when done. count <= kMaxCount.
    Counters simulate(uint64_t seed, uint64_t first, uint64_t count, float weight, float* counts, void* stream);
    int device() const { return device_; }

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    int device_ = -1;
};
}  // namespace gpu

}  // namespace dp::dualhead::mc
