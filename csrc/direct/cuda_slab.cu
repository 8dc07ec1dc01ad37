// DIRECT projectors on the GPU, the defaults (cuda.hpp describes the methods): slab, the mSR regrouped
// into (dy, dx) columns with the sources staged in a shared-memory ring (cp.async), runs of output
// z-voxels in registers and factored weights where the LUT allows; and columns, the same columns read
// through L1 / L2 (the slab's fallback for halos too wide to stage). The LUT upload and the dispatch are
// in cuda_lut.cu, the paper's schemes in cuda_paper.cu.
#include <cuda_pipeline.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/cuda_occupancy.cuh"
#include "../common/errors.hpp"
#include "../common/waves.hpp"
#include "columns.hpp"
#include "cuda.hpp"
#include "cuda_internal.cuh"

namespace dp::direct::gpu::detail {

namespace {

// ---- columns and slab ------------------------------------------------------------------------------
struct ColumnPlan {
    const int4* groups;    // (dy, dx, dz_min, weight tap column), sorted by (dy, class, dx)
    const int* rows;       // n_rows x kRowInts (RowInfo)
    const float* weights;  // per (group, kernel) a padded vector of taps (DeviceLut); flipped taps for the forward projection
    const float* radial;   // factored weights: (n_groups, n_kernels), or null
    const float* tap_factor;  // factored weights: (stride,), or null
    const int* lormap;
    int n_kernels, n_rows;
    const char* gathered;        // the table the columns gather from (weights or radial) ...
    long long gathered_bytes;    // ... and its size, prefetched into L2 at the start of a slab launch
};

// Where a column's source values come from: global memory through the caches (columns), or a
// zero-padded shared-memory slab (slab).
struct GlobalColumns {
    const float* src;
    long long plane;
    int ny, nx, nz;
    // value at z of the column at (qy, qx), zero outside the volume
    __device__ __forceinline__ float at(bool inside_xy, int qy, int qx, int z) const {
        return (inside_xy && z >= 0 && z < nz) ? __ldg(src + z * plane + qy * nx + qx) : 0.0f;
    }
};

// The slab kernel's shared memory: slab[z][slot][x] with a compile-time pitch, so that the window
// of a column is read with immediate offsets (k * SLOTS * PITCH floats apart). `base` points at
// this thread's slot and x position, shifted so that base[dz * stride + dx] is the source at
// (z0 + dz, y + dy, x + dx).
// Output z-voxels per thread in the slab kernel. (8-voxel runs, which keep twice the warps resident
// on small grids, were measured slower on the clinical problem: 0.109 / 0.103 ms against 0.087 /
// 0.078 ms for FP / BP on an H200, benchmarks/RESULTS.md section 14b.)
constexpr int kSlabRun = 16;

template <int PITCH, int SLOTS>
struct RingSlab {
    static constexpr int kZStride = SLOTS * PITCH;
    const float* base;
    const int* ids;  // identifiers of this thread's source row, ids[dx] at (y + dy, x + dx)
};

// The kernel identifier a column's weights are taken with: the voxel's own (back projection) or
// the neighbour column's (forward), from global memory or from the slab's staged identifier rows.
template <bool kForward, typename Source>
__device__ __forceinline__ int kernel_id(const Source& in, const ColumnPlan& p, const int4& G, int ny, int nx,
                                         int x, int y, int own_id) {
    if (!kForward) return own_id;
    if constexpr (!std::is_same_v<Source, GlobalColumns>) {
        return in.ids[G.y];
    } else {
        const int qy = y + G.x, qx = x + G.y;
        return __ldg(p.lormap + ((qy >= 0 && qy < ny && qx >= 0 && qx < nx) ? qy * nx + qx : 0));
    }
}

template <int R, int S, typename Source>
__device__ __forceinline__ void load_window(const Source& in, const int4& G, int ny, int nx, int x, int y,
                                            int z0, float (&win)[R + S - 1]) {
    if constexpr (!std::is_same_v<Source, GlobalColumns>) {
        constexpr int kStride = Source::kZStride;
        const float* b = in.base + G.z * kStride + G.y;
#pragma unroll
        for (int k = 0; k < R + S - 1; ++k) win[k] = b[k * kStride];
    } else {
        const int qy = y + G.x, qx = x + G.y;
        const bool inside_xy = qy >= 0 && qy < ny && qx >= 0 && qx < nx;
#pragma unroll
        for (int k = 0; k < R + S - 1; ++k) win[k] = in.at(inside_xy, qy, qx, z0 + G.z + k);
    }
}

// The radial weight of column g, or of the row's last column g_last past it (loaded, never used: the
// prefetch runs ahead without a branch per column).
template <bool kForward, typename Source>
__device__ __forceinline__ float radial_weight(const Source& in, const ColumnPlan& p, const int4* groups, int g,
                                               int g_last, int ny, int nx, int x, int y, int own_id) {
    g = min(g, g_last);
    // 32-bit index: DeviceLut keeps its tables under 2^32 floats
    return __ldg(p.radial + (static_cast<unsigned>(g) * p.n_kernels +
                             static_cast<unsigned>(kernel_id<kForward>(in, p, groups[g], ny, nx, x, y, own_id))));
}

// Radial weights of the next kPrefetch columns, in flight while the current column is computed.
constexpr int kPrefetch = 3;
struct RadialQueue {
    float h[kPrefetch];
};

// w[0 .. S) from the P floats at `from` (P: S padded to a whole float2 or float4 vectors, `from`
// aligned to them), through the read-only cache (kGlobal) or from shared memory.
template <int S, int P, bool kGlobal>
__device__ __forceinline__ void load_vectors(const float* from, float (&w)[S]) {
    static_assert(P >= S && (P <= 2 || P % 4 == 0), "padded span");
    auto load = [](const auto* at) {
        if constexpr (kGlobal) return __ldg(at);
        else return *at;
    };
    if constexpr (P == 1) {
        w[0] = load(from);
    } else if constexpr (P == 2) {
        const float2 v = load(reinterpret_cast<const float2*>(from));
        w[0] = v.x;
        if constexpr (S > 1) w[1] = v.y;
    } else {
#pragma unroll
        for (int q = 0; q < P / 4; ++q) {
            const float4 v = load(reinterpret_cast<const float4*>(from) + q);
            const float c[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int k = 0; k < 4; ++k)
                if (4 * q + k < S) w[4 * q + k] = c[k];
        }
    }
}

// The column's weights from the per-tap table: its P weights for its kernel are one padded vector
// (DeviceLut's table layout), read as one float / float2 or P / 4 float4 loads with a 32-bit index
// (DeviceLut keeps the table under 2^32 floats; 64-bit arithmetic and a load per tap cost about 12
// instructions a column).
template <bool kForward, int S, int P, typename Source>
__device__ __forceinline__ void table_weights(const Source& in, const ColumnPlan& p, const int4& G, int ny, int nx,
                                              int x, int y, int own_id, float (&w)[S]) {
    load_vectors<S, P, true>(p.weights + table_index(G.w, p.n_kernels, kernel_id<kForward>(in, p, G, ny, nx, x, y, own_id), P), w);
}

template <int R, int S>
__device__ __forceinline__ void multiply_add(const float (&w)[S], const float (&win)[R + S - 1], float (&acc)[R]) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(w[s], win[r + s], acc[r]);
    }
}

