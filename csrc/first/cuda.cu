// FIRST Super-LOR projectors on the GPU: launches around tube.hpp.
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
//           outside a ring difference's LORs (which would return 0) skipped.
// matched   forward: one thread per LOR, footprint reads in-plane and exact float linear
//           interpolation in z; back: one thread per voxel gathering the exact transpose (tube.hpp).
// fast      forward: (1) resample the image once per angle on the LOR lattice R[i][z][row]
//           (the footprint weights); (2) per angle, a block stages one along-plane R[i][*][*] at a time in
//           shared memory (cp.async, double buffered) and each warp accumulates up to 16 LORs of
//           one ring difference for 64 radial bins (2 per lane) in registers, sliding a window
//           of slices down the plane: 40 FMAs per 6 shared loads, the folded taps warp-uniform.
//           back: (1) per (angle, along sample i, 32 lattice rows) each thread owns one lattice
//           column G[i][*][row] in shared memory and adds every ring difference's LORs to it
//           (the sinogram rows staged per ring difference); (2) the transposed resampling
//           gathered per voxel.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "cuda.hpp"
#include "tube.hpp"

namespace dp::first::gpu {

namespace {

constexpr int kChunk = 32;          // angles per launch (kernel parameter block)
constexpr int kFastRows = 16;       // LOR rows (m) per warp in the fast forward
constexpr int kFastJ = 2, kFastK = 1;

struct AngleChunk {
    int n;       // angles in this chunk
    int first;   // local index (in the call's sinogram) of the chunk's first angle
    int a[kChunk];   // the angles' indices in the full sinogram (rows of the footprint tables)
    float c[kChunk];
    float s[kChunk];
};

template <typename F>
void for_each_chunk(const AngleList& A, int chunk, F&& f) {
    const int n_sel = static_cast<int>(A.index.size());
    for (int a0 = 0; a0 < n_sel; a0 += chunk) {
        AngleChunk ch{};
        ch.n = std::min(chunk, n_sel - a0);
        ch.first = a0;
        for (int q = 0; q < ch.n; ++q) {
            ch.a[q] = A.index[a0 + q];
            ch.c[q] = A.cos[a0 + q];
            ch.s[q] = A.sin[a0 + q];
        }
        f(ch);
    }
}

int div_up(int64_t a, int b) { return static_cast<int>((a + b - 1) / b); }

// --- texture-backed arrays ----------------------------------------------------------------------
class TextureArray {
public:
    TextureArray() = default;
    TextureArray(const TextureArray&) = delete;
    TextureArray& operator=(const TextureArray&) = delete;
    ~TextureArray() { release(); }

