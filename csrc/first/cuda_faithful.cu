// FIRST Super-LOR projectors on the GPU: the paper's texture design (faithful), the baseline of the
// defaults in cuda_fast.cu (launches around tube.hpp; the resident model and the dispatch in cuda_model.cu).
//
// faithful  forward: (1) the image resampled once per angle on the LOR lattice with the footprint
//           weights (the fast path's resampling, below), copied into a 3D array; (2) one thread per
//           LOR (a warp = 32 radial bins of one row pair, so the Super-LOR is warp-uniform), the
//           lattice read through a 3D texture with hardware trilinear filtering (the in-plane
//           coordinates land on texel centres, so the filter interpolates the slices) and the
//           Super-LOR table through a layered texture; each lane fetches one table entry per 32
//           samples and the warp shares them with shuffles (the paper fetched one per sample and
//           thread; the values are identical). The paper read the image itself at the rotated sample
//           points; reading it through the footprint first keeps every voxel's projected total
//           independent of the angle (tube.hpp).
//           back: one thread per voxel; the sinogram (and the factors, for the sensitivity image in
//           the same pass) as a layered texture, one layer per angle and ring difference (radial x
//           axial, hardware bilinear filtering); the tube values from a shared-memory copy of the
//           Super-LOR tables, ring differences grouped by Super-LOR; reads whose footprint lies
//           outside a ring difference's LORs (which would return 0) skipped. Without the
//           sensitivity and for the paper's 5 x 3 tube a texel holds the ratios of two neighbouring
//           radial bins, so one read serves two of a voxel's radial offsets (their coordinates differ
//           by exactly one bin): 9 reads per ring difference instead of 15.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_internal.cuh"

