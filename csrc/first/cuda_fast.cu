// FIRST Super-LOR projectors on the GPU, the defaults: matched and fast (launches around tube.hpp; the
// paper's texture design is in cuda_faithful.cu, the resident model and the dispatch in cuda_model.cu).
//
// matched   forward: one thread per LOR, footprint reads in-plane and exact float linear
//           interpolation in z; back: one thread per voxel gathering the exact transpose (tube.hpp).
// fast      forward: (1) resample the image once per angle on the LOR lattice R[i][z][row]
//           (the footprint weights); (2) per angle, a block stages one along-plane R[i][*][*] at a time in
//           shared memory (cp.async, double buffered) and each half-warp accumulates up to 8 LOR rows
//           of one ring difference for 64 radial bins (4 per lane) in registers, walking the
//           slices down the plane in pairs: 80 FMAs per 4 16-byte shared loads.
//           back: (1) per (angle, along sample i, 32 lattice rows) each thread owns one lattice
//           column G[i][*][row] in shared memory and adds every ring difference's LORs to it
//           (the sinogram rows staged per ring difference); (2) the transposed resampling
//           gathered per voxel.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../common/window_walk.hpp"
#include "cuda_internal.cuh"

namespace dp::first::gpu::detail {

namespace {

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
// A 32 (row) x 8 (i) block of lattice points, each warp an 8 x 4 tile of them (square_warp_tile): the
// image voxels a warp's footprints cover then lie in a compact patch, not along a turned line of 32
// points, whose reads touched a different image row per lane at oblique angles.
// The kernels and their launches take the block shape from these two constants.
constexpr int kTileRows = 32, kTileCols = 8;   // (x: row' or image x) x (y: i or image y)
static_assert(kTileRows == 32 && kTileCols == 8, "square_warp_tile's 8 x 4 tiling of a 32 x 8 block");
__device__ __forceinline__ int2 square_warp_tile() {
    const int t = threadIdx.y * kTileRows + threadIdx.x, w = t >> 5, l = t & 31;
    return make_int2(8 * (w & 3) + (l & 7), 4 * (w >> 2) + (l >> 3));
}

__global__ void __launch_bounds__(kTileRows * kTileCols) resample_kernel(const Dims D, const AngleChunk A, const Footprints FP, int pitch,
                                const float* __restrict__ image, float* __restrict__ L) {
    const int2 local = square_warp_tile();
    const int rr = blockIdx.x * kTileRows + local.x, i = blockIdx.y * kTileCols + local.y;
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


// The folded taps Q[d][i][jj][t] of one (ring difference, along sample) into registers: 16-byte loads
// when a row of taps is 4 floats (K = 1; rows of NT floats from a cudaMalloc base are then 16-byte
// aligned), which is a fifth of the load instructions of the scalar reads.
template <int NJ, int NT>
__device__ __forceinline__ void load_folded_taps(const float* __restrict__ qp, float (&Qr)[NJ][NT]) {
    if constexpr (NT == 4) {
        const float4* q4 = reinterpret_cast<const float4*>(qp);
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
            const float4 v = __ldg(q4 + jj);
            Qr[jj][0] = v.x, Qr[jj][1] = v.y, Qr[jj][2] = v.z, Qr[jj][3] = v.w;
        }
    } else {
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
            for (int t = 0; t < NT; ++t) Qr[jj][t] = __ldg(qp + jj * NT + t);
    }
}

// 3 blocks per SM (<= 85 registers): at 90 registers (the staging's carried offsets) only 2 fit.
// Each half-warp owns one work unit (ring difference, up to kFastRows LOR rows) and 64 radial bins, 4 per
// lane: a lane's 8-float window of a slice (two 16-byte loads) serves 4 bins x 5 taps, so a pair of
// slices costs 4 loads for 80 FMAs (before, 2 bins per lane of a whole warp: 6 float2 loads for 40 FMAs;
// 1.06 G instructions and 2.24 ms per 32 angles in Nsight Compute, now 0.92 G and 1.89 ms with the
// FFMAs 68 % of the instructions: benchmarks/RESULTS.md section 14g).
template <int J, int K>
__global__ void __launch_bounds__(256, 3)
fast_forward_kernel(const Dims D, const AngleChunk A, int pitch, int pz_lo, int plane_rows, int n_units,
                    const FastUnit* __restrict__ units, const float* __restrict__ L, const float* __restrict__ Q,
                    const int* __restrict__ base, float* __restrict__ sino) {
    constexpr int NJ = 2 * J + 1, NT = 2 * K + 2;
    constexpr int kBins = 4, W = NJ + kBins - 1;                // bins per lane, window floats per slice
    constexpr int COLS = 64 + 2 * J;                            // 64 radial bins + the tube's halo
    static_assert(W == 8 && COLS % 4 == 0, "two float4 per slice window; float4 staging");
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, half_lane = lane & 15;
    const int rho0 = blockIdx.x * 64, q = blockIdx.z;
    const int plane_size = plane_rows * COLS;
    const int unit_id = (blockIdx.y * 8 + warp) * 2 + (lane >> 4);
    const bool active = unit_id < n_units;
    FastUnit U{0, 0, 0, 0};
    if (active) U = units[unit_id];
    const int delta = U.d - (D.n_rows - 1), ad = delta < 0 ? -delta : delta;

    for (int k = tid; k < 2 * plane_size; k += blockDim.x) smem[k] = 0.0f;     // z padding stays zero
    __syncthreads();
    const float* Lq = L + static_cast<int64_t>(q) * D.n * D.nz * pitch + rho0;
    // Staging walks the plane's nz x V float4s flattened (element tid + n * 256), the same elements for
    // every plane i: the (z, column) of each step is carried incrementally, so a copy costs a few adds
    // instead of the division and 64-bit index arithmetic per copy (a quarter of the kernel's
    // instructions in the profile of 29f2428). Columns past the lattice pitch (the last radial block)
    // are zero-filled once, before the loop: no plane ever writes them. (The same walk as
    // common/window_walk.hpp, which the dual-head kernels and the back projection use; this one
    // derives both offsets from (z, c) instead of carrying them, one register fewer: the helper spills
    // at this kernel's 80-register budget.)
    constexpr int V = COLS / 4;
    constexpr int kDz = 256 / V, kDc = 256 - kDz * V;
    const int v_in = min(V, (pitch - rho0) / 4);               // float4 columns inside the lattice rows
    auto stage = [&](int i, int buf) {                         // plane i -> buffer, 16-byte copies
        float* dst = smem + buf * plane_size + pz_lo * COLS;
        const float* src = Lq + static_cast<int64_t>(i) * D.nz * pitch;
        int z = tid / V, c = tid - (tid / V) * V;
        for (int k = tid; k < D.nz * V; k += 256) {
            if (c < v_in) __pipeline_memcpy_async(dst + z * COLS + 4 * c, src + z * pitch + 4 * c, 16);
            z += kDz;
            c += kDc;
            if (c >= V) {
                c -= V;
                ++z;
            }
        }
        __pipeline_commit();
    };
    // acc[m][b]: LOR row m0 + m, radial bin rho0 + 4 half_lane + b, summed over the planes
    float acc[kFastRows][kBins];
#pragma unroll
    for (int m = 0; m < kFastRows; ++m)
#pragma unroll
        for (int b = 0; b < kBins; ++b) acc[m][b] = 0.0f;

    stage(0, 0);
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int i = 0; i < D.n; ++i) {
        const int buf = i & 1;
        if (i + 1 < D.n) stage(i + 1, buf ^ 1);
        if (active) {
            float Qr[NJ][NT];
            load_folded_taps<NJ, NT>(Q + q_index(D, U.d, i, 0, 0), Qr);
            // row m reads slices zr + 2m + t, t = 0 .. NT - 1: slice pair p (slices zr + 2p, zr + 2p + 1)
            // gives row p - k its taps t = 2k, 2k + 1 (k = 0 .. K), multiply-added onto the row's sum over
            // the planes so far (no partial sum per plane to add: an FADD and a zeroing per row and bin
            // fewer). Rows past the unit's count take their taps too and are never stored.
            const int zr = pz_lo + ad + 2 * U.m0 + base[static_cast<int64_t>(U.d) * D.n + i] - K;
            const float* P = smem + buf * plane_size + zr * COLS + kBins * half_lane;
#pragma unroll
            for (int pair = 0; pair < kFastRows + K; ++pair) {
                if (pair >= U.count + K) break;
                float v[2][W];
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int c = 0; c < W; c += 4) {
                        const float4 x = *reinterpret_cast<const float4*>(P + (2 * pair + h) * COLS + c);
                        v[h][c] = x.x, v[h][c + 1] = x.y, v[h][c + 2] = x.z, v[h][c + 3] = x.w;
                    }
#pragma unroll
                for (int k = K; k >= 0; --k) {
                    const int m = pair - k;   // rows before the first and past the last take nothing
                    if (m < 0 || m >= kFastRows) continue;
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int jj = 0; jj < NJ; ++jj)
#pragma unroll
                            for (int b = 0; b < kBins; ++b)
                                acc[m][b] = fmaf(Qr[jj][2 * k + h], v[h][jj + b], acc[m][b]);
                }
            }
        }
        __pipeline_wait_prior(0);
        __syncthreads();
    }
    if (!active) return;
    const int rho = rho0 + kBins * half_lane;