// All groups [g0, g1) of one span class S: load the R + S - 1 source values of the neighbour
// column once, then apply the S taps to the R outputs from registers. `groups` may point to
// global or shared memory.
//   table path:    the column's weights for its kernel are gathered as one padded vector (table_weights).
//   factored path: weight = radial(group, id) * tap_factor(tap); the one gathered value per
//                  column is loaded kPrefetch columns ahead -- across span classes, up to the end
//                  of the kernel row g_end -- so its latency (an L2 read) hides behind the
//                  multiply-adds of the columns before it; tap factors come from shared memory,
//                  as padded vectors like the table's.
//   Table path with short columns (P <= 4): software-pipelined, the group, identifier and weights of
//   the column two ahead are loaded before this column's multiply-adds, so that the chain of dependent
//   loads (group, identifier, weights: the stall at each column's first multiply-add, one column ahead
//   still 18 % of the back projection's stall samples) overlaps them.
template <bool kForward, int R, int S, int P, bool kFactored, typename Source>
__device__ __forceinline__ void column_class(const Source& in, const ColumnPlan& p, const int4* groups,
                                             const float* taps, int g0, int g1, int g_end, int ny, int nx,
                                             int x, int y, int z0, int own_id, RadialQueue& q,
                                             float (&acc)[R]) {
    if constexpr (!kFactored && P <= 4) {
        // Three register sets in turn (a, b, c), two columns ahead, unrolled by three so that no weights
        // are copied between them.
        if (g0 >= g1) return;
        const int last = g1 - 1;  // the columns past the end reload the last one
        int4 Ga = groups[g0], Gb = groups[min(g0 + 1, last)], Gc;
        float wa[S], wb[S], wc[S];
        table_weights<kForward, S, P>(in, p, Ga, ny, nx, x, y, own_id, wa);
        table_weights<kForward, S, P>(in, p, Gb, ny, nx, x, y, own_id, wb);
        auto step = [&](const int4& G, const float (&w)[S], int4& G_fill, float (&w_fill)[S], int g) {
            float win[R + S - 1];
            load_window<R, S>(in, G, ny, nx, x, y, z0, win);
            G_fill = groups[min(g + 2, last)];
            table_weights<kForward, S, P>(in, p, G_fill, ny, nx, x, y, own_id, w_fill);
            multiply_add<R, S>(w, win, acc);
        };
        for (int g = g0;;) {
            step(Ga, wa, Gc, wc, g);
            if (++g >= g1) return;
            step(Gb, wb, Ga, wa, g);
            if (++g >= g1) return;
            step(Gc, wc, Gb, wb, g);
            if (++g >= g1) return;
        }
    }
    for (int g = g0; g < g1; ++g) {
        const int4 G = groups[g];
        float w[S];
        if (kFactored) {
            const float h = q.h[0];
#pragma unroll
            for (int k = 0; k + 1 < kPrefetch; ++k) q.h[k] = q.h[k + 1];
            q.h[kPrefetch - 1] = radial_weight<kForward>(in, p, groups, g + kPrefetch, g_end - 1, ny, nx, x, y, own_id);
            load_vectors<S, P, false>(taps + G.w, w);
#pragma unroll
            for (int s = 0; s < S; ++s) w[s] *= h;
        } else {
            table_weights<kForward, S, P>(in, p, G, ny, nx, x, y, own_id, w);
        }
        float win[R + S - 1];
        load_window<R, S>(in, G, ny, nx, x, y, z0, win);
        multiply_add<R, S>(w, win, acc);
    }
}