namespace dp::first::gpu {

namespace detail {

namespace {

// --- faithful -------------------------------------------------------------------------------------
// `lattice`: the chunk's resampled lattice as a 3D texture, x = row' (rho + j + J), y = slice,
// z = q n + i (the layout of resample_kernel's output).
__global__ void __launch_bounds__(256, 4)
faithful_forward_kernel(const Dims D, const AngleChunk A, cudaTextureObject_t lattice, cudaTextureObject_t table,
                        const int* __restrict__ super_of_delta, const unsigned char* __restrict__ flip_k,
                        const float* __restrict__ slope, float* __restrict__ sino) {
    const int lane = threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;       // (r1, r2): uniform per warp
    if (row >= D.n_rows * D.n_rows) return;
    const int q = blockIdx.z;
    const int r1 = row / D.n_rows, r2 = row % D.n_rows;
    const int rho = blockIdx.x * 32 + lane;                       // lanes past n run along (border reads 0)
    const int d = r2 - r1 + D.n_rows - 1;
    const int S = super_of_delta[d];
    const bool flip = flip_k[d] != 0;
    const float sl = slope[d], c = D.centre();
    const int nk = D.n_k(), per_i = D.n_j() * nk, total = D.n * per_i;
    const float kc = static_cast<float>(r1 + r2);
    float acc = 0.0f, my_p = 0.0f;
    int ctr = 0;
    for (int i = 0; i < D.n; ++i) {
        const float u = (static_cast<float>(i) - c) * sl;
        const float tz = static_cast<float>(q * D.n + i) + 0.5f;
        for (int jj = 0; jj < D.n_j(); ++jj) {
            const float tx = static_cast<float>(rho + jj) + 0.5f;
            for (int kk = 0; kk < nk; ++kk, ++ctr) {
                if ((ctr & 31) == 0) {                            // next 32 table entries, one per lane
                    const int e = ctr + lane;
                    if (e < total) {
                        const int ie = e / per_i, je = e % per_i / nk, ke = e % nk;
                        const int kt = flip ? nk - 1 - ke : ke;
                        my_p = tex2DLayered<float>(table, je * nk + kt + 0.5f, ie + 0.5f, S);
                    }
                }
                const float p = __shfl_sync(0xffffffffu, my_p, ctr & 31);
                const float fz = kc + static_cast<float>(kk - D.K) + u;
                acc += p * tex3D<float>(lattice, tx, fz + 0.5f, tz);
            }
        }
    }
    if (rho < D.n) sino[sino_index(D, A.first + q, r1, r2, rho)] = acc;
}

// Layer (angle q, ring difference d) of the corrections texture at [m][rho]: the ratio, or
// (ratio, factor) when the sensitivity is wanted in the same pass.
__device__ __forceinline__ void store_layer(float* out, float r, float) { *out = r; }
__device__ __forceinline__ void store_layer(float2* out, float r, float f) { *out = make_float2(r, f); }

// Texel idx of the staged layers (the chunk's angles x ring differences, n_rows rows of `width` texels
// each): sets *x to its column and returns the sinogram offset of its LOR row (bin 0), or -1 for a row
// beyond its ring difference's LORs (staged as zeros).
__device__ __forceinline__ int64_t staged_row(const Dims& D, const AngleChunk& A, int64_t idx, int width, int* x) {
    const int64_t per_layer = static_cast<int64_t>(D.n_rows) * width;
    const int layer = static_cast<int>(idx / per_layer);
    const int m = static_cast<int>(idx % per_layer / width);
    *x = static_cast<int>(idx % width);
    const int q = layer / D.n_deltas(), d = layer % D.n_deltas();
    const int delta = d - (D.n_rows - 1);
    if (m >= D.n_rows - (delta < 0 ? -delta : delta)) return -1;
    const RowPair rp = row_pair(delta, m);
    return sino_index(D, A.first + q, rp.r1, rp.r2, 0);
}

template <typename T>
__global__ void stage_corrections_kernel(const Dims D, const AngleChunk A, const float* __restrict__ sino,
                                         const float* __restrict__ factors, T* __restrict__ layers) {
    const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<int64_t>(D.n_rows) * D.n * D.n_deltas() * A.n) return;
    int rho;
    const int64_t row = staged_row(D, A, idx, D.n, &rho);
    float r = 0.0f, f = 0.0f;
    if (row >= 0) {
        r = sino[row + rho];
        f = factors ? factors[row + rho] : 1.0f;
    }
    store_layer(layers + idx, r, f);
}

// Hardware-interpolated sinogram reads: (ratio, factor) from a float2 layered texture, or the
// ratio alone from a float one (half the texel bytes when no sensitivity is wanted).
template <bool kSens>
struct TexCorr {
    static constexpr bool kPairs = false;
    cudaTextureObject_t t;
    int layer0;
    __device__ void operator()(int d, float rho_f, float m_f, float* ratio, float* factor) const {
        if constexpr (kSens) {
            const float2 v = tex2DLayered<float2>(t, rho_f + 0.5f, m_f + 0.5f, layer0 + d);
            *ratio = v.x;
            *factor = v.y;
        } else {
            *ratio = tex2DLayered<float>(t, rho_f + 0.5f, m_f + 0.5f, layer0 + d);
            *factor = 0.0f;
        }
    }
};

// Without the sensitivity, for the paper's tube: texels of the ratios of two neighbouring bins,
// texel X = (ratio of bin X - 1, ratio of bin X) for X in [0, n] (bins -1 and n are zero). One hardware
// bilinear read at rho_f + 1 then interpolates bins rho_f and rho_f + 1 with the same weights: the
// reads of two radial offsets j of a voxel, whose coordinates differ by exactly one bin. (Texels of
// (ratio, factor) pairs for the sensitivity, float4, measured 1.55x slower than one float2 read per
// offset on an H100: RESULTS 14u.)
__global__ void stage_ratio_pairs_kernel(const Dims D, const AngleChunk A, const float* __restrict__ sino,
                                         float2* __restrict__ layers) {
    const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int w = D.n + 1;
    if (idx >= static_cast<int64_t>(D.n_rows) * w * D.n_deltas() * A.n) return;
    int X;
    const int64_t row = staged_row(D, A, idx, w, &X);
    float r[2] = {0.0f, 0.0f};
    if (row >= 0)
        for (int b = 0; b < 2; ++b) {
            const int rho = X - 1 + b;
            if (rho >= 0 && rho < D.n) r[b] = sino[row + rho];
        }
    layers[idx] = make_float2(r[0], r[1]);
}

struct TexRatioPairs {
    static constexpr bool kPairs = true;
    cudaTextureObject_t t;
    int layer0;
    __device__ void pair(int d, float rho_f, float m_f, float* r0, float* f0, float* r1, float* f1) const {
        const float2 v = tex2DLayered<float2>(t, rho_f + 1.5f, m_f + 0.5f, layer0 + d);
        *r0 = v.x, *r1 = v.y, *f0 = 0.0f, *f1 = 0.0f;
    }
    // One offset: the same read, its first bin.
    __device__ void operator()(int d, float rho_f, float m_f, float* ratio, float* factor) const {
        float unused_r, unused_f;
        pair(d, rho_f, m_f, ratio, factor, &unused_r, &unused_f);
    }
};

// Tube values through the texture unit (linear in i): used when the tables do not fit shared memory.
struct TexProb {
    cudaTextureObject_t t;
    int nk;
    __device__ float operator()(int S, float i_f, int jj, int kk) const {
        return tex2DLayered<float>(t, jj * nk + kk + 0.5f, i_f + 0.5f, S);
    }
};

constexpr int kFaithfulBackThreads = 256;   // 32 x 8 voxels; 3 blocks (and table copies) per SM

// NJ, NK > 0 (the paper's 5 x 3 tube, known at compile time): the tube values are kept in registers
// per group (tube.hpp voxel_back_faithful); without the sensitivity the ratios are read from paired
// texels, two radial offsets per hardware bilinear read (TexRatioPairs). With the sensitivity, and for
// other tubes (NJ = NK = 0), one offset per read.
// kSmemTable: the tube values are read from a shared-memory copy of the Super-LOR tables (linear in
// i, exact float) rather than through the texture unit, which the sinogram reads keep busy: for the
// paper's tube once per (group, j, k), for other tubes per (ring difference, j, k). Tables larger than
// half the shared memory fall back to the table texture.
template <bool kSens, bool kSmemTable, int NJ, int NK>
__global__ void __launch_bounds__(kFaithfulBackThreads, 3)
faithful_back_kernel(const Dims D, const AngleChunk A, cudaTextureObject_t corr, cudaTextureObject_t table_tex,
                     const float* __restrict__ table, const __grid_constant__ DeltaGroups groups,
                     const float* __restrict__ slope, float* __restrict__ image, float* __restrict__ sens,
                     bool accumulate) {
    extern __shared__ float table_s[];
    if constexpr (kSmemTable) {
        const int64_t table_size = static_cast<int64_t>(D.n_super) * D.n * D.n_j() * D.n_k();
        const int tid = threadIdx.y * blockDim.x + threadIdx.x;
        for (int64_t k = tid; k < table_size; k += blockDim.x * blockDim.y) table_s[k] = __ldg(table + k);
        __syncthreads();
    }
    const int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
    const int iz = blockIdx.z;
    if (ix >= D.n || iy >= D.n) return;
    float c_acc = 0.0f, s_acc = 0.0f;
    using Prob = typename std::conditional<kSmemTable, TableLerp, TexProb>::type;
    Prob prob;
    if constexpr (kSmemTable)
        prob = TableLerp{table_s, D.n, D.n_j(), D.n_k()};
    else
        prob = TexProb{table_tex, D.n_k()};
    using Corr = typename std::conditional<(NJ > 0 && !kSens), TexRatioPairs, TexCorr<kSens>>::type;
    for (int q = 0; q < A.n; ++q)
        voxel_back_faithful<NJ, NK>(D, groups, slope, ix, iy, iz, A.c[q], A.s[q], Corr{corr, q * D.n_deltas()}, prob,
                                    &c_acc, &s_acc);
    const int64_t v = (static_cast<int64_t>(iz) * D.n + iy) * D.n + ix;
    image[v] = accumulate ? image[v] + c_acc : c_acc;
    if (kSens) sens[v] = accumulate ? sens[v] + s_acc : s_acc;
}

}  // namespace

void allow_faithful_kernels_smem(int max_smem) {
    for (const void* kernel : {reinterpret_cast<const void*>(faithful_back_kernel<true, true, 2 * kPaperJ + 1, 2 * kPaperK + 1>),
                               reinterpret_cast<const void*>(faithful_back_kernel<true, false, 2 * kPaperJ + 1, 2 * kPaperK + 1>),
                               reinterpret_cast<const void*>(faithful_back_kernel<false, true, 2 * kPaperJ + 1, 2 * kPaperK + 1>),
                               reinterpret_cast<const void*>(faithful_back_kernel<false, false, 2 * kPaperJ + 1, 2 * kPaperK + 1>),
                               reinterpret_cast<const void*>(faithful_back_kernel<true, true, 0, 0>),
                               reinterpret_cast<const void*>(faithful_back_kernel<true, false, 0, 0>),
                               reinterpret_cast<const void*>(faithful_back_kernel<false, true, 0, 0>),
                               reinterpret_cast<const void*>(faithful_back_kernel<false, false, 0, 0>)})
        DP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
}

void forward_faithful(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s) {
    const Dims& D = m.host.D;
    const dim3 lor_block(32, 8);
    if (!m.faithful_forward_unsupported.empty()) throw ValueError("method: " + m.faithful_forward_unsupported);
    const int chunk = std::min<int>(m.faithful_forward_chunk, static_cast<int>(angles.index.size()));
    float* L = m.lattice_for(chunk, D.nz);
    if (!m.lattice_tex.ready())
        m.lattice_tex.create(m.pitch, D.nz, m.faithful_forward_chunk * D.n, false, 1);
    for_each_chunk(angles, m.faithful_forward_chunk, [&](const AngleChunk& ch) {
        resample(m, ch, image, L, s);
        m.lattice_tex.copy_from(L, true, s, ch.n * D.n);
        const dim3 grid(div_up(D.n, 32), div_up(static_cast<int64_t>(D.n_rows) * D.n_rows, 8), ch.n);
        faithful_forward_kernel<<<grid, lor_block, 0, s>>>(D, ch, m.lattice_tex.tex(), m.table.tex(),
                                                           m.super_of_delta.as<int>(), m.flip_k.as<unsigned char>(),
                                                           m.slope.as<float>(), sino);
        DP_CUDA_CHECK_LAUNCH("faithful_forward_kernel");
    });
}

}  // namespace detail

