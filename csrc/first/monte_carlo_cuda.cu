// FIRST event Monte Carlo, CUDA backend: a launch around monte_carlo.hpp.
//
// One launch per chunk of decays; each thread runs a grid-stride range of decay numbers (decay d
// draws from Philox counter d, so which thread runs it does not matter), adds each binned
// coincidence with a fire-and-forget atomicAdd into the sinogram, and its outcome counts are
// reduced per warp and added with one atomic per warp and counter. The grid is as many blocks as
// fit on the device at once, so every launch is one resident wave that loops.
//
// Why this shape: a decay is a few hundred instructions of register-only work (Philox, log, sqrt,
// sin, cos, atan2) plus one scattered read of the alias table, and at most one sinogram add, so
// the kernel is compute bound; no event list is written. The alias table lives in device memory
// (uploaded once per call); the parameters are a __grid_constant__ block read from constant space.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "../common/cuda_check.cuh"
#include "../common/cuda_occupancy.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "monte_carlo_api.hpp"

namespace dp::first::mc::gpu {
namespace {

constexpr int kBlock = 256;
// Per-thread counts are 32 bits: a chunk of at most 2^31 decays keeps every warp's sum below 2^32.
constexpr uint64_t kMaxChunk = 1ull << 31;

enum CounterSlot { kSlotEntered, kSlotDetected, kSlotBinned, kSlotOutside, kNumCounters };

__device__ __forceinline__ uint32_t warp_sum(uint32_t v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__global__ void __launch_bounds__(kBlock)
monte_carlo_kernel(const __grid_constant__ McParams P, uint64_t first, uint64_t count, float* sinogram,
                   unsigned long long* counters) {
    uint32_t entered = 0, detected = 0, binned = 0, outside = 0;
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        DecayRecord rec;
        const int outcome = simulate_decay(P, first + i, rec);
        count_outcome(outcome, entered, detected, binned, outside);
        if (outcome == kBinned) atomicAdd(sinogram + rec.index, 1.0f);  // result unused: a RED
    }
    // Every thread of the block reaches here (no early return), so full-mask shuffles are safe.
    const uint32_t c[kNumCounters] = {entered, detected, binned, outside};
    for (int k = 0; k < kNumCounters; ++k) {
        const uint32_t v = warp_sum(c[k]);
        if ((threadIdx.x & 31) == 0 && v) atomicAdd(counters + k, static_cast<unsigned long long>(v));
    }
}

}  // namespace

Counters simulate(const Plan& plan, uint64_t n_decays, uint64_t seed, uint64_t chunk_decays, float* sinogram,
                  void* stream, const ChunkHook& hook) {
    require(n_decays > 0, "n_decays: expected a positive integer");
    require(chunk_decays > 0 && chunk_decays <= kMaxChunk, "chunk_decays: expected a positive integer <= 2^31");
    require(sinogram != nullptr, "out: null device pointer");
    const auto st = static_cast<cudaStream_t>(stream);

    const size_t n = plan.alias_accept.size();
    cuda::DeviceBuffer accept(n * sizeof(float)), other(n * sizeof(uint32_t));
    accept.upload(plan.alias_accept.data(), accept.bytes());
    other.upload(plan.alias_other.data(), other.bytes());
    McParams P = plan.params;
    P.src.alias_accept = accept.as<float>();
    P.src.alias_other = other.as<uint32_t>();
    set_seed(P, seed);

    cuda::DeviceBuffer counters(kNumCounters * sizeof(unsigned long long));
    auto* d_counters = counters.as<unsigned long long>();
    DP_CUDA_CHECK(cudaMemsetAsync(d_counters, 0, counters.bytes(), st));
    const auto wave = static_cast<unsigned>(cuda::resident_blocks(monte_carlo_kernel, kBlock));

    Counters total;
    unsigned long long host[kNumCounters] = {};
    for (uint64_t first = 0; first < n_decays; first += chunk_decays) {
        const uint64_t count = std::min(chunk_decays, n_decays - first);
        const uint64_t needed = (count + kBlock - 1) / kBlock;
        const unsigned blocks = needed < wave ? static_cast<unsigned>(needed) : wave;
        monte_carlo_kernel<<<blocks, kBlock, 0, st>>>(P, first, count, sinogram, d_counters);
        DP_CUDA_CHECK_LAUNCH("first monte_carlo_kernel");
        DP_CUDA_CHECK(cudaMemcpyAsync(host, d_counters, sizeof(host), cudaMemcpyDeviceToHost, st));
        DP_CUDA_CHECK(cudaStreamSynchronize(st));
        total.decays += count;
        total.entered_both = host[kSlotEntered];
        total.detected_both = host[kSlotDetected];
        total.binned = host[kSlotBinned];
        total.outside_radial = host[kSlotOutside];
        if (hook) hook(total);
    }
    return total;
}

}  // namespace dp::first::mc::gpu