    // A 3D (layered = false) or 2D layered (layered = true) array of float or float2 with linear
    // filtering and zero outside (border addressing); coordinates are unnormalised.
    void create(int w, int h, int depth, bool layered, bool two_channels) {
        release();
        const cudaChannelFormatDesc desc = two_channels ? cudaCreateChannelDesc<float2>() : cudaCreateChannelDesc<float>();
        cudaArray_t array = nullptr;
        DP_CUDA_CHECK(cudaMalloc3DArray(&array, &desc, make_cudaExtent(w, h, depth), layered ? cudaArrayLayered : 0));
        cudaResourceDesc res{};
        res.resType = cudaResourceTypeArray;
        res.res.array.array = array;
        cudaTextureDesc tex{};
        for (int k = 0; k < 3; ++k) tex.addressMode[k] = cudaAddressModeBorder;
        tex.filterMode = cudaFilterModeLinear;
        tex.readMode = cudaReadModeElementType;
        tex.normalizedCoords = 0;
        cudaTextureObject_t object = 0;
        const cudaError_t err = cudaCreateTextureObject(&object, &res, &tex, nullptr);
        if (err != cudaSuccess) {
            cudaFreeArray(array);       // not ready(): the next call tries again
            DP_CUDA_CHECK(err);
        }
        array_ = array;
        tex_ = object;
        w_ = w, h_ = h, depth_ = depth;
        elem_ = two_channels ? 8 : 4;
    }
    void copy_from(const void* src, bool device, cudaStream_t stream, int depth) {
        cudaMemcpy3DParms p{};
        p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(src), static_cast<size_t>(w_) * elem_, w_, h_);
        p.dstArray = array_;
        p.extent = make_cudaExtent(w_, h_, depth);
        p.kind = device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
        DP_CUDA_CHECK(cudaMemcpy3DAsync(&p, stream));
    }
    cudaTextureObject_t tex() const { return tex_; }
    bool ready() const { return array_ != nullptr && tex_ != 0; }
    size_t bytes() const { return array_ ? static_cast<size_t>(w_) * h_ * depth_ * elem_ : 0; }

private:
    void release() {
        if (tex_) cudaDestroyTextureObject(tex_);
        if (array_) cudaFreeArray(array_);
        tex_ = 0;
        array_ = nullptr;
    }
    cudaArray_t array_ = nullptr;
    cudaTextureObject_t tex_ = 0;
    int w_ = 0, h_ = 0, depth_ = 0, elem_ = 4;
};

template <typename T>
cuda::DeviceBuffer upload(const std::vector<T>& v) {
    cuda::DeviceBuffer b(std::max<size_t>(1, v.size() * sizeof(T)));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
    return b;
}

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

template <typename T>
__global__ void stage_corrections_kernel(const Dims D, const AngleChunk A, const float* __restrict__ sino,
                                         const float* __restrict__ factors, T* __restrict__ layers) {
    const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t per_layer = static_cast<int64_t>(D.n_rows) * D.n;
    if (idx >= per_layer * D.n_deltas() * A.n) return;
    const int layer = static_cast<int>(idx / per_layer);
    const int m = static_cast<int>(idx % per_layer / D.n), rho = static_cast<int>(idx % D.n);
    const int q = layer / D.n_deltas(), d = layer % D.n_deltas();
    const int delta = d - (D.n_rows - 1);
    float r = 0.0f, f = 0.0f;
    if (m < D.n_rows - (delta < 0 ? -delta : delta)) {
        const RowPair rp = row_pair(delta, m);
        const int64_t k = sino_index(D, A.first + q, rp.r1, rp.r2, rho);
        r = sino[k];
        f = factors ? factors[k] : 1.0f;
    }
    store_layer(layers + idx, r, f);
}

// Hardware-interpolated sinogram reads: (ratio, factor) from a float2 layered texture, or the
// ratio alone from a float one (half the texel bytes when no sensitivity is wanted).
template <bool kSens>
struct TexCorr {
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

// Tube values through the texture unit (linear in i): used when the tables do not fit shared memory.
struct TexProb {
    cudaTextureObject_t t;
    int nk;
    __device__ float operator()(int S, float i_f, int jj, int kk) const {
        return tex2DLayered<float>(t, jj * nk + kk + 0.5f, i_f + 0.5f, S);
    }
};

constexpr int kFaithfulBackThreads = 256;   // 32 x 8 voxels; 3 blocks (and table copies) per SM

// kSmemTable: the tube values are read from a shared-memory copy of the Super-LOR tables (linear in
// i, exact float) rather than through the texture unit, which the sinogram reads keep busy: a voxel
// makes one table read per (group, j, k) and one sinogram read per (ring difference, j, k). Tables
// larger than half the shared memory fall back to the table texture.
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
    for (int q = 0; q < A.n; ++q)
        voxel_back_faithful<NJ, NK>(D, groups, slope, ix, iy, iz, A.c[q], A.s[q],
                                    TexCorr<kSens>{corr, q * D.n_deltas()}, prob, &c_acc, &s_acc);
    const int64_t v = (static_cast<int64_t>(iz) * D.n + iy) * D.n + ix;
    image[v] = accumulate ? image[v] + c_acc : c_acc;
    if (kSens) sens[v] = accumulate ? sens[v] + s_acc : s_acc;
}

// --- matched ------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256)
matched_forward_kernel(const Dims D, const AngleChunk A, const Footprints FP, const float* __restrict__ image,
                       const float* __restrict__ Q, const int* __restrict__ base, float* __restrict__ sino) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int rho = blockIdx.x * 32 + threadIdx.x;
    if (row >= D.n_rows * D.n_rows || rho >= D.n) return;
    const int q = blockIdx.z;
    const int r1 = row / D.n_rows, r2 = row % D.n_rows;
    sino[sino_index(D, A.first + q, r1, r2, rho)] =
        lor_forward_matched(D, FP, image, Q, base, r2 - r1 + D.n_rows - 1, r1 + r2, rho, A.a[q]);
}

__global__ void __launch_bounds__(256)
matched_back_kernel(const Dims D, const AngleChunk A, const Footprints FP, const float* __restrict__ sino,
                    const float* __restrict__ Q, const int* __restrict__ base, float* __restrict__ image,
                    bool accumulate) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
    const int iz = blockIdx.z;
    if (ix >= D.n || iy >= D.n) return;
    float acc = 0.0f;
    for (int q = 0; q < A.n; ++q)
        acc += voxel_back_matched(D, FP, sino, Q, base, A.first + q, A.a[q], ix, iy, iz, A.c[q], A.s[q]);
    const int64_t v = (static_cast<int64_t>(iz) * D.n + iy) * D.n + ix;
    image[v] = accumulate ? image[v] + acc : acc;
}

