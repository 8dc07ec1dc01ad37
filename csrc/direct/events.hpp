// Compiled event simulation + deposition (host API; plain C++ so the bindings need no CUDA headers).
//
// simulate_deposit_* draws true coincidences from an analytic phantom and adds each one, at its most
// likely point, to the histo-image of its view: histos[view, iz, iy, ix] += 1 (science.md 1.2,
// 1.12). No event list is written.
//
// Exact count, determinism
// ------------------------
// The work is split into a fixed number of random streams (kCpuStreams / kGpuStreams, fewer when
// n_events is smaller). Stream s gets a quota of n_events / n_streams accepted events (the first
// n_events % n_streams streams one more) and draws decays until it has accepted exactly that many.
// Because the decays of a stream are independent, its first q accepted events are an unbiased
// sample of the accepted-event distribution, so the total is exactly n_events with no trimming
// step, and the result depends only on (seed, n_streams): not on the number of CPU threads, the
// GPU model or the scheduling. Deposits add 1.0f to float counts, which is exact in any order
// while every voxel stays below 2^24 counts, so the histo-images are reproducible bit for bit.
// The CPU and GPU bit streams differ (both Philox4x32-10, with different counter layouts): the
// two backends agree in distribution, not event by event.
//
// Streams run in rounds of at most `kRoundDecays*` decays each; between rounds the host calls the
// `RoundHook` (progress, Ctrl-C) and stops with an error if 1e8 decays gave no accepted event
// or the cold inserts cancel the activity.
#pragma once

#include <cstdint>
#include <functional>

#include "events_worker.hpp"

namespace dp::direct::events {

struct Counters {
    uint64_t decays = 0;         // annihilations drawn in the tilt band (EventBatch.n_decays)
    uint64_t trues = 0;          // accepted true coincidences (= n_events at the end)
    uint64_t deposited = 0;      // added to a histo-image
    uint64_t outside_views = 0;  // tilt outside the views' +-theta_max
    uint64_t outside_grid = 0;   // most likely point outside the grid
    uint64_t cold_exhausted = 0; // streams stopped by kMaxColdRejections cold rejections in a row
};

// Called on the calling thread between rounds with the running totals; may throw to abort.
using RoundHook = std::function<void(const Counters&)>;

constexpr uint32_t kCpuStreams = 256;
// GPU: one thread per stream. 2^20 streams are ~10 waves of resident threads on an H100 / H200
// (~80 registers: 768 threads per SM), so the partly filled last wave of a launch costs little;
// the states take 64 MB.
constexpr uint32_t kGpuStreams = 1u << 20;
constexpr uint64_t kNoAcceptanceLimit = 100000000ull;  // decays with no accepted event -> error

// Number of random streams used for n_events on each backend.
inline uint32_t stream_count(uint64_t n_events, uint32_t max_streams) {
    return n_events < max_streams ? static_cast<uint32_t>(n_events) : max_streams;
}

// Quota of accepted events of stream s.
inline uint64_t stream_quota(uint64_t n_events, uint32_t n_streams, uint32_t s) {
    return n_events / n_streams + (s < n_events % n_streams ? 1 : 0);
}

// Throws std::runtime_error when the cold inserts rejected every draw of a stream
// (kMaxColdRejections in a row), or no accepted event came from kNoAcceptanceLimit decays.
void check_acceptance(const Counters& c);

// CPU (OpenMP): histos is the (n_views, nz, ny, nx) float32 C-contiguous array to add into.
// threads <= 0 uses OpenMP's default. batched = false runs simulate_decay decay by decay, the
// CUDA kernel's structure (for tests; about 3x slower).
Counters simulate_deposit_cpu(const SimParams& params, uint64_t n_events, uint64_t seed,
                              float* histos, int threads, const RoundHook& hook, bool batched = true);

// Deposit a list of events (p1, p2: (n, 3) mm; dt: (n,) ps) like deposit(mode='nearest'):
// the compiled twin of the Python deposition, used to test that the two agree event by event.
Counters deposit_events_cpu(const GridParams& grid, const ViewParams& views, const float* p1,
                            const float* p2, const float* dt, int64_t n, float* histos, int threads);

namespace gpu {
// CUDA: histos is a device pointer to (n_views, nz, ny, nx) float32; the kernels run on `stream`
// (a cudaStream_t, 0 = legacy default) and the call returns when they are done.
Counters simulate_deposit(const SimParams& params, uint64_t n_events, uint64_t seed, float* histos,
                          void* stream, const RoundHook& hook);
}  // namespace gpu

}  // namespace dp::direct::events
