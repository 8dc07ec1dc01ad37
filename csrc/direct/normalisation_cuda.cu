// Normalisation histo-images on the GPU (normalisation.hpp): a thread per voxel, a grid row of blocks per
// view; the view's directions are read from global memory (the same few for every thread: cached).
// Compiled with --fmad=false (CMakeLists.txt) so that the arithmetic rounds as CuPy's element-wise kernels.
#include "../common/cuda_check.cuh"
#include "normalisation.hpp"

namespace dp::direct::normalisation::gpu {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
normalisation_kernel(const RingScanner s, const Efficiencies e, const double* dirs, int n_dirs, const double* zs,
                     int nz, const double* ys, int ny, const double* xs, int nx, float* out) {
    const int64_t n_voxels = static_cast<int64_t>(nz) * ny * nx;
    const int64_t voxel = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (voxel >= n_voxels) return;
    const int v = blockIdx.y;
    const int ix = static_cast<int>(voxel % nx), iy = static_cast<int>((voxel / nx) % ny),
              iz = static_cast<int>(voxel / (static_cast<int64_t>(nx) * ny));
    out[v * n_voxels + voxel] = voxel_normalisation(s, e, dirs + 3ll * n_dirs * v, n_dirs, xs[ix], ys[iy], zs[iz]);
}

}  // namespace

void normalisation(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_views, int n_dirs,
                   const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out) {
    const int64_t n_voxels = static_cast<int64_t>(nz) * ny * nx;
    const dim3 grid(static_cast<unsigned>((n_voxels + kThreads - 1) / kThreads), static_cast<unsigned>(n_views));
    normalisation_kernel<<<grid, kThreads>>>(s, e, dirs, n_dirs, zs, nz, ys, ny, xs, nx, out);
    DP_CUDA_CHECK_LAUNCH("normalisation_kernel");
    DP_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace dp::direct::normalisation::gpu