#pragma unroll
    for (int m = 0; m < kFastRows; ++m) {
        if (m >= U.count) break;
        const RowPair rp = row_pair(delta, U.m0 + m);
        float* out = sino + sino_index(D, A.first + q, rp.r1, rp.r2, 0);
#pragma unroll
        for (int b = 0; b < kBins; ++b)
            if (rho + b < D.n) out[rho + b] = acc[m][b];
    }
}

// Transposed stencil: G[q][i][row'][z] = sum over LORs of the folded taps times the sinogram. Each thread
// owns one lattice column (i, row'), its slices in shared memory; per ring difference the block stages the
// LOR rows its 32 lattice rows read and adds them, two slices per LOR row (the taps above them carried in
// registers to the next row).
// A column holds the nz image slices and one discard slot at each end, which every LOR row's taps that fall
// outside [0, nz) are added to (slot = clamp(z, -1, nz) + 1; only the rows at the ends of a ring
// difference's range need the clamp), against padding the column to the taps' whole reach (85 slices for
// nz = 59), whose shared memory left 2 blocks (16 warps) per SM; with nz + 2 slices 3 blocks fit.
template <int J, int K>
__global__ void __launch_bounds__(256)
fast_back_kernel(const Dims D, const AngleChunk A, int pitch, int g_slices,
                 const float* __restrict__ sino, const float* __restrict__ Q, const int* __restrict__ base,
                 float* __restrict__ G) {
    constexpr int NJ = 2 * J + 1, NT = 2 * K + 2, YCOLS = 32 + 2 * J;
    static_assert(K >= 1, "the carry of two slices per LOR row needs K >= 1");
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l0 = blockIdx.x * 32, i = blockIdx.y * 8 + warp, q = blockIdx.z;
    const int column_slots = D.nz + 2;
    float* col = smem + tid;                                   // this thread's column: col[slot * 256]
    float* ytile = smem + column_slots * 256;                  // 2 x (n_rows x YCOLS)
    const int tile_size = D.n_rows * YCOLS;
    for (int z = 0; z < column_slots; ++z) col[z * 256] = 0.0f;
    // the shared-memory offset of slice z; with clamp, z outside [0, nz) goes to discard slot 0 or nz + 1
    auto slot = [&](int z, bool clamp) { return ((clamp ? min(max(z, -1), D.nz) : z) + 1) * 256; };
    // Ring difference d's LOR rows m = 0 .. M - 1, radial bins l0 - 2J .. l0 + 31, in the flattened walk
    // (common/window_walk.hpp): LOR row m + 1 lies (n_rows + 1) rows of n bins after row m (r1 and r2
    // both + 1), so the rows are a strided window of the sinogram. (A division and a 64-bit sinogram
    // index per copied element before.)
    const int R = D.n_rows, row_step = (R + 1) * D.n;
    const float* sino_q = sino + static_cast<int64_t>(A.first + q) * R * R * D.n + (l0 - 2 * J);
    auto stage = [&](int d, int buf) {
        const int delta = d - (R - 1);
        const int M = R - (delta < 0 ? -delta : delta);
        float* dst = ytile + buf * tile_size;
        const float* src = sino_q + (delta >= 0 ? delta : -delta * R) * D.n;   // row m = 0 (r1, r2)
        for_each_window_cell<256>(tid, M, YCOLS, row_step, YCOLS, [&](int, int cc, int s_off, int d_off) {
            const int rho = l0 - 2 * J + cc;
            if (rho >= 0 && rho < D.n) __pipeline_memcpy_async(dst + d_off, src + s_off, 4);
            else dst[d_off] = 0.0f;
        });
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
            load_folded_taps<NJ, NT>(Q + q_index(D, d, i, 0, 0), Qr);
            const int zr = ad + base[static_cast<int64_t>(d) * D.n + i] - K;   // row m's first slice: zr + 2m
            const float* y = ytile + buf * tile_size + lane + 2 * J;
            float carry[NT - 2];
#pragma unroll
            for (int t = 0; t < NT - 2; ++t) carry[t] = 0.0f;
            // one LOR row; kClamp: one of its two finished slices may lie outside [0, nz)
            auto add_row = [&](int m, auto clamp) {
                constexpr bool kClamp = decltype(clamp)::value;
                float v[NJ];
#pragma unroll
                for (int jj = 0; jj < NJ; ++jj) v[jj] = y[m * YCOLS - jj];
                // this row's taps, independent of the carry (chains that started from the carry
                // serialised the rows: 2.77 -> 2.87 ms per 32 angles in Nsight Compute, d3513d5)
                float c[NT];
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    c[t] = 0.0f;
#pragma unroll
                    for (int jj = 0; jj < NJ; ++jj) c[t] = fmaf(Qr[jj][t], v[jj], c[t]);
                }
                // slices zr + 2m and zr + 2m + 1 receive nothing from later rows: add them now;
                // the taps above them carry over to the next row (whose taps start two slices up)
                const int z = zr + 2 * m;
                col[slot(z, kClamp)] += carry[0] + c[0];
                col[slot(z + 1, kClamp)] += carry[1] + c[1];
#pragma unroll
                for (int t = 0; t < NT - 2; ++t)   // (no "0 + c" where nothing is carried: an add saved)
                    carry[t] = t + 2 < NT - 2 ? carry[t + 2 < NT - 2 ? t + 2 : t] + c[t + 2] : c[t + 2];
            };
            // rows [m_in, m_out) finish two slices inside [0, nz): no clamp there
            const int m_in = min(M, zr < 0 ? (1 - zr) / 2 : 0);
            const int m_out = max(m_in, min(M, D.nz - 2 - zr >= 0 ? (D.nz - 2 - zr) / 2 + 1 : 0));
            for (int m = 0; m < m_in; ++m) add_row(m, std::true_type{});
            for (int m = m_in; m < m_out; ++m) add_row(m, std::false_type{});
            for (int m = m_out; m < M; ++m) add_row(m, std::true_type{});
#pragma unroll
            for (int t = 0; t < NT - 2; ++t) col[slot(zr + 2 * M + t, true)] += carry[t];
        }
        __pipeline_wait_prior(0);
        __syncthreads();
    }
    // G[q][i][row'][z], g_slices (a multiple of the transposed resampling's 16 slices per thread) per
    // lattice point, zero past nz: that kernel reads a voxel's slices as 16-byte loads.
    const int rr = l0 + lane;
    if (i >= D.n || rr >= pitch) return;
    float4* out = reinterpret_cast<float4*>(G + ((static_cast<int64_t>(q) * D.n + i) * pitch + rr) * g_slices);
    const bool in_lattice = rr < D.n_rows_ext();
    auto slice = [&](int z) { return in_lattice && z < D.nz ? col[slot(z, false)] : 0.0f; };
    for (int z = 0; z < g_slices; z += 4) out[z / 4] = make_float4(slice(z), slice(z + 1), slice(z + 2), slice(z + 3));
}