using namespace detail;

void back_faithful(DeviceModel& model, const AngleList& angles, const float* sino, const float* factors, float* image,
                   float* sens, void* stream) {
    auto& m = model.impl();
    const Dims& D = m.host.D;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const bool with_sens = sens != nullptr;
    const int chunk = std::min<int>(m.faithful_chunk, static_cast<int>(angles.index.size()));
    const int n_layers = chunk * D.n_deltas();
    // Texels of (ratio, factor) with the sensitivity, of the ratio alone without; without the
    // sensitivity and for the paper's 5 x 3 tube, of the ratios of two neighbouring bins
    // (stage_ratio_pairs_kernel: n + 1 texels a row).
    const bool paper_tube = D.J == kPaperJ && D.K == kPaperK;
    const bool pairs = paper_tube && !with_sens;
    const int width = pairs ? D.n + 1 : D.n;
    const int channels = with_sens || pairs ? 2 : 1;
    const size_t stage_bytes = static_cast<size_t>(n_layers) * D.n_rows * width * channels * sizeof(float);
    TextureArray& corr = m.corrections[with_sens ? 1 : 0];
    if (!corr.ready() || corr.bytes() < stage_bytes) corr.create(width, D.n_rows, n_layers, true, channels);
    m.layers.reserve(stage_bytes);
    const bool smem_table = m.host.table.size() * sizeof(float) <= static_cast<size_t>(m.max_smem) / 2;
    const size_t smem = smem_table ? m.host.table.size() * sizeof(float) : 0;
    const DeltaGroups groups{m.delta_order.as<int>(), m.group_start.as<int>(), m.group_super.as<int>(),
                             m.group_flip.as<unsigned char>(), static_cast<int>(m.host.group_super.size())};
    auto launch = [&](auto sens_tag, auto smem_tag, const AngleChunk& ch, const dim3& grid, const dim3& block) {
        constexpr bool kS = decltype(sens_tag)::value, kT = decltype(smem_tag)::value;
        auto run = [&](auto kernel) {
            kernel<<<grid, block, smem, s>>>(D, ch, corr.tex(), m.table.tex(), m.table_linear.as<float>(), groups,
                                             m.slope.as<float>(), image, sens, ch.first > 0);
        };
        if (paper_tube)
            run(faithful_back_kernel<kS, kT, 2 * kPaperJ + 1, 2 * kPaperK + 1>);
        else
            run(faithful_back_kernel<kS, kT, 0, 0>);
    };
    for_each_chunk(angles, m.faithful_chunk, [&](const AngleChunk& ch) {
        const int64_t n = static_cast<int64_t>(ch.n) * D.n_deltas() * D.n_rows * width;
        if (pairs)
            stage_ratio_pairs_kernel<<<div_up(n, 256), 256, 0, s>>>(D, ch, sino, m.layers.as<float2>());
        else if (with_sens)
            stage_corrections_kernel<<<div_up(n, 256), 256, 0, s>>>(D, ch, sino, factors, m.layers.as<float2>());
        else
            stage_corrections_kernel<<<div_up(n, 256), 256, 0, s>>>(D, ch, sino, factors, m.layers.as<float>());
        DP_CUDA_CHECK_LAUNCH(pairs ? "stage_ratio_pairs_kernel" : "stage_corrections_kernel");
        corr.copy_from(m.layers.get(), true, s, ch.n * D.n_deltas());
        const dim3 block(32, kFaithfulBackThreads / 32);
        const dim3 grid(div_up(D.n, 32), div_up(D.n, block.y), D.nz);
        using T = std::true_type;
        using F = std::false_type;
        if (with_sens && smem_table) launch(T{}, T{}, ch, grid, block);
        else if (with_sens) launch(T{}, F{}, ch, grid, block);
        else if (smem_table) launch(F{}, T{}, ch, grid, block);
        else launch(F{}, F{}, ch, grid, block);
        DP_CUDA_CHECK_LAUNCH("faithful_back_kernel");
    });
}


}  // namespace dp::first::gpu
