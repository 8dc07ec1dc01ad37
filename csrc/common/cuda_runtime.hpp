// Device discovery that works with and without the CUDA backend compiled in.
#pragma once

#include <string>
#include <vector>

namespace dp::cuda {
int device_count();
std::string runtime_status();

// What the CUDA backend finds at run time (0 / empty where there is none): the runtime, driver and
// cuFFT versions (CUDA's integer encoding, e.g. 13000 for 13.0) and each usable device as
// "name (compute capability M.m, N GiB)".
struct RuntimeInfo {
    int runtime = 0, driver = 0, cufft = 0;
    std::vector<std::string> devices;
};
RuntimeInfo runtime_info();
}  // namespace dp::cuda
