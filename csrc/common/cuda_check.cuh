// Every CUDA runtime call and every launch goes through these checks; failures become
// std::runtime_error (Python RuntimeError) carrying the CUDA error text; allocation failures
// become dp::OutOfMemory (Python MemoryError).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "errors.hpp"

namespace dp::cuda {

inline void check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return;
    cudaGetLastError();  // reset a non-sticky error so the next call starts clean
    const std::string msg = std::string("CUDA error in ") + what + ": " + cudaGetErrorName(err) +
                            " (" + cudaGetErrorString(err) + ")";
    if (err == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
    throw std::runtime_error(msg);
}

}  // namespace dp::cuda

#define DP_CUDA_CHECK(call) ::dp::cuda::check((call), #call)
// After a launch: configuration errors show at once; execution errors at the next sync.
#define DP_CUDA_CHECK_LAUNCH(name) ::dp::cuda::check(cudaGetLastError(), name)