// The transposed resampling, gathered per voxel: kUnresampleSlices slices per thread, read from
// G[q][i][row'][z] as 16-byte loads (the layout the back kernel writes). (ix, iy) in 8 x 4 warp tiles, as
// in the resampling: the lattice points a warp's voxels gather from then lie in a compact patch of
// (i, row). The candidate search of each (voxel, angle) is paid once per 16 slices (8 before, each
// slice a 4-byte load of its own G[q][i][z][row'] row: 1.02 -> 0.49 ms per 32 angles in Nsight Compute).
constexpr int kUnresampleSlices = 16;
static_assert(kUnresampleSlices % 4 == 0, "float4 reads");
__global__ void __launch_bounds__(kTileRows * kTileCols)
unresample_kernel(const Dims D, const AngleChunk A, const Footprints FP, int pitch, int g_slices,
                  const float* __restrict__ G, float* __restrict__ image, bool accumulate) {
    constexpr int ZB = kUnresampleSlices;
    const int2 local = square_warp_tile();
    const int ix = blockIdx.x * kTileRows + local.x, iy = blockIdx.y * kTileCols + local.y;
    const int z0 = blockIdx.z * ZB;
    if (ix >= D.n || iy >= D.n) return;
    float acc[ZB];
#pragma unroll
    for (int zz = 0; zz < ZB; ++zz) acc[zz] = 0.0f;
    for (int q = 0; q < A.n; ++q) {
        const float* Gq = G + static_cast<int64_t>(q) * D.n * pitch * g_slices + z0;
        for_each_overlapping_lattice_point(D, FP, A.a[q], ix, iy, A.c[q], A.s[q], [&](int i, int row, float w) {
            const float4* g = reinterpret_cast<const float4*>(Gq + (static_cast<int64_t>(i) * pitch + row + D.J) * g_slices);
#pragma unroll
            for (int v = 0; v < ZB / 4; ++v) {
                const float4 x = __ldg(g + v);
                acc[4 * v] = fmaf(w, x.x, acc[4 * v]);
                acc[4 * v + 1] = fmaf(w, x.y, acc[4 * v + 1]);
                acc[4 * v + 2] = fmaf(w, x.z, acc[4 * v + 2]);
                acc[4 * v + 3] = fmaf(w, x.w, acc[4 * v + 3]);
            }
        });
    }
    const int64_t plane = static_cast<int64_t>(D.n) * D.n;
    float* out = image + static_cast<int64_t>(iy) * D.n + ix;
#pragma unroll
    for (int zz = 0; zz < ZB; ++zz)
        if (z0 + zz < D.nz) {
            float* o = out + (z0 + zz) * plane;
            *o = accumulate ? *o + acc[zz] : acc[zz];
        }
}

}  // namespace

