// CUDA event simulation + deposition: a launch around events_worker.hpp.
//
// One thread per random stream (kGpuStreams = 2^20 streams, ~10 waves of resident threads).
// A thread keeps its curand Philox4x32-10 state in registers, draws decays until it has accepted
// its quota of events (events.hpp) or drawn kRoundDecaysGpu decays, deposits each accepted event
// with a fire-and-forget atomicAdd into the histo-images, then stores its state and remaining quota
// for the next launch. The host loops launches until every quota is met; per-launch counters are
// reduced per warp and added with one atomic per warp and counter.
//
// Why this shape: a decay is a few hundred instructions of register-only work (Philox, sqrt,
// sincos, exp) and only ~5 % of decays deposit, so the kernel is compute bound; nothing is staged
// through memory, no event list is written, and the 478 MB histo-images are touched only by the
// scattered atomics of accepted events (10^8 per second are a few GB/s of L2/DRAM traffic, ~0.1 %
// of the bandwidth).
// A possible further step, not measured: let lanes keep accepted candidates pending and run the
// blur/timing/deposition stage only when half the warp has one (today a warp runs that stage in
// most iterations with ~5 % of its lanes active).
#include <curand_kernel.h>

#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "events.hpp"

namespace dp::direct::events::gpu {
namespace {

constexpr int kBlock = 256;
// Decays per thread per launch: 2^20 threads x 512 = 5e8 decays, roughly 0.1 s, so the host hook
// (progress, Ctrl-C) runs a few times a second and a launch never nears a watchdog.
constexpr uint32_t kRoundDecaysGpu = 512;

// Slots of the device counters (Counters, in order).
enum CounterSlot {
    kSlotDecays, kSlotTrues, kSlotDeposited, kSlotOutsideViews, kSlotOutsideGrid, kSlotCold, kNumCounters
};

struct DeviceRng {
    curandStatePhilox4_32_10_t state;
    __device__ __forceinline__ uint32_t next_u32() { return curand(&state); }
};

__global__ void init_streams(curandStatePhilox4_32_10_t* states, uint32_t* left, uint32_t n_streams,
                             unsigned long long seed, uint32_t base_quota, uint32_t n_extra) {
    const uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_streams) return;
    // Philox: one subsequence per stream, so streams never overlap; initialisation is O(1).
    curand_init(seed, s, 0, &states[s]);
    left[s] = base_quota + (s < n_extra ? 1u : 0u);
}

__device__ __forceinline__ uint32_t warp_sum(uint32_t v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// __grid_constant__: the ~2.4 KB parameter block is read in place from constant space (the worker
// takes it by reference) instead of being copied to each thread's local memory.
__global__ void __launch_bounds__(kBlock)
simulate_kernel(const __grid_constant__ SimParams P, curandStatePhilox4_32_10_t* states,
                uint32_t* left, uint32_t n_streams, uint32_t max_decays, float* histos,
                unsigned long long* counters) {
    const uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t c[kNumCounters] = {};
    if (s < n_streams) {
        uint32_t quota = left[s];
        if (quota > 0) {
            DeviceRng rng{states[s]};
            Event ev;
            for (uint32_t t = 0; t < max_decays && quota > 0; ++t) {
                const int r = simulate_decay(P, rng, ev);
                if (r == kColdExhausted) {  // the host raises an error after this launch
                    ++c[kSlotCold];
                    break;
                }
                ++c[kSlotDecays];
                if (r != kAccepted) continue;
                --quota;
                ++c[kSlotTrues];
                int64_t index = 0;
                const int where = locate_event(P.grid, P.views, ev.p1, ev.p2, ev.dt, &index);
                if (where == kDeposited) {
                    atomicAdd(histos + index, 1.0f);  // result unused: compiles to a RED
                    ++c[kSlotDeposited];
                } else if (where == kOutsideViews) {  // constant indices keep c[] in registers
                    ++c[kSlotOutsideViews];
                } else {
                    ++c[kSlotOutsideGrid];
                }
            }
            states[s] = rng.state;
            left[s] = quota;
        }
    }
    // Every thread of the block reaches here (no early return above), so full-mask shuffles are safe.
    // A warp's sums fit in 32 bits: 32 x kRoundDecaysGpu decays at most.
    for (int k = 0; k < kNumCounters; ++k) {
        const uint32_t v = warp_sum(c[k]);
        if ((threadIdx.x & 31) == 0 && v) atomicAdd(counters + k, static_cast<unsigned long long>(v));
    }
}

}  // namespace

Counters simulate_deposit(const SimParams& P, uint64_t n_events, uint64_t seed, float* histos,
                          void* stream, const RoundHook& hook) {
    require(n_events > 0, "n_events: expected a positive integer");
    require(histos != nullptr, "out: null device pointer");
    const uint32_t ns = stream_count(n_events, kGpuStreams);
    require(n_events / ns < 0xffffffffull, "n_events: too large (at most ~1e15)");
    const auto st = static_cast<cudaStream_t>(stream);

    cuda::DeviceBuffer states(static_cast<size_t>(ns) * sizeof(curandStatePhilox4_32_10_t));
    cuda::DeviceBuffer left(static_cast<size_t>(ns) * sizeof(uint32_t));
    cuda::DeviceBuffer counters(kNumCounters * sizeof(unsigned long long));
    auto* d_counters = counters.as<unsigned long long>();
    DP_CUDA_CHECK(cudaMemsetAsync(d_counters, 0, counters.bytes(), st));

    const unsigned blocks = (ns + kBlock - 1) / kBlock;
    init_streams<<<blocks, kBlock, 0, st>>>(states.as<curandStatePhilox4_32_10_t>(),
                                            left.as<uint32_t>(), ns, seed,
                                            static_cast<uint32_t>(n_events / ns),
                                            static_cast<uint32_t>(n_events % ns));
    DP_CUDA_CHECK_LAUNCH("direct events init_streams");

    Counters total;
    unsigned long long host[kNumCounters] = {};
    while (total.trues < n_events) {
        simulate_kernel<<<blocks, kBlock, 0, st>>>(P, states.as<curandStatePhilox4_32_10_t>(),
                                                   left.as<uint32_t>(), ns, kRoundDecaysGpu,
                                                   histos, d_counters);
        DP_CUDA_CHECK_LAUNCH("direct events simulate_kernel");
        DP_CUDA_CHECK(cudaMemcpyAsync(host, d_counters, sizeof(host), cudaMemcpyDeviceToHost, st));
        DP_CUDA_CHECK(cudaStreamSynchronize(st));
        total.decays = host[kSlotDecays];
        total.trues = host[kSlotTrues];
        total.deposited = host[kSlotDeposited];
        total.outside_views = host[kSlotOutsideViews];
        total.outside_grid = host[kSlotOutsideGrid];
        total.cold_exhausted = host[kSlotCold];
        if (total.trues > n_events)
            throw std::runtime_error("simulate_deposit (CUDA): accepted more events than asked for");
        if (hook) hook(total);
        check_acceptance(total);
    }
    return total;
}

}  // namespace dp::direct::events::gpu
