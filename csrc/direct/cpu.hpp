// OpenMP DIRECT projectors (CPU backend).
#pragma once

#include "worker.hpp"

namespace dp::direct {

// dst = H src (forward) or H^T src (back) for one view. src and dst are (nz, ny, nx) float32,
// C-contiguous, and must not alias. threads <= 0 uses OpenMP's default.
void project_cpu(bool forward, const float* src, float* dst, const Dims& dims, const LutRef& lut,
                 int threads);

}  // namespace dp::direct
