// The attenuation map's parallel projections on the GPU: one thread per plane lattice point
// (attenuation.hpp); the map is read through the read-only cache.
#include "../common/cuda_check.cuh"
#include "attenuation.hpp"

namespace dp::direct::atten {

namespace {

__global__ void project_kernel(MapGrid g, Plane P, double* __restrict__ out) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (j >= P.n2) return;
    out[static_cast<int64_t>(i) * P.n2 + j] = line_integral(g, P, i, j);
}

}  // namespace

void project_cuda(const MapGrid& g, const Plane& P, double* out, void* stream) {
    if (P.n1 <= 0 || P.n2 <= 0) return;
    constexpr int kThreads = 128;
    const dim3 grid((P.n2 + kThreads - 1) / kThreads, P.n1);
    project_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(g, P, out);
    DP_CUDA_CHECK_LAUNCH("attenuation projection");
}

}  // namespace dp::direct::atten
