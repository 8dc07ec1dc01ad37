// Dual-head projectors on the GPU: the paper's algorithms 1-3, the baselines of the default pair
// (cuda_default.cu). Every method computes y[lor] = sum_p sum_taps w * image[v_z, v_y, p] with the
// addressing of layout.hpp (tap_voxel), and its exact transpose.
//
// alg1  one 128-thread block per LOR, thread i = plane i (planes past 128 loop), each thread sums its
//       plane's patch reading the image from global memory, thread 0 adds the 128 partial sums
//       serially; no symmetry reuse. Back: the same blocks scatter w * y with atomicAdd.
// alg2  one block per shift position of a class serving its (up to 4) sign-symmetric LORs with the
//       same taps (mirrored), image reads through the read-only path (__ldg); the 128 x 4 partial
//       sums go to global memory and a second kernel adds them. Back: atomicAdd scatter.
// alg3  alg2 with the partial sums in shared memory (128 x 4) and a parallel tree reduction, the
//       skip values (forward) or LOR values (back) of the 4 LORs staged in shared memory by threads
//       0/32/64/96, the zero skip (LORs with skip 0, or back-projected values 0, cost nothing), all
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_internal.cuh"

namespace dp::dualhead::gpu::detail {

namespace {

// --- the paper's algorithms ----------------------------------------------------------------------------
struct LorAt {
    int e, k, s, i, j;
    int64_t index;   // in y
};

// alg1: block b of the launch is the b-th LOR of its classes' concatenated blocks
__device__ __forceinline__ LorAt alg1_lor(const AlgLaunch& P, int64_t b) {
    LorAt a;
    a.e = find_entry(P.first, P.n_entries, static_cast<long long>(b));
    a.k = P.k[a.e];
    const ClassInfo c = class_info(P.L, a.k);
    const int64_t local = b - P.first[a.e];
    const int npos = c.pos_y * c.pos_z;
    a.s = static_cast<int>(local / npos);
    const int f = static_cast<int>(local - int64_t(a.s) * npos);
    a.i = f / c.pos_z;
    a.j = f - a.i * c.pos_z;
    a.index = P.out[a.e] + local;
    return a;
}

// Voxel (flat image index) of tap (dy, dz) at plane p for the LOR with upper crystal cu and signs s.
__device__ __forceinline__ int64_t alg_voxel(const Layout& L, int cuy, int cuz, int s_y, int s_z, const DTap& t, int p) {
    return L.voxel_index(tap_voxel(L.D, cuz, s_z, t.dz), tap_voxel(L.D, cuy, s_y, t.dy), p);
}

__global__ void __launch_bounds__(kAlgThreads)
alg1_forward_kernel(const __grid_constant__ AlgLaunch P, const float* __restrict__ image, const DTap* __restrict__ taps,
                    const int64_t* __restrict__ row_start, const float* __restrict__ skip, float* __restrict__ y) {
    __shared__ float part[kAlgThreads];
    const LorAt a = alg1_lor(P, blockIdx.x);
    const int tid = threadIdx.x;
    if (skip != nullptr && skip[a.index] == 0.0f) {
        if (tid == 0) y[a.index] = 0.0f;
        return;
    }
    const ClassInfo c = class_info(P.L, a.k);
    int s_y, s_z, cuy, cuz;
    class_sign(c, a.s, s_y, s_z);
    upper_crystal(c, s_y, s_z, a.i, a.j, cuy, cuz);
    float sum = 0.0f;
    for (int p = tid; p < P.L.n_planes; p += kAlgThreads) {
        const int64_t row = int64_t(a.k) * P.L.n_planes + p;
        for (int64_t t = row_start[row]; t < row_start[row + 1]; ++t) {
            const DTap tp = taps[t];
            sum += tp.w * image[alg_voxel(P.L, cuy, cuz, s_y, s_z, tp, p)];
        }
    }
    part[tid] = sum;
    __syncthreads();
    if (tid == 0) {
        float total = 0.0f;
        for (int q = 0; q < kAlgThreads; ++q) total += part[q];
        y[a.index] = total;
    }
}

__global__ void __launch_bounds__(kAlgThreads)
alg1_back_kernel(const __grid_constant__ AlgLaunch P, const float* __restrict__ y, const DTap* __restrict__ taps,
                 const int64_t* __restrict__ row_start, float* __restrict__ image) {
    const LorAt a = alg1_lor(P, blockIdx.x);
    const ClassInfo c = class_info(P.L, a.k);
    int s_y, s_z, cuy, cuz;
    class_sign(c, a.s, s_y, s_z);
    upper_crystal(c, s_y, s_z, a.i, a.j, cuy, cuz);
    const float v = y[a.index];
    for (int p = threadIdx.x; p < P.L.n_planes; p += kAlgThreads) {
        const int64_t row = int64_t(a.k) * P.L.n_planes + p;
        for (int64_t t = row_start[row]; t < row_start[row + 1]; ++t) {
            const DTap tp = taps[t];
            atomicAdd(image + alg_voxel(P.L, cuy, cuz, s_y, s_z, tp, p), tp.w * v);
        }
    }
}

// alg2 / alg3: block q of the launch is the q-th shift position of its classes; its LORs are the
// class's signs at that position.
struct PosAt {
    int e, k, i, j, n_signs, npos;
    int cuy[4], cuz[4], s_y[4], s_z[4];
    int64_t index0;   // y index of sign 0 (sign m: index0 + m * npos)
};

__device__ __forceinline__ PosAt position_at(const AlgLaunch& P, int64_t q) {
    PosAt a;
    a.e = find_entry(P.first, P.n_entries, static_cast<long long>(q));
    a.k = P.k[a.e];
    const ClassInfo c = class_info(P.L, a.k);
    const int f = static_cast<int>(q - P.first[a.e]);
    a.i = f / c.pos_z;
    a.j = f - a.i * c.pos_z;
    a.n_signs = c.n_signs;
    a.npos = c.pos_y * c.pos_z;
    a.index0 = P.out[a.e] + f;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        class_sign(c, m < c.n_signs ? m : 0, a.s_y[m], a.s_z[m]);
        upper_crystal(c, a.s_y[m], a.s_z[m], a.i, a.j, a.cuy[m], a.cuz[m]);
    }
    return a;
}

__global__ void __launch_bounds__(kAlgThreads)
alg2_partial_kernel(const __grid_constant__ AlgLaunch P, long long q0, const float* __restrict__ image,
                    const DTap* __restrict__ taps, const int64_t* __restrict__ row_start, float* __restrict__ partial) {
    const PosAt a = position_at(P, q0 + blockIdx.x);
    const int tid = threadIdx.x;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int p = tid; p < P.L.n_planes; p += kAlgThreads) {
        const int64_t row = int64_t(a.k) * P.L.n_planes + p;
        for (int64_t t = row_start[row]; t < row_start[row + 1]; ++t) {
            const DTap tp = taps[t];   // one read of the taps serves the 4 symmetric LORs
#pragma unroll
            for (int m = 0; m < 4; ++m)
                if (m < a.n_signs)
                    s[m] += tp.w * __ldg(image + alg_voxel(P.L, a.cuy[m], a.cuz[m], a.s_y[m], a.s_z[m], tp, p));
        }
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) partial[(int64_t(blockIdx.x) * 4 + m) * kAlgThreads + tid] = s[m];
}

