// The pairwise priors on the CPU: one OpenMP pass over the image, each voxel's sums from
// pair_prior.hpp (the CUDA backend runs the same per-voxel code, prior_cuda.cu).
#include <omp.h>

#include <string>

#include "../common/cpu_dispatch.hpp"
#include "../common/errors.hpp"
#include "pair_prior.hpp"

namespace dp::recon {

namespace {

// One row of voxels (runtime-dispatched: the loop vectorises with the CPU's widest ISA).
template <int Kind, bool HasKappa, int Want>
DP_CPU_CLONES void prior_row(const float* x, const float* kappa, const NeighbourWeights& W, const PriorShape& P,
                             int iz, int iy, float* out, bool accumulate) {
    for (int ix = 0; ix < P.nx; ++ix) prior_voxel<Kind, HasKappa, Want>(x, kappa, W, P, iz, iy, ix, out, accumulate);
}

struct CpuPass {
    const float* x;
    const float* kappa;
    const NeighbourWeights& W;
    const PriorShape& P;
    bool accumulate;
    int threads;

    template <int Kind, bool HasKappa, int Want>
    void operator()(float* out) const {
        // rows of voxels as the unit of work: a row's neighbours are three rows above and below,
        // which stay in the cache while the row is swept
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
        for (int iz = 0; iz < P.nz; ++iz)
            for (int iy = 0; iy < P.ny; ++iy) prior_row<Kind, HasKappa, Want>(x, kappa, W, P, iz, iy, out, accumulate);
    }
};

}  // namespace

void pair_prior_cpu(int kind, const float* x, const float* kappa, const NeighbourWeights& W, const PriorShape& P,
                    float* grad, bool accumulate, float* hess, float* value, int threads) {
    CpuPass pass{x, kappa, W, P, accumulate, threads > 0 ? threads : omp_get_max_threads()};
    if (!dispatch_prior(kind, kappa != nullptr, pass, grad, hess, value))
        throw ValueError("kind: expected 0 (RDP), 1 (quadratic) or 2 (log-cosh), got " + std::to_string(kind));
}

}  // namespace dp::recon