size_t fast_forward_smem(const Impl& m) { return 2 * sizeof(float) * m.plane_rows * (64 + 2 * kFastJ); }
size_t fast_back_smem(const Impl& m) {
    return sizeof(float) * (static_cast<size_t>(m.host.D.nz + 2) * 256 + 2 * m.host.D.n_rows * (32 + 2 * kFastJ));
}

void allow_fast_kernels_smem(int max_smem) {
    for (const void* kernel : {reinterpret_cast<const void*>(fast_forward_kernel<kFastJ, kFastK>),
                               reinterpret_cast<const void*>(fast_back_kernel<kFastJ, kFastK>)})
        DP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
}

void count_fast_kernel_slots(Impl& m) {
    // a model whose planes exceed the shared memory cannot use the fast kernels (fast_unsupported_reason)
    if (std::max(m.fast_forward_smem, m.fast_back_smem) > static_cast<size_t>(m.max_smem)) return;
    m.fast_forward_slots = cuda::resident_blocks(fast_forward_kernel<kFastJ, kFastK>, 256, m.fast_forward_smem);
    m.fast_back_slots = cuda::resident_blocks(fast_back_kernel<kFastJ, kFastK>, 256, m.fast_back_smem);
}

namespace {

// Angles per launch of a fast projection of n angles: at most kChunk and what the lattice workspace
// budget holds (`slices` per lattice column), the even split whose launches take the fewest waves of a
// kernel of blocks_per_angle blocks on `slots` resident blocks. The full scanner's forward (27 blocks per
// angle, 396 slots on an H200) takes 3 launches of 44, 43, 43 angles, 3.0 waves each, instead of
// 32 x 4 + 2 (2.2 waves each and a last launch of 54 blocks).
int fast_chunk(const Impl& m, int n, long long blocks_per_angle, long long slots, int slices) {
    const int cap = static_cast<int>(std::clamp<size_t>(kLatticeBudget / m.lattice_bytes(1, slices), 1, kChunk));
    return waves::wave_balanced_launch_size(n, cap, blocks_per_angle, slots);
}

}  // namespace