template <bool kForward, int R, bool kFactored, typename Source, int... C>
__device__ __forceinline__ void row_classes(const Source& in, const ColumnPlan& p, const int4* groups,
                                            const float* taps, const int* row, const Dims& d, int x, int y,
                                            int z0, int own_id, float (&acc)[R], std::integer_sequence<int, C...>) {
    const int g_begin = row[kRowClassBegin], g_end = row[kRowClassBegin + kNumSpanClasses];
    RadialQueue q;
#pragma unroll
    for (int k = 0; k < kPrefetch; ++k)
        q.h[k] = kFactored && g_begin < g_end
                     ? radial_weight<kForward>(in, p, groups, g_begin + k, g_end - 1, d.ny, d.nx, x, y, own_id)
                     : 0.0f;
    (column_class<kForward, R, kSpanClasses[C], padded_span(kSpanClasses[C]), kFactored>(in, p, groups, taps, row[kRowClassBegin + C],
                                                            row[kRowClassBegin + 1 + C], g_end, d.ny, d.nx, x, y,
                                                            z0, own_id, q, acc), ...);
}

template <int R>
__device__ __forceinline__ void store_run(float* dst, const Dims& d, int pixel, int z0, const float (&acc)[R]) {
    const long long plane = static_cast<long long>(d.ny) * d.nx;
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (z0 + r < d.nz) dst[(z0 + r) * plane + pixel] = acc[r];
}

constexpr int kColumnsBlock = 128;

template <bool kForward, int R>
__global__ void __launch_bounds__(kColumnsBlock)
columns_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, ColumnPlan p) {
    const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
    if (pixel >= d.ny * d.nx) return;
    const int y = pixel / d.nx, x = pixel - y * d.nx;
    const int z0 = blockIdx.y * R;
    const int own_id = kForward ? 0 : __ldg(p.lormap + pixel);
    const GlobalColumns in{src, static_cast<long long>(d.ny) * d.nx, d.ny, d.nx, d.nz};
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int row = 0; row < p.n_rows; ++row)
        row_classes<kForward, R, false>(in, p, p.groups, nullptr, p.rows + row * kRowInts, d, x, y, z0, own_id, acc,
                                 std::make_integer_sequence<int, kNumSpanClasses>{});
    store_run<R>(dst, d, pixel, z0, acc);
}

// The factored weights' tap factors of a kernel row are staged from staged_tap_begin(the row's first tap),
// the multiple of 4 at or below it, so that the groups' padded vectors (w0 aligned to them) stay 16-byte
// aligned in shared memory; a plan buffer holds staged_tap_stride floats (a whole number of float4).
DP_HD int staged_tap_begin(int tap_begin) { return tap_begin & ~3; }
DP_HD int staged_tap_stride(int max_row_taps) { return (max_row_taps + 3 + 3) / 4 * 4; }

constexpr int kShortClasses = 4;  // spans 1 to 4: the kernels compiled for LUTs whose columns are all that short