__global__ void __launch_bounds__(256)
alg2_sum_kernel(const __grid_constant__ AlgLaunch P, long long q0, int nq, const float* __restrict__ partial,
                const float* __restrict__ skip, float* __restrict__ y) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= nq * 4) return;
    const int qq = idx >> 2, m = idx & 3;
    const long long q = q0 + qq;
    const int e = find_entry(P.first, P.n_entries, q);
    const ClassInfo c = class_info(P.L, P.k[e]);
    if (m >= c.n_signs) return;
    const int64_t o = P.out[e] + int64_t(m) * c.pos_y * c.pos_z + (q - P.first[e]);
    const float* part = partial + int64_t(idx) * kAlgThreads;
    float total = 0.0f;
    for (int t = 0; t < kAlgThreads; ++t) total += part[t];
    y[o] = (skip != nullptr && skip[o] == 0.0f) ? 0.0f : total;
}

__global__ void __launch_bounds__(kAlgThreads)
alg2_back_kernel(const __grid_constant__ AlgLaunch P, const float* __restrict__ y, const DTap* __restrict__ taps,
                 const int64_t* __restrict__ row_start, float* __restrict__ image) {
    const PosAt a = position_at(P, blockIdx.x);
    float v[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) v[m] = m < a.n_signs ? __ldg(y + a.index0 + int64_t(m) * a.npos) : 0.0f;
    for (int p = threadIdx.x; p < P.L.n_planes; p += kAlgThreads) {
        const int64_t row = int64_t(a.k) * P.L.n_planes + p;
        for (int64_t t = row_start[row]; t < row_start[row + 1]; ++t) {
            const DTap tp = taps[t];
#pragma unroll
            for (int m = 0; m < 4; ++m)
                if (m < a.n_signs)
                    atomicAdd(image + alg_voxel(P.L, a.cuy[m], a.cuz[m], a.s_y[m], a.s_z[m], tp, p), tp.w * v[m]);
        }
    }
}