void resample(Impl& m, const AngleChunk& ch, const float* image, float* lattice, cudaStream_t s) {
    const Dims& D = m.host.D;
    resample_kernel<<<dim3(div_up(m.pitch, kTileRows), div_up(D.n, kTileCols), ch.n), dim3(kTileRows, kTileCols), 0, s>>>(D, ch, m.footprints(),
                                                                                           m.pitch, image, lattice);
    DP_CUDA_CHECK_LAUNCH("resample_kernel");
}

void forward_matched(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s) {
    const Dims& D = m.host.D;
    const dim3 lor_block(32, 8);
    for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
        const dim3 grid(div_up(D.n, 32), div_up(static_cast<int64_t>(D.n_rows) * D.n_rows, 8), ch.n);
        matched_forward_kernel<<<grid, lor_block, 0, s>>>(D, ch, m.footprints(), image, m.Q.as<float>(),
                                                          m.base.as<int>(), sino);
        DP_CUDA_CHECK_LAUNCH("matched_forward_kernel");
    });
}

void back_matched(Impl& m, const AngleList& angles, const float* sino, float* image, cudaStream_t s) {
    const Dims& D = m.host.D;
    const dim3 vox_block(32, 8);
    for_each_chunk(angles, kChunk, [&](const AngleChunk& ch) {
        const dim3 grid(div_up(D.n, 32), div_up(D.n, 8), D.nz);
        matched_back_kernel<<<grid, vox_block, 0, s>>>(D, ch, m.footprints(), sino, m.Q.as<float>(),
                                                       m.base.as<int>(), image, ch.first > 0);
        DP_CUDA_CHECK_LAUNCH("matched_back_kernel");
    });
}