// Slab: a block computes a TX x TY pixel tile (32 x 4 or 16 x 8) for a z-run of R and walks the
// kernel's rows dy in increasing order. Shared memory holds the source rows y0 + dy .. y0 + dy +
// TY - 1 (x from x0 - halo, z from z0 + z_lo over the support's whole z range + R - 1) in a ring of
// row slots, with, for the forward projection, the same rows of LORmap. While the block computes
// row dy, asynchronous copies (cp.async, zero-filled outside the volume) bring in source row
// y0 + dy + TY and the next kernel row's groups, info and tap factors, so the copies' latency hides
// behind the multiply-adds. Windows are read at immediate offsets.
// Ring depth SLOTS: with TY + 2 slots (TY rows in use, 1 being filled, 1 still read by threads
// finishing the previous row) one barrier per kernel row suffices; with TY + 1 slots (used when
// the deeper ring would cost blocks per SM) a second barrier guards the slot being refilled.
// PITCH (floats per slot row) is >= TX + 2 halo; for 16-wide tiles it is 16 mod 32 so that the two
// pixel rows of a warp fall in different shared-memory banks.
// halo is the staged x halo (at least the kernel's); with vec_stage (nx, halo and src 16-byte
// aligned: checked at launch) rows are staged as float4, 4x fewer copies: with element copies the
// staging was about a third of the clinical kernel's instructions.
// kClasses: the span classes compiled into the row loop (the first kClasses; kShortClasses for LUTs
// whose columns are all that short, such as the clinical kernel at 4 mm: a smaller loop that does not
// test the seven empty classes per kernel row).
template <bool kForward, int TX, int TY, int PITCH, bool kFactored, int SLOTS, int kClasses>
__global__ void __launch_bounds__(TX * TY, 4)
slab_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, ColumnPlan p, int halo,
            int z_lo, int z_ext, int max_row_groups, int max_row_taps, int row_split, bool vec_stage,
            int whole_plan_groups) {
    static_assert(SLOTS == TY + 1 || SLOTS == TY + 2, "ring depth");
    constexpr int kSlots = SLOTS, kPlanBuffers = SLOTS == TY + 2 ? 3 : 2;
    // Shared memory: source [z_ext][kSlots][PITCH]; identifiers [kSlots][PITCH] (forward); then the plan:
    // per kernel row, row groups [kPlanBuffers][max_row_groups]; tap factors [kPlanBuffers][staged_tap_stride]
    // (factored); row infos [kPlanBuffers][kRowInts]. Or, with whole_plan_groups > 0 (the table path, where
    // the launch found that it costs no blocks per SM), all whole_plan_groups groups and every row info,
    // staged once at the start: without the per-row copies and their bounds the clinical kernel executes
    // 3.5 % fewer instructions and runs 5-6 % faster (benchmarks/RESULTS.md section 14t).
    extern __shared__ __align__(16) float smem[];
    constexpr int R = kSlabRun;
    constexpr int kZStride = kSlots * PITCH;
    const bool whole_plan = !kFactored && whole_plan_groups > 0;
    float* slab = smem;
    int* ring_ids = reinterpret_cast<int*>(slab + z_ext * kZStride);
    int4* group_buf = reinterpret_cast<int4*>(ring_ids + (kForward ? kSlots * PITCH : 0));
    const int tap_stride = kFactored ? staged_tap_stride(max_row_taps) : 0;  // the table path stages no tap factors
    float* tap_buf = reinterpret_cast<float*>(group_buf + (whole_plan ? whole_plan_groups : kPlanBuffers * max_row_groups));
    int* row_buf = reinterpret_cast<int*>(tap_buf + kPlanBuffers * tap_stride);

    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
    constexpr int kThreads = TX * TY;
    // With row_split > 0 the kernel rows are shared by two blocks (blockIdx.z = 2 * z-block + part):
    // rows [0, row_split) and [row_split, n_rows), each adding its half into the zeroed output.
    const int parts = row_split > 0 ? 2 : 1, part = blockIdx.z % parts;
    const int row_begin = part == 0 ? 0 : row_split;
    const int row_end = parts == 1 || part == 1 ? p.n_rows : row_split;
    const int x0 = blockIdx.x * TX, y0 = blockIdx.y * TY, z0 = (blockIdx.z / parts) * R;
    const int x = x0 + tx, y = y0 + ty;
    const bool active = x < d.nx && y < d.ny;
    const int pixel = active ? y * d.nx + x : 0;
    const int own_id = kForward ? 0 : __ldg(p.lormap + pixel);
    const int width = TX + 2 * halo;
    const long long plane = static_cast<long long>(d.ny) * d.nx;

    // Each thread's share of a staged source row, the same for every row (worked out once: an integer
    // division per copy was most of the staging's instructions). A slab row is z_ext lines of `units`
    // copies of `vec` floats (4: every float4 lies wholly inside or outside the volume, as nx and
    // x0 - halo are multiples of 4). With units <= kThreads, thread tid copies unit tid % units of the
    // lines tid / units, + zstep, + 2 zstep, ... (zstep = kThreads / units; the threads past zstep * units
    // copy nothing); wider rows: every line, units tid, tid + kThreads, ...
    const int vec = vec_stage ? 4 : 1, units = width / vec;
    const bool narrow_row = units <= kThreads;
    const int zstep = narrow_row ? kThreads / units : 1;
    const int stage_z0 = narrow_row ? (tid < zstep * units ? tid / units : z_ext) : 0;
    const int stage_u0 = narrow_row ? tid % units : tid;
    // Asynchronous copy of source row gy (and its identifiers) into its ring slot; elements outside
    // the volume are zero-filled by the copy itself (source size 0).
    auto stage_row = [&](int gy, int slot) {
        const bool row_in = gy >= 0 && gy < d.ny;
        const long long row_offset = static_cast<long long>(row_in ? gy : 0) * d.nx;
        auto copy_lines = [&](auto bytes) {
            constexpr int kBytes = decltype(bytes)::value;
            if (narrow_row) {  // one unit per thread: only the line changes from copy to copy
                const int gx = x0 - halo + stage_u0 * vec;
                const bool x_in = row_in && gx >= 0 && gx < d.nx;
                float* to = slab + slot * PITCH + stage_z0 * kZStride + stage_u0 * vec;
                long long from = static_cast<long long>(z0 + z_lo + stage_z0) * plane + row_offset + gx;
#pragma unroll 1
                for (int gz = z0 + z_lo + stage_z0; gz < z0 + z_lo + z_ext; gz += zstep) {
                    const bool in = x_in && gz >= 0 && gz < d.nz;
                    __pipeline_memcpy_async(to, in ? src + from : src, kBytes, in ? 0 : kBytes);
                    to += zstep * kZStride;
                    from += zstep * plane;
                }
                return;
            }
#pragma unroll 1
            for (int sz = 0; sz < z_ext; ++sz) {
                const int gz = z0 + z_lo + sz;
                const bool line_in = row_in && gz >= 0 && gz < d.nz;
                for (int u = stage_u0; u < units; u += kThreads) {
                    const int gx = x0 - halo + u * vec;
                    const bool in = line_in && gx >= 0 && gx < d.nx;
                    __pipeline_memcpy_async(slab + slot * PITCH + sz * kZStride + u * vec,
                                            in ? src + (gz * plane + row_offset + gx) : src, kBytes, in ? 0 : kBytes);
                }
            }
        };
        if (vec_stage)
            copy_lines(std::integral_constant<int, 4 * sizeof(float)>{});
        else
            copy_lines(std::integral_constant<int, sizeof(float)>{});
        if (kForward)
            for (int k = tid; k < width; k += kThreads) {
                const int gx = x0 - halo + k;
                const bool in = row_in && gx >= 0 && gx < d.nx;
                __pipeline_memcpy_async(ring_ids + slot * PITCH + k, in ? p.lormap + gy * d.nx + gx : p.lormap,
                                        sizeof(int), in ? 0 : sizeof(int));
            }
    };
    // Asynchronous copy of the whole plan (every group, every row info), once, where it fits.
    auto stage_whole_plan = [&]() {
        for (int g = tid; g < whole_plan_groups; g += kThreads)
            __pipeline_memcpy_async(group_buf + g, p.groups + g, sizeof(int4));
        for (int k = tid; k < p.n_rows * kRowInts; k += kThreads)
            __pipeline_memcpy_async(row_buf + k, p.rows + k, sizeof(int));
    };
    // Asynchronous copy of kernel row `row`'s groups and tap factors into plan buffer `buf`.
    auto stage_plan = [&](int row, int buf) {
        const int* info = p.rows + row * kRowInts;
        const int g0 = __ldg(info + kRowClassBegin), g1 = __ldg(info + kRowClassBegin + kNumSpanClasses);
        // the row's info too: the class loops read their bounds from shared memory
        for (int k = tid; k < kRowInts; k += kThreads)
            __pipeline_memcpy_async(row_buf + buf * kRowInts + k, info + k, sizeof(int));
        for (int g = g0 + tid; g < g1; g += kThreads)
            __pipeline_memcpy_async(group_buf + buf * max_row_groups + g - g0, p.groups + g, sizeof(int4));
        if (kFactored) {
            const int t0 = staged_tap_begin(__ldg(info + kRowTapBegin)), t1 = __ldg(info + kRowTapBegin + 1);
            for (int t = t0 + tid; t < t1; t += kThreads)
                __pipeline_memcpy_async(tap_buf + buf * tap_stride + t - t0, p.tap_factor + t, sizeof(float));
        }
    };

    // The gathered weight table is read once per projection, and an iteration projects every view once,
    // so it usually comes from DRAM, one dependent gather at a time. Ask L2 for all of it now, each
    // thread of the grid for one 128-byte line (or a few), so that the gathers of the kernel rows hit L2.
    {
        const long long threads = static_cast<long long>(gridDim.x) * gridDim.y * gridDim.z * kThreads;
        const long long block = (static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        for (long long line = block * kThreads + tid; line * 128 < p.gathered_bytes; line += threads)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p.gathered + line * 128));
    }
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    // Ring slots and plan buffers advance by one per kernel row: tracked rather than taken modulo.
    auto ring_slot = [](int gy) { return ((gy % kSlots) + kSlots) % kSlots; };
    auto advance = [](int slot, int k, int n) { return slot + k >= n ? slot + k - n : slot + k; };  // k < n
    int dy = __ldg(p.rows + row_begin * kRowInts);
    int top = ring_slot(y0 + dy);  // the slot of source row y0 + dy
    int buf = row_begin % kPlanBuffers;
    // the TY source rows kernel row dy reads, from slot top on
    auto stage_ring = [&]() {
        for (int k = 0; k < TY; ++k) stage_row(y0 + dy + k, advance(top, k, kSlots));
    };
    stage_ring();
    if (whole_plan) stage_whole_plan();
    else stage_plan(row_begin, buf);
    __pipeline_commit();
    for (int row = row_begin; row < row_end; ++row) {
        if (row > row_begin) {
            const int prev_dy = dy;
            dy = whole_plan ? row_buf[row * kRowInts] : __ldg(p.rows + row * kRowInts);
            buf = advance(buf, 1, kPlanBuffers);
            top = advance(top, 1, kSlots);
            // A gap in dy (not produced by ellipsoidal supports) needs the whole ring restaged.
            if (dy != prev_dy + 1) {
                top = ring_slot(y0 + dy);
                __pipeline_wait_prior(0);
                __syncthreads();
                stage_ring();
                __pipeline_commit();
            }
        }
        // Prefetch for the next kernel row, then wait for everything but that prefetch.
        if (kSlots == TY + 1 && row > row_begin) __syncthreads();  // the refilled slot is free
        if (row + 1 < row_end) {
            stage_row(y0 + dy + TY, advance(top, TY, kSlots));
            if (!whole_plan) stage_plan(row + 1, advance(buf, 1, kPlanBuffers));
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        if (active) {
            const int slot = advance(top, ty, kSlots);
            const RingSlab<PITCH, SLOTS> in{slab + slot * PITCH + tx + halo - z_lo * kZStride,
                                     ring_ids + slot * PITCH + tx + halo};
            const int* info = row_buf + (whole_plan ? row : buf) * kRowInts;
            const int g_begin = info[kRowClassBegin], t_begin = info[kRowTapBegin];
            row_classes<kForward, R, kFactored>(in, p, whole_plan ? group_buf : group_buf + buf * max_row_groups - g_begin,
                                                tap_buf + buf * tap_stride - staged_tap_begin(t_begin), info, d, x, y, z0,
                                                own_id, acc, std::make_integer_sequence<int, kClasses>{});
        }
    }
    if (!active) return;
    if (parts == 1) return store_run<R>(dst, d, pixel, z0, acc);
#pragma unroll
    for (int r = 0; r < R; ++r)  // two addends onto 0: the sum is the same in either order
        if (z0 + r < d.nz) atomicAdd(dst + (z0 + r) * plane + pixel, acc[r]);
}