__global__ void __launch_bounds__(kAlgThreads)
alg3_forward_kernel(const __grid_constant__ AlgLaunch P, const float* __restrict__ image, const DTap* __restrict__ taps,
                    const int64_t* __restrict__ row_start, const float* __restrict__ skip, float* __restrict__ y) {
    __shared__ float part[4][kAlgThreads];
    __shared__ float counts[4];
    const PosAt a = position_at(P, blockIdx.x);
    const int tid = threadIdx.x, m_own = tid >> 5;
    if ((tid & 31) == 0)   // threads 0, 32, 64, 96 stage the 4 LORs' counts
        counts[m_own] = m_own < a.n_signs ? (skip ? skip[a.index0 + int64_t(m_own) * a.npos] : 1.0f) : 0.0f;
    __syncthreads();
    bool on[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) on[m] = counts[m] != 0.0f;
    if (!(on[0] || on[1] || on[2] || on[3])) {   // zero-count skip of the whole position
        if (tid < a.n_signs) y[a.index0 + int64_t(tid) * a.npos] = 0.0f;
        return;
    }
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int p = tid; p < P.L.n_planes; p += kAlgThreads) {
        const int64_t row = int64_t(a.k) * P.L.n_planes + p;
        for (int64_t t = row_start[row]; t < row_start[row + 1]; ++t) {
            const DTap tp = taps[t];
#pragma unroll
            for (int m = 0; m < 4; ++m)
                if (on[m]) s[m] += tp.w * __ldg(image + alg_voxel(P.L, a.cuy[m], a.cuz[m], a.s_y[m], a.s_z[m], tp, p));
        }
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) part[m][tid] = s[m];
    __syncthreads();
    for (int h = kAlgThreads / 2; h > 0; h >>= 1) {   // tree reduction, the 4 LORs side by side
        if (tid < h)
#pragma unroll
            for (int m = 0; m < 4; ++m) part[m][tid] += part[m][tid + h];
        __syncthreads();
    }
    if (tid < a.n_signs) y[a.index0 + int64_t(tid) * a.npos] = counts[tid] != 0.0f ? part[tid][0] : 0.0f;
}

__global__ void __launch_bounds__(kAlgThreads)
alg3_back_kernel(const __grid_constant__ AlgLaunch P, const float* __restrict__ y, const DTap* __restrict__ taps,
                 const int64_t* __restrict__ row_start, float* __restrict__ image) {
    __shared__ float ratio[4];
    const PosAt a = position_at(P, blockIdx.x);
    const int tid = threadIdx.x, m_own = tid >> 5;
    if ((tid & 31) == 0) ratio[m_own] = m_own < a.n_signs ? y[a.index0 + int64_t(m_own) * a.npos] : 0.0f;
    __syncthreads();
    float v[4];
    bool on[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        v[m] = ratio[m];
        on[m] = v[m] != 0.0f;   // a zero value adds nothing: skipped
    }
    if (!(on[0] || on[1] || on[2] || on[3])) return;
    for (int p = tid; p < P.L.n_planes; p += kAlgThreads) {
        const int64_t row = int64_t(a.k) * P.L.n_planes + p;
        for (int64_t t = row_start[row]; t < row_start[row + 1]; ++t) {
            const DTap tp = taps[t];
#pragma unroll
            for (int m = 0; m < 4; ++m)
                if (on[m]) atomicAdd(image + alg_voxel(P.L, a.cuy[m], a.cuz[m], a.s_y[m], a.s_z[m], tp, p), tp.w * v[m]);
        }
    }
}

}  // namespace

