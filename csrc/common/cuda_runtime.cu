#include "cuda_check.cuh"
#include "cuda_runtime.hpp"

namespace dp::cuda {

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

std::string runtime_status() {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    }
    return n > 0 ? "ok" : "no CUDA device present";
}

}  // namespace dp::cuda