// Slot-row pitch for a tile width and halo, 0 when the halo is too wide for the slab.
int slab_pitch(int tx, int halo) {
    const int width = tx + 2 * halo;
    if (tx == 32) return width <= 64 ? 64 : width <= 128 ? 128 : width <= 256 ? 256 : 0;
    return width <= 48 ? 48 : width <= 80 ? 80 : width <= 144 ? 144 : width <= 272 ? 272 : 0;
}

// whole_plan: the table path's whole plan staged once (every group and row info) instead of per kernel row.
size_t slab_bytes(bool forward, bool factored, const DeviceLut& lut, int tx, int slots, int slots_deep, int halo,
                  bool whole_plan) {
    const size_t pitch = slab_pitch(tx, halo);
    const size_t buffers = slots == slots_deep ? 3 : 2;
    const size_t taps = factored ? staged_tap_stride(lut.max_row_taps()) : 0;
    const size_t plan = whole_plan ? sizeof(int4) * lut.n_groups() + sizeof(int) * kRowInts * lut.n_rows()
                                   : buffers * (sizeof(int4) * lut.max_row_groups() + sizeof(float) * taps + sizeof(int) * kRowInts);
    return sizeof(float) * slots * pitch * (lut.z_span() + kSlabRun - 1) + (forward ? sizeof(int) * slots * pitch : 0) + plan;
}

