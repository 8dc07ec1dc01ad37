// DIRECT projectors on the GPU: the paper's schemes, the baselines of the defaults in cuda_slab.cu.
//   tlp  one output voxel per thread, the shared per-voxel math of worker.hpp, 16 x 16 x 2 blocks;
//   ilp  16 z-voxels per thread sharing one kernel identifier, one weight fetch per offset ([HA] Fig. 3).
#include <cuda_runtime.h>

#include "../common/cuda_check.cuh"
#include "../common/errors.hpp"
#include "cuda_internal.cuh"

namespace dp::direct::gpu::detail {

namespace {

// ---- tlp: one voxel per thread, the shared per-voxel math -------------------------------------
template <bool kForward>
__global__ void tlp_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, LutRef lut) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= d.nx || y >= d.ny || z >= d.nz) return;
    dst[(static_cast<long long>(z) * d.ny + y) * d.nx + x] = project_voxel<kForward>(src, d, lut, z, y, x);
}

// ---- ilp: 16 z-voxels per thread, one weight fetch per offset (the paper's Fig. 3) -------------
constexpr int kIlpRun = 16;

template <bool kForward>
__global__ void ilp_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, LutRef lut) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * kIlpRun;
    if (x >= d.nx || y >= d.ny) return;
    const long long plane = static_cast<long long>(d.ny) * d.nx;
    const int own = __ldg(lut.lormap + y * d.nx + x);
    float acc[kIlpRun] = {};
    for (int i = 0; i < lut.n_offsets; ++i) {
        const int dz = __ldg(lut.offsets + 3 * i), sy = y + __ldg(lut.offsets + 3 * i + 1),
                  sx = x + __ldg(lut.offsets + 3 * i + 2);
        if (sy < 0 || sy >= d.ny || sx < 0 || sx >= d.nx) continue;
        const int w = kForward ? forward_weight_index(__ldg(lut.lormap + sy * d.nx + sx), __ldg(lut.flip + i), lut.n_offsets)
                               : back_weight_index(own, i, lut.n_offsets);
        const float wv = __ldg(lut.values + w);
        const float* col = src + static_cast<long long>(sy) * d.nx + sx;
#pragma unroll
        for (int j = 0; j < kIlpRun; ++j) {
            const int z = z0 + j + dz;
            if (z >= 0 && z < d.nz) acc[j] = fmaf(wv, __ldg(col + z * plane), acc[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < kIlpRun; ++j)
        if (z0 + j < d.nz) dst[(z0 + j) * plane + static_cast<long long>(y) * d.nx + x] = acc[j];
}

template <bool kForward>
void launch_paper_kernel(Method m, const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream) {
    const Dims d = lut.dims();
    if (m == Method::tlp) {
        const dim3 block(16, 16, 2);  // the paper's 512-thread block
        const dim3 grid((d.nx + 15) / 16, (d.ny + 15) / 16, (d.nz + 1) / 2);
        tlp_kernel<kForward><<<grid, block, 0, stream>>>(src, dst, d, lut.device_ref());
        DP_CUDA_CHECK_LAUNCH("direct tlp_kernel");
        return;
    }
    const dim3 block(16, 16, 1);
    const dim3 grid((d.nx + 15) / 16, (d.ny + 15) / 16, (d.nz + kIlpRun - 1) / kIlpRun);
    ilp_kernel<kForward><<<grid, block, 0, stream>>>(src, dst, d, lut.device_ref());
    DP_CUDA_CHECK_LAUNCH("direct ilp_kernel");
}

}  // namespace

void launch_paper(bool forward, Method method, const float* src, float* dst, const DeviceLut& lut,
                  cudaStream_t stream) {
    if (method != Method::tlp && method != Method::ilp) throw ValueError("method: not one of the paper's schemes");
    if (forward)
        launch_paper_kernel<true>(method, src, dst, lut, stream);
    else
        launch_paper_kernel<false>(method, src, dst, lut, stream);
}

}  // namespace dp::direct::gpu::detail
