// Dual-head event Monte Carlo, CUDA backend: a launch around monte_carlo.hpp.
//
// Compiled with --fmad=false (CMakeLists.txt): every decay rounds exactly as on the CPU
// (common/portable_math.hpp), so the histograms of both backends are identical.
//
// One launch per call; each thread runs a grid-stride range of decay numbers (decay d draws from
// Philox counter d, so which thread runs it does not matter), adds each true with a
// fire-and-forget atomicAdd into the histogram, and its outcome counts are reduced per warp and
// added with one atomic per warp and counter. The grid is as many blocks as fit on the device at
// once, so every launch is one resident wave that loops. A decay is register-only work (Philox,
// log, sqrt, the crystal walk) plus one scattered read of the alias table and at most one
// histogram add, so the kernel is compute bound; the alias table stays on the device between calls
// (DevicePlan), the parameters are a __grid_constant__ block read from constant space.
#include <cstdint>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/cuda_occupancy.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "monte_carlo_api.hpp"

namespace dp::dualhead::mc::gpu {
namespace {

constexpr int kBlock = 256;

enum CounterSlot { kSlotInBand, kSlotCrossed, kSlotTrues, kNumCounters };

__device__ __forceinline__ uint32_t warp_sum(uint32_t v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__global__ void __launch_bounds__(kBlock)
dualhead_monte_carlo_kernel(const __grid_constant__ McParams P, uint64_t first, uint64_t count, float weight,
                            float* counts, unsigned long long* counters) {
    uint32_t in_band = 0, crossed = 0, trues = 0;
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        int64_t lor;
        const int outcome = simulate_decay<false>(P, first + i, &lor, nullptr);
        count_outcome(outcome, in_band, crossed, trues);
        if (outcome == kTrue && counts != nullptr) atomicAdd(counts + lor, weight);  // result unused: a RED
    }
    // Every thread of the block reaches here (no early return), so full-mask shuffles are safe.
    const uint32_t c[kNumCounters] = {in_band, crossed, trues};
    for (int k = 0; k < kNumCounters; ++k) {
        const uint32_t v = warp_sum(c[k]);
        if ((threadIdx.x & 31) == 0 && v) atomicAdd(counters + k, static_cast<unsigned long long>(v));
    }
}

}  // namespace

int current_device() {
    int d = -1;
    DP_CUDA_CHECK(cudaGetDevice(&d));
    return d;
}

struct DevicePlan::Impl {
    McParams params;
    cuda::DeviceBuffer accept, other, counters;
    unsigned wave = 0;
};

DevicePlan::DevicePlan(const Plan& plan) : impl_(new Impl) {
    DP_CUDA_CHECK(cudaGetDevice(&device_));
    const size_t n = plan.alias_accept.size();
    impl_->accept = cuda::DeviceBuffer(n * sizeof(float));
    impl_->other = cuda::DeviceBuffer(n * sizeof(uint32_t));
    impl_->accept.upload(plan.alias_accept.data(), impl_->accept.bytes());
    impl_->other.upload(plan.alias_other.data(), impl_->other.bytes());
    impl_->counters = cuda::DeviceBuffer(kNumCounters * sizeof(unsigned long long));
    impl_->params = plan.params;
    impl_->params.src.alias_accept = impl_->accept.as<float>();
    impl_->params.src.alias_other = impl_->other.as<uint32_t>();
    impl_->wave = static_cast<unsigned>(cuda::resident_blocks(dualhead_monte_carlo_kernel, kBlock, 0, device_));
}

DevicePlan::~DevicePlan() = default;

Counters DevicePlan::simulate(uint64_t seed, uint64_t first, uint64_t count, float weight, float* counts,
                              void* stream) {
    require(count > 0 && count <= kMaxCount, "count: expected a positive number of decays <= 2^31");
    require(first + count >= first, "first: the decay range overflows 2^64");
    const int current = current_device();
    if (current != device_)
        throw ValueError("the Monte Carlo's device plan lives on device " + std::to_string(device_) +
                         ", the current device is " + std::to_string(current));
    const auto st = static_cast<cudaStream_t>(stream);
    McParams P = impl_->params;
    set_seed(P, seed);
    auto* d_counters = impl_->counters.as<unsigned long long>();
    DP_CUDA_CHECK(cudaMemsetAsync(d_counters, 0, impl_->counters.bytes(), st));
    const uint64_t needed = (count + kBlock - 1) / kBlock;
    const unsigned blocks = needed < impl_->wave ? static_cast<unsigned>(needed) : impl_->wave;
    dualhead_monte_carlo_kernel<<<blocks, kBlock, 0, st>>>(P, first, count, weight, counts, d_counters);
    DP_CUDA_CHECK_LAUNCH("dualhead_monte_carlo_kernel");
    unsigned long long host[kNumCounters] = {};
    DP_CUDA_CHECK(cudaMemcpyAsync(host, d_counters, sizeof(host), cudaMemcpyDeviceToHost, st));
    DP_CUDA_CHECK(cudaStreamSynchronize(st));
    Counters c;
    c.decays = count;
    c.in_band = host[kSlotInBand];
    c.crossed = host[kSlotCrossed];
    c.trues = host[kSlotTrues];
    return c;
}

}  // namespace dp::dualhead::mc::gpu
