// Shared by the DIRECT CUDA files: the launchers each provides to the dispatch (cuda_lut.cu).
//
//   cuda_lut.cu    the view's LUTs resident on the GPU (DeviceLut: the column plan, factored weights) and
//                  the dispatch of a projection to its method
//   cuda_slab.cu   the defaults: slab (sources staged in shared memory) and its fallback columns
//   cuda_paper.cu  the paper's thread- and instruction-level schemes (tlp, ilp: baselines)
#pragma once

#include <cuda_runtime.h>

#include "cuda.hpp"

namespace dp::direct::gpu::detail {

// cuda_slab.cu
void launch_columns(bool forward, const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream);
void launch_slab(bool forward, SlabVariant variant, const float* src, float* dst, const DeviceLut& lut,
                 cudaStream_t stream);

// cuda_paper.cu: method tlp or ilp
void launch_paper(bool forward, Method method, const float* src, float* dst, const DeviceLut& lut,
                  cudaStream_t stream);

}  // namespace dp::direct::gpu::detail