// --- fast ----------------------------------------------------------------------------------------------
// Lattice buffer of a chunk: L[q][i][z][row'] with row' = rho + j + J in [0, pitch), zero past n + 2J.
__global__ void resample_kernel(const Dims D, const AngleChunk A, const Footprints FP, int pitch,
                                const float* __restrict__ image, float* __restrict__ L) {
    const int rr = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    const int q = blockIdx.z;
    if (rr >= pitch || i >= D.n) return;
    float* out = L + (static_cast<int64_t>(q) * D.n + i) * D.nz * pitch + rr;
    if (rr >= D.n_rows_ext()) {
        for (int z = 0; z < D.nz; ++z) out[static_cast<int64_t>(z) * pitch] = 0.0f;
        return;
    }
    const FootprintRead f = footprint_at(D, FP, A.a[q], i, rr);
    const int64_t plane = static_cast<int64_t>(D.n) * D.n;
    for (int z = 0; z < D.nz; ++z) out[static_cast<int64_t>(z) * pitch] = footprint_read(image + z * plane, f);
}

// One warp's work in the fast forward: ring difference d, LOR rows m0 .. m0 + count - 1.
struct FastUnit {
    int d, m0, count, pad;
};

template <int J, int K>
__global__ void __launch_bounds__(256)
fast_forward_kernel(const Dims D, const AngleChunk A, int pitch, int pz_lo, int plane_rows, int n_units,
                    const FastUnit* __restrict__ units, const float* __restrict__ L, const float* __restrict__ Q,
                    const int* __restrict__ base, float* __restrict__ sino) {
    constexpr int NJ = 2 * J + 1, NT = 2 * K + 2, W = NJ + 1;   // W values per lane per slice (2 radial bins)
    constexpr int COLS = 64 + 2 * J;                            // 64 radial bins + the tube's halo
    static_assert(W % 2 == 0 && COLS % 4 == 0, "float2 / float4 staging");
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int rho0 = blockIdx.x * 64, q = blockIdx.z;
    const int plane_size = plane_rows * COLS;
    const int unit_id = blockIdx.y * 8 + warp;
    const bool active = unit_id < n_units;
    FastUnit U{0, 0, 0, 0};
    if (active) U = units[unit_id];
    const int delta = U.d - (D.n_rows - 1), ad = delta < 0 ? -delta : delta;

    for (int k = tid; k < 2 * plane_size; k += blockDim.x) smem[k] = 0.0f;     // z padding stays zero
    __syncthreads();
    const float* Lq = L + static_cast<int64_t>(q) * D.n * D.nz * pitch;
    auto stage = [&](int i, int buf) {                         // plane i -> buffer, 16-byte copies
        float* dst = smem + buf * plane_size + pz_lo * COLS;
        const float* src = Lq + static_cast<int64_t>(i) * D.nz * pitch + rho0;
        constexpr int V = COLS / 4;
        for (int k = tid; k < D.nz * V; k += blockDim.x) {
            const int z = k / V, col = (k % V) * 4;
            if (rho0 + col < pitch)
                __pipeline_memcpy_async(dst + z * COLS + col, src + static_cast<int64_t>(z) * pitch + col, 16);
            else
                *reinterpret_cast<float4*>(dst + z * COLS + col) = make_float4(0.f, 0.f, 0.f, 0.f);
        }
        __pipeline_commit();
    };
    float acc0[kFastRows], acc1[kFastRows];
#pragma unroll
    for (int m = 0; m < kFastRows; ++m) acc0[m] = acc1[m] = 0.0f;

    stage(0, 0);
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int i = 0; i < D.n; ++i) {
        const int buf = i & 1;
        if (i + 1 < D.n) stage(i + 1, buf ^ 1);
        if (active) {
            float Qr[NJ][NT];
            const float* qp = Q + q_index(D, U.d, i, 0, 0);
#pragma unroll
            for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
                for (int t = 0; t < NT; ++t) Qr[jj][t] = __ldg(qp + jj * NT + t);
            const int zr = pz_lo + ad + 2 * U.m0 + base[static_cast<int64_t>(U.d) * D.n + i] - K;
            const float* P = smem + buf * plane_size + 2 * lane;
            float win[NT][W];
            auto load_row = [&](float* v, int r) {
#pragma unroll
                for (int h = 0; h < W; h += 2) {
                    const float2 x = *reinterpret_cast<const float2*>(P + r * COLS + h);
                    v[h] = x.x;
                    v[h + 1] = x.y;
                }
            };
#pragma unroll
            for (int t = 0; t < NT - 2; ++t) load_row(win[t], zr + t);
#pragma unroll
            for (int m = 0; m < kFastRows; ++m) {
                if (m >= U.count) break;
#pragma unroll
                for (int t = NT - 2; t < NT; ++t) load_row(win[t], zr + 2 * m + t);
                float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
                for (int t = 0; t < NT; ++t)
#pragma unroll
                    for (int jj = 0; jj < NJ; ++jj) {
                        a0 = fmaf(Qr[jj][t], win[t][jj], a0);
                        a1 = fmaf(Qr[jj][t], win[t][jj + 1], a1);
                    }
                acc0[m] += a0;
                acc1[m] += a1;
#pragma unroll
                for (int t = 0; t < NT - 2; ++t)
#pragma unroll
                    for (int h = 0; h < W; ++h) win[t][h] = win[t + 2][h];
            }
        }
        __pipeline_wait_prior(0);
        __syncthreads();
    }
    if (!active) return;
    const int rho = rho0 + 2 * lane;