// AlgLaunch of entries [a0, a0 + n): first = LOR (per_lor) or shift-position prefix.
static AlgLaunch alg_launch(const Layout& L, const ClassList& C, int a0, int n, bool per_lor) {
    AlgLaunch P{};
    P.L = L;
    P.n_entries = n;
    long long total = 0;
    for (int q = 0; q < n; ++q) {
        const ClassInfo c = class_info(L, C.index[a0 + q]);
        P.k[q] = C.index[a0 + q];
        P.out[q] = C.offset[a0 + q];
        P.first[q] = total;
        total += per_lor ? c.n_lors() : int64_t(c.pos_y) * c.pos_z;
    }
    P.first[n] = total;
    if (total > 0x7fffffffLL) throw ValueError("classes: too many LORs in one launch");
    return P;
}

constexpr int64_t kAlg2Batch = 32768;   // positions per partial-sum pass (64 MB of partial sums)

void forward_alg(Method method, Impl& m, const ClassList& C, const float* image, const float* skip, float* y,
                 cudaStream_t s) {
    const DTap* taps = m.taps.as<DTap>();
    const int64_t* rs = m.row_start.as<int64_t>();
    for_each_entry_chunk(C, [&](int a0, int n) {
        const AlgLaunch P = alg_launch(m.L, C, a0, n, method == Method::Alg1);
        const long long total = P.first[n];
        if (method == Method::Alg1) {
            alg1_forward_kernel<<<static_cast<unsigned>(total), kAlgThreads, 0, s>>>(P, image, taps, rs, skip, y);
            DP_CUDA_CHECK_LAUNCH("alg1_forward_kernel");
        } else if (method == Method::Alg3) {
            alg3_forward_kernel<<<static_cast<unsigned>(total), kAlgThreads, 0, s>>>(P, image, taps, rs, skip, y);
            DP_CUDA_CHECK_LAUNCH("alg3_forward_kernel");
        } else {
            m.partial.reserve(size_t(kAlg2Batch) * 4 * kAlgThreads * sizeof(float));
            for (long long q0 = 0; q0 < total; q0 += kAlg2Batch) {
                const int nq = static_cast<int>(std::min<long long>(kAlg2Batch, total - q0));
                alg2_partial_kernel<<<nq, kAlgThreads, 0, s>>>(P, q0, image, taps, rs, m.partial.as<float>());
                DP_CUDA_CHECK_LAUNCH("alg2_partial_kernel");
                alg2_sum_kernel<<<div_up(int64_t(nq) * 4, 256), 256, 0, s>>>(P, q0, nq, m.partial.as<float>(), skip, y);
                DP_CUDA_CHECK_LAUNCH("alg2_sum_kernel");
            }
        }
    });
}

void back_alg(Method method, Impl& m, const ClassList& C, const float* y, float* image, cudaStream_t s) {
    DP_CUDA_CHECK(cudaMemsetAsync(image, 0, size_t(m.L.n_voxels()) * sizeof(float), s));
    const DTap* taps = m.taps.as<DTap>();
    const int64_t* rs = m.row_start.as<int64_t>();
    for_each_entry_chunk(C, [&](int a0, int n) {
        const AlgLaunch P = alg_launch(m.L, C, a0, n, method == Method::Alg1);
        const unsigned grid = static_cast<unsigned>(P.first[n]);
        if (method == Method::Alg1) alg1_back_kernel<<<grid, kAlgThreads, 0, s>>>(P, y, taps, rs, image);
        else if (method == Method::Alg2) alg2_back_kernel<<<grid, kAlgThreads, 0, s>>>(P, y, taps, rs, image);
        else alg3_back_kernel<<<grid, kAlgThreads, 0, s>>>(P, y, taps, rs, image);
        DP_CUDA_CHECK_LAUNCH("alg_back_kernel");
    });
}

}  // namespace dp::dualhead::gpu::detail
