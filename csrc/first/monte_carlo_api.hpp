// FIRST event-level Monte Carlo, host API (plain C++: the bindings need no CUDA headers).
//
// make_plan turns the scanner and the activity image into the per-decay parameters (alias table,
// direction band); simulate_cpu / gpu::simulate run decays 0 .. n_decays - 1 of the seed's stream
// and add 1 to sinogram[a, r1, r2, rho] for each binned coincidence (monte_carlo.hpp).
//
// Chunks and determinism: decays run in chunks of chunk_decays; between chunks the host calls the
// ChunkHook (progress, Ctrl-C). Decay d draws from Philox counter d only, so the sinogram depends
// on (seed, n_decays) alone: not on threads, chunks, launch shape or backend, up to the rare events
// that libm and CUDA math bin differently. Counts are float32 1.0 adds, exact in any order while
// every bin holds fewer than 2^24 counts.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "../common/alias_table.hpp"
#include "monte_carlo.hpp"

namespace dp::first::mc {

// RotatingScanner's fields (mm, per mm, degrees), plus E0 = depth_moments(0)[0].
struct ScannerSpec {
    int n_rows, n_columns, n_angles, n_radial;
    double pitch_mm, crystal_mm, depth_mm, mu_per_mm, head_distance_mm, radial_bin_mm;
    double mean_depth_mm;
    double positron_range_fwhm_mm, noncollinearity_fwhm_deg, intrinsic_fwhm_mm;
};

// The activity's lattice: (nz, ny, nx) voxels of (vz, vy, vx) mm, centred on the axis.
using GridSpec = dp::emission::GridSpec;

// The direction band of photon 1 and its share of all decays.
struct Band {
    double sin_el_max;  // |sin(elevation)| <= sin_el_max
    double psi_max;     // |in-plane angle from +x'| <= psi_max (rad)
    double fraction;    // decays whose pair axis falls in the band / all decays = 2 psi_max sin_el_max / pi
    double source_radius_mm;  // radius of the source cylinder the band was made for (range margin included)
};

// Everything simulate_* needs. params' alias pointers are filled by each backend (host or device
// copies of alias_accept / alias_other).
struct Plan {
    McParams params;
    std::vector<float> alias_accept;
    std::vector<uint32_t> alias_other;
    Band band;
};

// Validates the scanner and the activity (finite, >= 0, not all zero, between the heads) with
// dp::ValueError naming the argument, and builds the alias table and the band.
Plan make_plan(const ScannerSpec& scanner, const GridSpec& grid, const float* activity);

// The Philox key of a seed.
void set_seed(McParams& params, uint64_t seed);

struct Counters {
    uint64_t decays = 0;          // decays simulated (pair axis inside the band)
    uint64_t entered_both = 0;    // both photons entered their head's front face
    uint64_t detected_both = 0;   // both photons interacted in their head (coincidences)
    uint64_t binned = 0;          // added to the sinogram
    uint64_t outside_radial = 0;  // coincidences whose radial bin is outside [0, n_radial)
};

// Called on the calling thread between chunks with the running totals; may throw to abort.
using ChunkHook = std::function<void(const Counters&)>;

// CPU (OpenMP): sinogram is the (n_angles, n_rows, n_rows, n_radial) float32 C-contiguous array
// to add into; threads <= 0 uses OpenMP's default.
Counters simulate_cpu(const Plan& plan, uint64_t n_decays, uint64_t seed, uint64_t chunk_decays,
                      float* sinogram, int threads, const ChunkHook& hook);

// Decays 0 .. n_decays - 1, one by one with their full history (tests, inspection).
std::vector<DecayRecord> trace_cpu(const Plan& plan, uint64_t n_decays, uint64_t seed);

namespace gpu {
// CUDA: sinogram is a device pointer to (n_angles, n_rows, n_rows, n_radial) float32; the kernels
// run on `stream` (a cudaStream_t, 0 = legacy default) and the call returns when they are done.
Counters simulate(const Plan& plan, uint64_t n_decays, uint64_t seed, uint64_t chunk_decays,
                  float* sinogram, void* stream, const ChunkHook& hook);
}  // namespace gpu

}  // namespace dp::first::mc