#pragma unroll
    for (int m = 0; m < kFastRows; ++m) {
        if (m >= U.count) break;
        const RowPair rp = row_pair(delta, U.m0 + m);
        float* out = sino + sino_index(D, A.first + q, rp.r1, rp.r2, 0);
        if (rho < D.n) out[rho] = acc0[m];
        if (rho + 1 < D.n) out[rho + 1] = acc1[m];
    }
}

// Transposed stencil: G[q][i][z][row'] = sum over LORs of the folded taps times the sinogram.
template <int J, int K>
__global__ void __launch_bounds__(256)
fast_back_kernel(const Dims D, const AngleChunk A, int pitch, int pz_lo, int plane_rows,
                 const float* __restrict__ sino, const float* __restrict__ Q, const int* __restrict__ base,
                 float* __restrict__ G) {
    constexpr int NJ = 2 * J + 1, NT = 2 * K + 2, YCOLS = 32 + 2 * J;
    static_assert(K >= 1, "the carry of two slices per LOR row needs K >= 1");
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l0 = blockIdx.x * 32, i = blockIdx.y * 8 + warp, q = blockIdx.z;
    float* col = smem + tid;                                   // this thread's column: col[z * 256]
    float* ytile = smem + plane_rows * 256;                    // 2 x (n_rows x YCOLS)
    const int tile_size = D.n_rows * YCOLS;
    for (int z = 0; z < plane_rows; ++z) col[z * 256] = 0.0f;
    auto stage = [&](int d, int buf) {                         // ring difference d's LOR rows
        const int delta = d - (D.n_rows - 1);
        const int M = D.n_rows - (delta < 0 ? -delta : delta);
        float* dst = ytile + buf * tile_size;
        for (int k = tid; k < M * YCOLS; k += blockDim.x) {
            const int m = k / YCOLS, cc = k % YCOLS;
            const int rho = l0 - 2 * J + cc;
            if (rho >= 0 && rho < D.n) {
                const RowPair rp = row_pair(delta, m);
                __pipeline_memcpy_async(dst + k, sino + sino_index(D, A.first + q, rp.r1, rp.r2, rho), 4);
            } else {
                dst[k] = 0.0f;
            }
        }
        __pipeline_commit();
    };
    stage(0, 0);
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int d = 0; d < D.n_deltas(); ++d) {
        const int buf = d & 1;
        if (d + 1 < D.n_deltas()) stage(d + 1, buf ^ 1);
        if (i < D.n) {
            const int delta = d - (D.n_rows - 1), ad = delta < 0 ? -delta : delta;
            const int M = D.n_rows - ad;
            float Qr[NJ][NT];
            const float* qp = Q + q_index(D, d, i, 0, 0);
#pragma unroll
            for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
                for (int t = 0; t < NT; ++t) Qr[jj][t] = __ldg(qp + jj * NT + t);
            const int zr = pz_lo + ad + base[static_cast<int64_t>(d) * D.n + i] - K;
            const float* y = ytile + buf * tile_size + lane + 2 * J;
            float carry[NT - 2];
#pragma unroll
            for (int t = 0; t < NT - 2; ++t) carry[t] = 0.0f;
            for (int m = 0; m < M; ++m) {
                float v[NJ];
#pragma unroll
                for (int jj = 0; jj < NJ; ++jj) v[jj] = y[m * YCOLS - jj];
                float c[NT];
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    c[t] = 0.0f;
#pragma unroll
                    for (int jj = 0; jj < NJ; ++jj) c[t] = fmaf(Qr[jj][t], v[jj], c[t]);
                }
                // slices zr + 2m and zr + 2m + 1 receive nothing from later rows: add them now;
                // the taps above them carry over to the next row (whose taps start two slices up)
                col[(zr + 2 * m) * 256] += carry[0] + c[0];
                col[(zr + 2 * m + 1) * 256] += carry[1] + c[1];
#pragma unroll
                for (int t = 0; t < NT - 2; ++t) carry[t] = (t + 2 < NT - 2 ? carry[t + 2 < NT - 2 ? t + 2 : t] : 0.0f) + c[t + 2];
            }
#pragma unroll
            for (int t = 0; t < NT - 2; ++t) col[(zr + 2 * M + t) * 256] += carry[t];
        }
        __pipeline_wait_prior(0);
        __syncthreads();
    }
    const int rr = l0 + lane;
    if (i >= D.n || rr >= pitch) return;
    float* out = G + (static_cast<int64_t>(q) * D.n + i) * D.nz * pitch + rr;
    for (int z = 0; z < D.nz; ++z)
        out[static_cast<int64_t>(z) * pitch] = rr < D.n_rows_ext() ? col[(z + pz_lo) * 256] : 0.0f;
}