// The staged halo: the kernel's, rounded up to a multiple of 4 when rows can be staged as float4.
int staged_halo(const DeviceLut& lut, bool vec) { return vec ? (lut.halo_x() + 3) / 4 * 4 : lut.halo_x(); }

// factored: whether the launch gathers the factored weights (the radial table) or the per-tap table.
ColumnPlan column_plan(bool forward, const DeviceLut& lut, bool factored) {
    const bool f = lut.factored(forward);
    const float* gathered = factored ? lut.radial(forward) : lut.weights(forward);
    const long long gathered_bytes = static_cast<long long>(factored ? lut.radial_bytes(forward) : lut.table_bytes());
    return {reinterpret_cast<const int4*>(lut.groups()), lut.rows(), lut.weights(forward),
            f ? lut.radial(forward) : nullptr, f ? lut.tap_factor(forward) : nullptr,
            lut.device_ref().lormap, lut.device_ref().n_kernels, lut.n_rows(),
            reinterpret_cast<const char*>(gathered), gathered_bytes};
}

template <bool kForward, int R>
void launch_columns(const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream) {
    const Dims d = lut.dims();
    const dim3 grid((d.ny * d.nx + kColumnsBlock - 1) / kColumnsBlock, (d.nz + R - 1) / R);
    columns_kernel<kForward, R><<<grid, kColumnsBlock, 0, stream>>>(src, dst, d, column_plan(kForward, lut, false));
    DP_CUDA_CHECK_LAUNCH("direct columns_kernel");
}

