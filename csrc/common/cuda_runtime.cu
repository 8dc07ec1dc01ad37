// What the CUDA runtime says about this machine, for directpet.cuda_device_count() and the environment
// report: the device count (0 without a driver, never an exception), a status line, and the runtime,
// driver and cuFFT versions with one line per device.
#include <cufft.h>

#include <cstdio>

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

RuntimeInfo runtime_info() {
    RuntimeInfo info;
    // each query may fail on a machine without a driver: the field stays 0, the error is cleared
    if (cudaRuntimeGetVersion(&info.runtime) != cudaSuccess) info.runtime = 0;
    if (cudaDriverGetVersion(&info.driver) != cudaSuccess) info.driver = 0;
    if (cufftGetVersion(&info.cufft) != CUFFT_SUCCESS) info.cufft = 0;
    cudaGetLastError();
    for (int d = 0; d < device_count(); ++d) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        char line[400];
        std::snprintf(line, sizeof line, "%s (compute capability %d.%d, %.0f GiB)", prop.name, prop.major, prop.minor,
                      static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
        info.devices.emplace_back(line);
    }
    return info;
}

}  // namespace dp::cuda
