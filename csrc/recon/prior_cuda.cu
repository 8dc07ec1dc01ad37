// The pairwise priors on the GPU: one thread per voxel (a block per row segment, x along the
// threads), each voxel's sums from pair_prior.hpp, the same per-voxel code as the CPU backend. The
// 27 neighbour weights travel as a kernel parameter (constant bank): every thread reads them, none
// loads them from memory. The 27 image values a thread reads are shared with its neighbours' threads
// through L1 / L2; the kernel is bound by the pair arithmetic (benchmarks/RESULTS.md §10).
#include <cuda_runtime.h>

#include <string>

#include "../common/cuda_check.cuh"
#include "../common/errors.hpp"
#include "pair_prior.hpp"

namespace dp::recon {

namespace {

template <int Kind, bool HasKappa, int Want>
__global__ void pair_prior_kernel(const float* __restrict__ x, const float* __restrict__ kappa,
                                  const NeighbourWeights W, const PriorShape P, float* out, bool accumulate) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    if (ix >= P.nx) return;
    prior_voxel<Kind, HasKappa, Want, int>(x, kappa, W, P, blockIdx.z, blockIdx.y, ix, out, accumulate);
}

struct CudaLaunch {
    const float* x;
    const float* kappa;
    const NeighbourWeights& W;
    const PriorShape& P;
    bool accumulate;
    cudaStream_t stream;

    template <int Kind, bool HasKappa, int Want>
    void operator()(float* out) const {
        const int threads = P.nx >= 256 ? 256 : 32 * ((P.nx + 31) / 32);
        const dim3 blocks((P.nx + threads - 1) / threads, P.ny, P.nz);
        pair_prior_kernel<Kind, HasKappa, Want><<<blocks, threads, 0, stream>>>(x, kappa, W, P, out, accumulate);
        DP_CUDA_CHECK_LAUNCH("pair_prior_kernel");
    }
};

}  // namespace

void pair_prior_cuda(int kind, const float* x, const float* kappa, const NeighbourWeights& W, const PriorShape& P,
                     float* grad, bool accumulate, float* hess, float* value, void* stream) {
    // grid y and z carry the rows and slices (at most 65535 each); 32-bit voxel indices
    const long long n = static_cast<long long>(P.nz) * P.ny * P.nx;
    if (P.ny > 65535 || P.nz > 65535 || n >= (1LL << 31))
        throw ValueError("x: the GPU prior takes images below 2^31 voxels with at most 65535 rows and slices, got (" +
                         std::to_string(P.nz) + ", " + std::to_string(P.ny) + ", " + std::to_string(P.nx) + ")");
    CudaLaunch launch{x, kappa, W, P, accumulate, static_cast<cudaStream_t>(stream)};
    if (!dispatch_prior(kind, kappa != nullptr, launch, grad, hess, value))
        throw ValueError("kind: expected 0 (RDP), 1 (quadratic) or 2 (log-cosh), got " + std::to_string(kind));
}

}  // namespace dp::recon