// The transposed resampling, gathered per voxel: 8 slices per thread.
__global__ void __launch_bounds__(256)
unresample_kernel(const Dims D, const AngleChunk A, const Footprints FP, int pitch, const float* __restrict__ G,
                  float* __restrict__ image, bool accumulate) {
    constexpr int ZB = 8;
    const int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * ZB;
    if (ix >= D.n || iy >= D.n) return;
    float acc[ZB];
#pragma unroll
    for (int zz = 0; zz < ZB; ++zz) acc[zz] = 0.0f;
    const int nzb = D.nz - z0 < ZB ? D.nz - z0 : ZB;
    for (int q = 0; q < A.n; ++q) {
        const float* Gq = G + static_cast<int64_t>(q) * D.n * D.nz * pitch;
        for_each_overlapping_lattice_point(D, FP, A.a[q], ix, iy, A.c[q], A.s[q], [&](int i, int row, float w) {
            const float* g = Gq + (static_cast<int64_t>(i) * D.nz + z0) * pitch + row + D.J;
#pragma unroll
            for (int zz = 0; zz < ZB; ++zz)
                if (zz < nzb) acc[zz] = fmaf(w, __ldg(g + static_cast<int64_t>(zz) * pitch), acc[zz]);
        });
    }
    const int64_t plane = static_cast<int64_t>(D.n) * D.n;
    float* out = image + static_cast<int64_t>(iy) * D.n + ix;
#pragma unroll
    for (int zz = 0; zz < ZB; ++zz)
        if (zz < nzb) {
            float* o = out + (z0 + zz) * plane;
            *o = accumulate ? *o + acc[zz] : acc[zz];
        }
}

}  // namespace

// --- the resident model -------------------------------------------------------------------------------
struct DeviceModel::Impl {
    HostModel host;
    cuda::DeviceBuffer Q, base, slope, super_of_delta, flip_k, units;
    cuda::DeviceBuffer delta_order, group_start, group_super, group_flip;
    cuda::DeviceBuffer fp_weight, fp_origin;   // footprint tables of every angle (tube.hpp)
    int n_units = 0;
    TextureArray table;              // Super-LOR tubes: layered ((2J+1)(2K+1), x) by (n, y) by n_super
    // workspaces, grown on demand
    cuda::DeviceBuffer lattice;      // fast and faithful forward: chunk x n x nz x pitch
    TextureArray lattice_tex;        // faithful forward: the lattice as a 3D array (pitch, nz, chunk n)
    cuda::DeviceBuffer table_linear; // the same tables in global memory (faithful back: staged to shared)
    TextureArray corrections[2];     // faithful back: layered (n, n_rows) x chunk * n_deltas, float / float2
    cuda::DeviceBuffer layers;       // staging of the corrections
    int pitch = 0, pz_lo = 0, plane_rows = 0, faithful_chunk = 0, faithful_forward_chunk = 0;
    std::string faithful_forward_unsupported;   // "" when the faithful forward's texture fits
    int max_smem = 0;                // shared memory a block may opt into (bytes), read once

