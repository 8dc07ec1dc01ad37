// Blocks of a kernel resident on a GPU at once (one full wave), for sizing grids and launches
// (common/waves.hpp counts the waves of a grid against this).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "cuda_check.cuh"

namespace dp::cuda {

// The device's multiprocessors times the blocks of `threads` threads and `smem` bytes of dynamic shared
// memory that fit on one (at least one); device -1: the current device.
template <typename Kernel>
long long resident_blocks(Kernel kernel, int threads, size_t smem = 0, int device = -1) {
    if (device < 0) DP_CUDA_CHECK(cudaGetDevice(&device));
    int n_sm = 0, per_sm = 0;
    DP_CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
    DP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    return static_cast<long long>(std::max(1, per_sm)) * n_sm;
}

}  // namespace dp::cuda
