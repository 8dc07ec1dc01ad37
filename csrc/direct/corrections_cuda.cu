// Correction histo-images on the GPU (corrections.hpp): a thread per voxel, a grid row of blocks per view;
// the view's directions are read from global memory (the same few for every thread: cached).
// Compiled with --fmad=false (CMakeLists.txt) so that the arithmetic rounds as CuPy's element-wise kernels.
#include "../common/cuda_check.cuh"
#include "corrections.hpp"

namespace dp::direct::corrections::gpu {

namespace {

constexpr int kThreads = 256;

// The voxel of this thread in a (n_views x blocks) grid, false past the grid's end.
__device__ __forceinline__ bool this_voxel(int nz, int ny, int nx, int64_t& voxel, int& iz, int& iy, int& ix) {
    voxel = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (voxel >= static_cast<int64_t>(nz) * ny * nx) return false;
    ix = static_cast<int>(voxel % nx), iy = static_cast<int>((voxel / nx) % ny),
    iz = static_cast<int>(voxel / (static_cast<int64_t>(nx) * ny));
    return true;
}

dim3 view_grid(int n_views, int nz, int ny, int nx) {
    const int64_t n_voxels = static_cast<int64_t>(nz) * ny * nx;
    return dim3(static_cast<unsigned>((n_voxels + kThreads - 1) / kThreads), static_cast<unsigned>(n_views));
}

__global__ void __launch_bounds__(kThreads)
acceptance_kernel(const RingScanner s, const AcceptanceCell* cells, const double* cos_sin, int n_quad, double omega_max,
                  const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out) {
    int64_t voxel;
    int iz, iy, ix;
    if (!this_voxel(nz, ny, nx, voxel, iz, iy, ix)) return;
    const int v = blockIdx.y;
    out[v * (static_cast<int64_t>(nz) * ny * nx) + voxel] =
        voxel_acceptance(s, cells[v], cos_sin + 2ll * n_quad * v, n_quad, omega_max, xs[ix], ys[iy], zs[iz]);
}

__global__ void __launch_bounds__(kThreads)
normalisation_kernel(const RingScanner s, const Efficiencies e, const double* dirs, int n_dirs, const double* zs,
                     int nz, const double* ys, int ny, const double* xs, int nx, float* out) {
    int64_t voxel;
    int iz, iy, ix;
    if (!this_voxel(nz, ny, nx, voxel, iz, iy, ix)) return;
    const int v = blockIdx.y;
    out[v * (static_cast<int64_t>(nz) * ny * nx) + voxel] = voxel_normalisation(s, e, dirs + 3ll * n_dirs * v, n_dirs, xs[ix], ys[iy], zs[iz]);
}

}  // namespace

void acceptance(const RingScanner& s, const AcceptanceCell* cells, const double* cos_sin, int n_views, int n_quad,
                double omega_max, const double* zs, int nz, const double* ys, int ny, const double* xs, int nx,
                float* out) {
    acceptance_kernel<<<view_grid(n_views, nz, ny, nx), kThreads>>>(s, cells, cos_sin, n_quad, omega_max, zs, nz, ys,
                                                                    ny, xs, nx, out);
    DP_CUDA_CHECK_LAUNCH("acceptance_kernel");
    DP_CUDA_CHECK(cudaDeviceSynchronize());
}

void normalisation(const RingScanner& s, const Efficiencies& e, const double* dirs, int n_views, int n_dirs,
                   const double* zs, int nz, const double* ys, int ny, const double* xs, int nx, float* out) {
    normalisation_kernel<<<view_grid(n_views, nz, ny, nx), kThreads>>>(s, e, dirs, n_dirs, zs, nz, ys, ny, xs, nx,
                                                                       out);
    DP_CUDA_CHECK_LAUNCH("normalisation_kernel");
    DP_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace dp::direct::corrections::gpu