    explicit Impl(const HostModel& h) : host(h) {
        const Dims& D = host.D;
        Q = upload(host.Q);
        base = upload(host.base);
        slope = upload(host.slope);
        super_of_delta = upload(host.super_of_delta);
        flip_k = upload(host.flip_k);
        delta_order = upload(host.delta_order);
        group_start = upload(host.group_start);
        group_super = upload(host.group_super);
        group_flip = upload(host.group_flip);
        fp_weight = upload(host.fp_weight);
        fp_origin = upload(host.fp_origin);
        // the footprint tables live on the GPU now: no second host copy beside the caller's model
        std::vector<float>().swap(host.fp_weight);
        std::vector<FootprintOrigin>().swap(host.fp_origin);
        table.create(D.n_j() * D.n_k(), D.n, D.n_super, true, false);   // [S][i][(j, k)]: (j, k) fastest
        table.copy_from(host.table.data(), false, nullptr, D.n_super);
        table_linear = upload(host.table);
        DP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        pitch = (D.n_rows_ext() + 3) / 4 * 4;
        pz_lo = D.K - host.base_min;
        plane_rows = D.nz + pz_lo + host.base_max + D.K + 1;
        // fast-forward work units: (d, m0, count), longest first so a block's warps finish together
        std::vector<FastUnit> u;
        for (int d = 0; d < D.n_deltas(); ++d) {
            const int delta = d - (D.n_rows - 1);
            const int M = D.n_rows - (delta < 0 ? -delta : delta);
            for (int m0 = 0; m0 < M; m0 += kFastRows) u.push_back({d, m0, std::min(kFastRows, M - m0), 0});
        }
        std::stable_sort(u.begin(), u.end(), [](const FastUnit& a, const FastUnit& b) { return a.count > b.count; });
        n_units = static_cast<int>(u.size());
        units = upload(u);
        int max_layers = 0, max_w = 0, max_h = 0, max_depth = 0, dev = 0;
        DP_CUDA_CHECK(cudaGetDevice(&dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_layers, cudaDevAttrMaxTexture2DLayeredLayers, dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_w, cudaDevAttrMaxTexture3DWidth, dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_h, cudaDevAttrMaxTexture3DHeight, dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_depth, cudaDevAttrMaxTexture3DDepth, dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        faithful_chunk = std::min(kChunk, max_layers / D.n_deltas());
        if (faithful_chunk < 1)
            throw ValueError("n_rows: " + std::to_string(D.n_deltas()) + " ring differences exceed the GPU's " +
                             std::to_string(max_layers) + " texture layers (faithful back projector)");
        // the faithful forward's lattice texture: (pitch, nz, chunk n); checked when it is used
        faithful_forward_chunk = std::min(kChunk, max_depth / D.n);
        if (pitch > max_w || D.nz > max_h || faithful_forward_chunk < 1)
            faithful_forward_unsupported = "n, n_rows: the lattice of " + std::to_string(D.n) + " x " +
                                           std::to_string(D.nz) + " exceeds the GPU's 3D texture (" +
                                           std::to_string(max_w) + " x " + std::to_string(max_h) + " x " +
                                           std::to_string(max_depth) + "); use method='matched' or 'fast'";
    }

    Footprints footprints() const { return {fp_weight.as<float>(), fp_origin.as<FootprintOrigin>()}; }

    float* lattice_for(int chunk) {
        const size_t need = static_cast<size_t>(chunk) * host.D.n * host.D.nz * pitch * sizeof(float);
        if (lattice.bytes() < need) {
            lattice = cuda::DeviceBuffer();
            lattice = cuda::DeviceBuffer(need);
        }
        return lattice.as<float>();
    }
};

DeviceModel::DeviceModel(const HostModel& host) : impl_(std::make_unique<Impl>(host)) {}
DeviceModel::~DeviceModel() = default;
const HostModel& DeviceModel::host() const { return impl_->host; }
size_t DeviceModel::bytes() const {
    const Impl& m = *impl_;
    return m.Q.bytes() + m.base.bytes() + m.slope.bytes() + m.super_of_delta.bytes() + m.flip_k.bytes() +
           m.delta_order.bytes() + m.group_start.bytes() + m.group_super.bytes() + m.group_flip.bytes() +
           m.units.bytes() + m.table.bytes() + m.lattice.bytes() + m.lattice_tex.bytes() +
           m.fp_weight.bytes() + m.fp_origin.bytes() + m.corrections[0].bytes() + m.corrections[1].bytes() + m.table_linear.bytes() +
           m.layers.bytes();
}
namespace {

size_t fast_forward_smem(const DeviceModel::Impl& m) { return 2 * sizeof(float) * m.plane_rows * (64 + 2 * kFastJ); }
size_t fast_back_smem(const DeviceModel::Impl& m) {
    return sizeof(float) * (static_cast<size_t>(m.plane_rows) * 256 + 2 * m.host.D.n_rows * (32 + 2 * kFastJ));
}

void set_smem(const void* kernel, size_t bytes) {
    DP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

std::string DeviceModel::fast_unsupported_reason() const {
    const Impl& m = *impl_;
    if (m.host.D.J != kFastJ || m.host.D.K != kFastK)
        return "the fast CUDA kernels are compiled for the paper's 5 x 3 tube (J = 2, K = 1)";
    const size_t need = std::max(fast_forward_smem(m), fast_back_smem(m));
    if (need > static_cast<size_t>(m.max_smem))
        return "n_rows: the fast kernels' slice planes (" + std::to_string(m.plane_rows) + " slices) need " +
               std::to_string(need >> 10) + " KiB of shared memory, the GPU has " + std::to_string(m.max_smem >> 10);
    return "";
}

bool DeviceModel::fast_supported() const { return fast_unsupported_reason().empty(); }

namespace {

void require_fast(const DeviceModel& model) {
    const std::string why = model.fast_unsupported_reason();
    if (!why.empty()) throw ValueError("method: " + why + "; use method='matched'");
}

}  // namespace

void forward(Method method, DeviceModel& model, const AngleList& angles, const float* image, float* sino, void* stream) {
    auto& m = model.impl();
    const Dims& D = m.host.D;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const dim3 lor_block(32, 8);
    auto resample = [&](const AngleChunk& ch, float* L) {
        resample_kernel<<<dim3(div_up(m.pitch, 32), div_up(D.n, 8), ch.n), dim3(32, 8), 0, s>>>(D, ch, m.footprints(),
                                                                                               m.pitch, image, L);
        DP_CUDA_CHECK_LAUNCH("resample_kernel");
    };
    if (method == Method::Faithful) {
        if (!m.faithful_forward_unsupported.empty()) throw ValueError("method: " + m.faithful_forward_unsupported);
        const int chunk = std::min<int>(m.faithful_forward_chunk, static_cast<int>(angles.index.size()));
        float* L = m.lattice_for(chunk);
        if (!m.lattice_tex.ready())
            m.lattice_tex.create(m.pitch, D.nz, m.faithful_forward_chunk * D.n, false, false);
        for_each_chunk(angles, m.faithful_forward_chunk, [&](const AngleChunk& ch) {
            resample(ch, L);
            m.lattice_tex.copy_from(L, true, s, ch.n * D.n);
            const dim3 grid(div_up(D.n, 32), div_up(static_cast<int64_t>(D.n_rows) * D.n_rows, 8), ch.n);
            faithful_forward_kernel<<<grid, lor_block, 0, s>>>(D, ch, m.lattice_tex.tex(), m.table.tex(),
                                                               m.super_of_delta.as<int>(), m.flip_k.as<unsigned char>(),
                                                               m.slope.as<float>(), sino);
            DP_CUDA_CHECK_LAUNCH("faithful_forward_kernel");
        });
        return;
    }
    if (method == Method::Matched) {
        for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
            const dim3 grid(div_up(D.n, 32), div_up(static_cast<int64_t>(D.n_rows) * D.n_rows, 8), ch.n);
            matched_forward_kernel<<<grid, lor_block, 0, s>>>(D, ch, m.footprints(), image, m.Q.as<float>(),
                                                              m.base.as<int>(), sino);
            DP_CUDA_CHECK_LAUNCH("matched_forward_kernel");
        });
        return;
    }
    require_fast(model);
    auto* kernel = fast_forward_kernel<kFastJ, kFastK>;
    const size_t smem = fast_forward_smem(m);
    set_smem(reinterpret_cast<const void*>(kernel), smem);
    float* L = m.lattice_for(std::min<int>(kChunk, static_cast<int>(angles.index.size())));
    for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
        resample(ch, L);
        const dim3 grid(div_up(D.n, 64), div_up(m.n_units, 8), ch.n);
        kernel<<<grid, 256, smem, s>>>(D, ch, m.pitch, m.pz_lo, m.plane_rows, m.n_units, m.units.as<FastUnit>(), L,
                                       m.Q.as<float>(), m.base.as<int>(), sino);
        DP_CUDA_CHECK_LAUNCH("fast_forward_kernel");
    });
}