void forward_fast(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s) {
    const Dims& D = m.host.D;
    auto* kernel = fast_forward_kernel<kFastJ, kFastK>;
    const size_t smem = m.fast_forward_smem;
    const int n = static_cast<int>(angles.index.size());
    const int gx = div_up(D.n, 64), gy = div_up(m.n_units, 16);      // 8 warps, 2 units each
    const int chunk = fast_chunk(m, n, static_cast<long long>(gx) * gy, m.fast_forward_slots, D.nz);
    float* L = m.lattice_for(std::min(chunk, n), D.nz);
    for_each_chunk(angles, chunk, [&](const AngleChunk& ch) {
        resample(m, ch, image, L, s);
        const dim3 grid(gx, gy, ch.n);
        kernel<<<grid, 256, smem, s>>>(D, ch, m.pitch, m.pz_lo, m.plane_rows, m.n_units, m.units.as<FastUnit>(), L,
                                       m.Q.as<float>(), m.base.as<int>(), sino);
        DP_CUDA_CHECK_LAUNCH("fast_forward_kernel");
    });
}

void back_fast(Impl& m, const AngleList& angles, const float* sino, float* image, cudaStream_t s) {
    const Dims& D = m.host.D;
    auto* kernel = fast_back_kernel<kFastJ, kFastK>;
    const size_t smem = m.fast_back_smem;
    const int n_blocks_z = div_up(D.nz, kUnresampleSlices), g_slices = n_blocks_z * kUnresampleSlices;
    const int n = static_cast<int>(angles.index.size());
    const int gx = div_up(m.pitch, 32), gy = div_up(D.n, 8);
    const int chunk = fast_chunk(m, n, static_cast<long long>(gx) * gy, m.fast_back_slots, g_slices);
    float* G = m.lattice_for(std::min(chunk, n), g_slices);
    for_each_chunk(angles, chunk, [&](const AngleChunk& ch) {
        kernel<<<dim3(gx, gy, ch.n), 256, smem, s>>>(
            D, ch, m.pitch, g_slices, sino, m.Q.as<float>(), m.base.as<int>(), G);
        DP_CUDA_CHECK_LAUNCH("fast_back_kernel");
        unresample_kernel<<<dim3(div_up(D.n, kTileRows), div_up(D.n, kTileCols), n_blocks_z), dim3(kTileRows, kTileCols),
                            0, s>>>(D, ch, m.footprints(), m.pitch, g_slices, G, image, ch.first > 0);
        DP_CUDA_CHECK_LAUNCH("unresample_kernel");
    });
}

}  // namespace dp::first::gpu::detail