// Every slab_kernel instantiation has this signature.
using SlabKernel = void (*)(const float*, float*, Dims, ColumnPlan, int, int, int, int, int, int, bool, int);

// The launch of one slab variant for this LUT: its grid and, when the tiles fill the GPU's block slots
// badly (e.g. 540 tiles on 396 slots: the second wave 36 % full), each tile's kernel rows split over two
// blocks (twice the blocks, half the work each, a fuller last wave; only for a clear gain, since the
// split restages rows). The kernel is allowed the device's whole opt-in shared memory once, so that
// LUTs of any size can share it.
template <bool kForward, int TX, int TY, int PITCH, bool kFactored, int SLOTS, int kClasses>
void configure_slab(const DeviceLut& lut, int halo, bool vec, bool whole_plan, size_t bytes, int max_block, SlabLaunch& c) {
    const Dims d = lut.dims();
    // the kernel's row loop visits only its kClasses span classes: a longer column would be skipped
    if (lut.max_span_class() >= kClasses)
        throw std::logic_error("direct slab: a kernel of " + std::to_string(kClasses) + " span classes chosen for a LUT with class " +
                               std::to_string(lut.max_span_class()));
    SlabKernel kernel = slab_kernel<kForward, TX, TY, PITCH, kFactored, SLOTS, kClasses>;
    DP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_block));
    dim3 grid((d.nx + TX - 1) / TX, (d.ny + TY - 1) / TY, (d.nz + kSlabRun - 1) / kSlabRun);
    const long long tiles = static_cast<long long>(grid.x) * grid.y * grid.z;
    const long long slots = cuda::resident_blocks(kernel, TX * TY, bytes);
    c.row_split = 0;
    if (lut.n_rows() >= 8 && waves::efficiency(2 * tiles, slots) > 1.15 * waves::efficiency(tiles, slots)) {
        c.row_split = lut.balanced_row_split();
        grid.z *= 2;
    }
    c.kernel = reinterpret_cast<const void*>(kernel);
    c.grid[0] = grid.x, c.grid[1] = grid.y, c.grid[2] = grid.z;
    c.block[0] = TX, c.block[1] = TY, c.block[2] = 1;
    c.bytes = bytes;
    c.halo = halo;
    c.vec = vec;
    c.factored = kFactored;
    c.whole_plan_groups = whole_plan ? lut.n_groups() : 0;
}

template <bool kForward, int TX, int TY, int SLOTS>
void configure_slab_pitch(const DeviceLut& lut, bool factored, int halo, bool vec, bool whole_plan, size_t bytes,
                          int max_block, SlabLaunch& c) {
    const int pitch = slab_pitch(TX, halo);
    constexpr int P[4] = {TX == 32 ? 64 : 48, TX == 32 ? 128 : 80, TX == 32 ? 256 : 144, TX == 32 ? 256 : 272};
    auto go = [&](auto pitch_c) {
        constexpr int PC = decltype(pitch_c)::value;
        auto with_weights = [&](auto factored_c) {
            constexpr bool F = decltype(factored_c)::value;
            if (lut.max_span_class() < kShortClasses)
                return configure_slab<kForward, TX, TY, PC, F, SLOTS, kShortClasses>(lut, halo, vec, whole_plan, bytes, max_block, c);
            return configure_slab<kForward, TX, TY, PC, F, SLOTS, kNumSpanClasses>(lut, halo, vec, whole_plan, bytes, max_block, c);
        };
        if (factored) return with_weights(std::true_type{});
        return with_weights(std::false_type{});
    };
    if (pitch == P[0]) return go(std::integral_constant<int, P[0]>{});
    if (pitch == P[1]) return go(std::integral_constant<int, P[1]>{});
    if (pitch == P[2]) return go(std::integral_constant<int, P[2]>{});
    return go(std::integral_constant<int, P[3]>{});
}