void back(Method method, DeviceModel& model, const AngleList& angles, const float* sino, float* image, void* stream) {
    auto& m = model.impl();
    const Dims& D = m.host.D;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (method == Method::Faithful) {
        back_faithful(model, angles, sino, nullptr, image, nullptr, stream);
        return;
    }
    const dim3 vox_block(32, 8);
    if (method == Method::Matched) {
        for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
            const dim3 grid(div_up(D.n, 32), div_up(D.n, 8), D.nz);
            matched_back_kernel<<<grid, vox_block, 0, s>>>(D, ch, m.footprints(), sino, m.Q.as<float>(),
                                                           m.base.as<int>(), image, ch.first > 0);
            DP_CUDA_CHECK_LAUNCH("matched_back_kernel");
        });
        return;
    }
    require_fast(model);
    auto* kernel = fast_back_kernel<kFastJ, kFastK>;
    const size_t smem = fast_back_smem(m);
    set_smem(reinterpret_cast<const void*>(kernel), smem);
    float* G = m.lattice_for(std::min<int>(kChunk, static_cast<int>(angles.index.size())));
    for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
        kernel<<<dim3(div_up(m.pitch, 32), div_up(D.n, 8), ch.n), 256, smem, s>>>(
            D, ch, m.pitch, m.pz_lo, m.plane_rows, sino, m.Q.as<float>(), m.base.as<int>(), G);
        DP_CUDA_CHECK_LAUNCH("fast_back_kernel");
        unresample_kernel<<<dim3(div_up(D.n, 32), div_up(D.n, 8), div_up(D.nz, 8)), vox_block, 0, s>>>(
            D, ch, m.footprints(), m.pitch, G, image, ch.first > 0);
        DP_CUDA_CHECK_LAUNCH("unresample_kernel");
    });
}

