// Dual-head analytic response on the GPU: a launch around lor_voxel_response (response.hpp).
//
// One thread per query, grid-stride. A query is n_v^3 n_a^2 direction nodes (128 by default) of
// register-only double-precision work (two photon walks through the crystal lattice, sqrt, exp,
// expm1), so the kernel is FP64-compute bound; it reads 16 bytes and writes 8 per query. Queries of
// one class and plane are adjacent in the patch builder's batches, so a warp's threads have similar
// work. Host arrays are copied in launches of at most kMaxBatch queries (< 100 MB of device memory).
#include <algorithm>
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "response_api.hpp"

namespace dp::dualhead::gpu {
namespace {

constexpr int kBlock = 128;
constexpr int64_t kMaxBatch = int64_t(1) << 22;

__global__ void __launch_bounds__(kBlock)
response_kernel(const __grid_constant__ ResponseParams P, const Query* __restrict__ queries, int64_t n,
                double* __restrict__ out) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = lor_voxel_response(P, queries[i]);
}

}  // namespace

void evaluate(const ResponseParams& P, const Query* queries, int64_t n, double* out) {
    require(n >= 0, "queries: expected a non-negative count");
    if (n == 0) return;
    const int64_t batch = std::min(n, kMaxBatch);
    cuda::DeviceBuffer dq(size_t(batch) * sizeof(Query)), dout(size_t(batch) * sizeof(double));
    for (int64_t first = 0; first < n; first += batch) {
        const int64_t m = std::min(batch, n - first);
        dq.upload(queries + first, size_t(m) * sizeof(Query));
        const unsigned blocks = static_cast<unsigned>((m + kBlock - 1) / kBlock);
        response_kernel<<<blocks, kBlock>>>(P, dq.as<Query>(), m, dout.as<double>());
        DP_CUDA_CHECK_LAUNCH("dualhead response_kernel");
        dout.download(out + first, size_t(m) * sizeof(double));  // synchronous: also surfaces kernel errors
    }
}

}  // namespace dp::dualhead::gpu
