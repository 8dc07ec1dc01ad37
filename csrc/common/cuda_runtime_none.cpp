// Built when no CUDA compiler was found: there is never a usable device.
#include "cuda_runtime.hpp"

namespace dp::cuda {
int device_count() { return 0; }
std::string runtime_status() { return "directpet was built without the CUDA backend"; }
RuntimeInfo runtime_info() { return {}; }
}  // namespace dp::cuda
