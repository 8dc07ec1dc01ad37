// Device discovery that works with and without the CUDA backend compiled in.
#pragma once

#include <string>

namespace dp::cuda {
int device_count();
std::string runtime_status();
}  // namespace dp::cuda