// The slab needs shared memory growing with the kernel's x halo and z span. Preferred, while 4
// blocks still fit on a multiprocessor: 16 x 8 tiles with the deep ring (short halos: less staging
// per pixel, and 144-voxel rows split into whole tiles), then 32 x 4 tiles with the deep ring,
// then 32 x 4 with the shallow ring while one block fits at all; past that the columns kernel
// (same result, source through the caches) takes over. The tuned variants (slab, slab_table) stage
// rows as float4 where nx allows; slab_r16 keeps element copies (the default before issue 17, the
// baseline). The tuned table path (not the factored one, not slab_r16) stages its whole column plan
// once per block where the shape still fits with as many blocks per SM, else per kernel row.
template <bool kForward>
void configure_slab_launch(const DeviceLut& lut, SlabVariant variant, SlabLaunch& c) {
    int device = 0, max_block = 0, max_sm = 0;
    DP_CUDA_CHECK(cudaGetDevice(&device));
    DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    // The factored weights pay off once the per-tap table no longer sits in the caches (measured
    // on an H200: the stress kernel's 29 MB table 1.4x slower than factored, the clinical
    // kernel's 1 MB table 4 % faster).
    constexpr size_t kCachedTableBytes = 4u << 20;
    const bool factored = variant != SlabVariant::table && lut.factored(kForward) && lut.table_bytes() > kCachedTableBytes;
    const bool vec = variant != SlabVariant::r16 && lut.dims().nx % 4 == 0;
    const int halo = staged_halo(lut, vec);
    // Blocks per SM that a block's shared memory allows (1 KB of it reserved per block by the runtime).
    auto blocks_per_sm = [&](size_t bytes) { return static_cast<size_t>(max_sm) / (bytes + 1024); };
    auto fits4 = [&](size_t bytes) { return blocks_per_sm(bytes) >= 4; };
    auto fits1 = [&](size_t bytes) { return bytes <= static_cast<size_t>(max_block); };
    c.columns = false;
    // Each shape with the whole plan staged once (the table path only) where that fits as well and keeps
    // as many blocks per SM as staging per row (the stress kernel's table on the shallow ring would take
    // 139 972 bytes a block instead of 71 720: 1 block per SM instead of 3), else per row.
    auto bytes = [&](int tx, int slots, int slots_deep, bool whole) {
        return slab_bytes(kForward, factored, lut, tx, slots, slots_deep, halo, whole);
    };
    auto choose = [&](int tx, int slots, int slots_deep, auto fits, bool& whole) {
        const size_t per_row = bytes(tx, slots, slots_deep, false), once = bytes(tx, slots, slots_deep, true);
        whole = !factored && variant != SlabVariant::r16 && fits(once) && blocks_per_sm(once) >= blocks_per_sm(per_row);
        return whole || fits(per_row);
    };
    bool whole = false;
    if (slab_pitch(16, halo) != 0 && choose(16, 10, 10, fits4, whole))
        return configure_slab_pitch<kForward, 16, 8, 10>(lut, factored, halo, vec, whole, bytes(16, 10, 10, whole), max_block, c);
    if (slab_pitch(32, halo) != 0) {
        if (choose(32, 6, 6, fits4, whole))
            return configure_slab_pitch<kForward, 32, 4, 6>(lut, factored, halo, vec, whole, bytes(32, 6, 6, whole), max_block, c);
        if (choose(32, 5, 6, fits1, whole))
            return configure_slab_pitch<kForward, 32, 4, 5>(lut, factored, halo, vec, whole, bytes(32, 5, 6, whole), max_block, c);
    }
    c.columns = true;
}

template <bool kForward>
void launch_slab(const float* src, float* dst, const DeviceLut& lut, SlabVariant variant, cudaStream_t stream) {
    SlabLaunch& c = lut.slab_launch(kForward, variant);
    if (!c.ready) {
        configure_slab_launch<kForward>(lut, variant, c);
        c.ready = true;
    }
    if (c.columns) return launch_columns<kForward, 16>(src, dst, lut, stream);
    const Dims d = lut.dims();
    if (c.row_split > 0)  // the two halves of each tile add into a zeroed output
        DP_CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(float) * d.nz * d.ny * d.nx, stream));
    // float4 copies need a 16-byte aligned source; an offset pointer falls back to element copies of
    // the same (rounded) halo.
    const bool vec = c.vec && reinterpret_cast<uintptr_t>(src) % 16 == 0;
    const auto kernel = reinterpret_cast<SlabKernel>(const_cast<void*>(c.kernel));
    kernel<<<dim3(c.grid[0], c.grid[1], c.grid[2]), dim3(c.block[0], c.block[1], c.block[2]), c.bytes, stream>>>(
        src, dst, d, column_plan(kForward, lut, c.factored), c.halo, lut.z_lo(), lut.z_span() + kSlabRun - 1,
        lut.max_row_groups(), lut.max_row_taps(), c.row_split, vec, c.whole_plan_groups);
    DP_CUDA_CHECK_LAUNCH("direct slab_kernel");
}

}  // namespace

void launch_columns(bool forward, const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream) {
    if (forward)
        launch_columns<true, 16>(src, dst, lut, stream);
    else
        launch_columns<false, 16>(src, dst, lut, stream);
}

void launch_slab(bool forward, SlabVariant variant, const float* src, float* dst, const DeviceLut& lut,
                 cudaStream_t stream) {
    if (forward)
        launch_slab<true>(src, dst, lut, variant, stream);
    else
        launch_slab<false>(src, dst, lut, variant, stream);
}

}  // namespace dp::direct::gpu::detail