void back_faithful(DeviceModel& model, const AngleList& angles, const float* sino, const float* factors, float* image,
                   float* sens, void* stream) {
    auto& m = model.impl();
    const Dims& D = m.host.D;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const bool with_sens = sens != nullptr;
    const size_t texel = with_sens ? sizeof(float2) : sizeof(float);
    const int chunk = std::min<int>(m.faithful_chunk, static_cast<int>(angles.index.size()));
    const int n_layers = chunk * D.n_deltas();
    TextureArray& corr = m.corrections[with_sens ? 1 : 0];
    if (!corr.ready() || corr.bytes() < static_cast<size_t>(n_layers) * D.n_rows * D.n * texel)
        corr.create(D.n, D.n_rows, n_layers, true, with_sens);
    const size_t stage_bytes = static_cast<size_t>(n_layers) * D.n_rows * D.n * texel;
    if (m.layers.bytes() < stage_bytes) {
        m.layers = cuda::DeviceBuffer();
        m.layers = cuda::DeviceBuffer(stage_bytes);
    }
    const bool smem_table = m.host.table.size() * sizeof(float) <= static_cast<size_t>(m.max_smem) / 2;
    const size_t smem = smem_table ? m.host.table.size() * sizeof(float) : 0;
    const DeltaGroups groups{m.delta_order.as<int>(), m.group_start.as<int>(), m.group_super.as<int>(),
                             m.group_flip.as<unsigned char>(), static_cast<int>(m.host.group_super.size())};
    // The paper's 5 x 3 tube gets unrolled inner loops; other tubes run the same code with run-time
    // loop bounds.
    const bool paper_tube = D.J == kFastJ && D.K == kFastK;
    auto launch = [&](auto sens_tag, auto smem_tag, const AngleChunk& ch, const dim3& grid, const dim3& block) {
        constexpr bool kS = decltype(sens_tag)::value, kT = decltype(smem_tag)::value;
        auto run = [&](auto kernel) {
            set_smem(reinterpret_cast<const void*>(kernel), smem);
            kernel<<<grid, block, smem, s>>>(D, ch, corr.tex(), m.table.tex(), m.table_linear.as<float>(), groups,
                                             m.slope.as<float>(), image, sens, ch.first > 0);
        };
        if (paper_tube)
            run(faithful_back_kernel<kS, kT, 2 * kFastJ + 1, 2 * kFastK + 1>);
        else
            run(faithful_back_kernel<kS, kT, 0, 0>);
    };
    for_each_chunk(angles, m.faithful_chunk, [&](const AngleChunk& ch) {
        const int64_t n = static_cast<int64_t>(ch.n) * D.n_deltas() * D.n_rows * D.n;
        if (with_sens)
            stage_corrections_kernel<<<div_up(n, 256), 256, 0, s>>>(D, ch, sino, factors, m.layers.as<float2>());
        else
            stage_corrections_kernel<<<div_up(n, 256), 256, 0, s>>>(D, ch, sino, factors, m.layers.as<float>());
        DP_CUDA_CHECK_LAUNCH("stage_corrections_kernel");
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
