// Dual-head projectors on the GPU: the default tiled pair (the paper's algorithms are in cuda_paper.cu,
// the resident model and the dispatch in cuda_model.cu).
//
// default (tiles.hpp for the arithmetic)
//   The image is first rearranged into the polyphase layout X[p][r_y][r_z][c_y][c_z] (r = voxel
//   index mod D within its crystal cell, c = cell). A class, sign and plane is then a strided 2D
//   correlation: LOR (i, j) reads cell (i + q_y, j + q_z) of residue plane (r_y, r_z) per tap.
//   forward: a block owns 2048 consecutive padded shift positions of one signed orientation (rows of
//     pos_z LORs and g padding positions, g the class's widest box in q_z: tiles.hpp; 8 per thread,
//     256 threads; warps of 32 consecutive positions) and walks the planes. Per step (plane p,
//     residue r_z) it stages the D residue planes r_y of the image window its LORs reach (cp.async,
//     double buffered) and decodes that step's taps (mirrored for the sign) into window offsets;
//     each thread then accumulates its 8 LORs with one shared load and one FMA per tap and LOR, the
//     taps being block-uniform (broadcast). The window's rows lie `pitch` apart, as the padded
//     positions do: a thread's 8 LORs sit at fixed distances in it (one address per tap, the rounds
//     immediate offsets) and a warp's 32 LORs read 32 consecutive words. LORs whose skip value is 0 get 0; warps (and
//     blocks) whose LORs are all skipped do no work. The planes are split into groups (image slices of
//     at most ~24 MB) that keep the slice the running blocks read in L2; one launch holds every group's
//     blocks, group-major, and the last block of a tile to finish adds the groups' sums into y in plane
//     order (a launch per group ended on as many partly filled waves: benchmarks/RESULTS.md section 14r).
//   back: a gather, no atomics: a warp (a block of its own) owns one unit of 16 x 8 image cells of one
//     plane (tiles.hpp: four warp tiles of 4 x 8 cells, one per round), each lane one cell per round
//     with one accumulator per voxel residue of the cell (D x D, up to 16; larger D loops over residue
//     chunks in the grid: 64 accumulators). The model is used as per-row lists of distinct cell offsets
//     q with the dense D x D weights of that cell: every tap of one q brings the same LOR value to the
//     cell, so one shared load feeds up to 16 FMAs. The warp walks the (class, sign) steps that reach
//     its unit, without waiting for any other warp; per step it stages (one step ahead, asynchronous
//     copies) the LOR values its cells reach (zero outside the orientation's positions) and the q list
//     (weights mirrored for the sign), and applies every q to every tile the step reaches (the zeros of
//     the window stand for the LORs it does not have). The blocks start heaviest first (a cost per block
//     from the steps that reach it, sorted on the device; DeviceModel::back_heavy_first, on by default),
//     so that a launch does not end on a few long blocks. The polyphase result is rearranged into the image.
//   Windows too large for shared memory (very wide patches on very large heads) fall back to kernels
//   that read the polyphase image / the LOR values from global memory with the same offsets.
//
// Floor (per full projection; M multiply-adds = sum over LORs of their taps over all planes):
//   forward: per tap and warp half a 16-byte broadcast load (two taps) + 8 shared loads (+1 IADD,
//     8 FMA) for 8 x 32 MACs: bound by shared-memory bandwidth (one warp-wide load per SM and clock) at
//     4.25 / 128 loads per MAC (4 / 128 for any kernel that loads each LOR's value per tap; the
//     benchmark's floor keeps the 4-round kernel's 4.5 / 128), times the padding positions' work
//     (~1.23 on the full-size model); plus the image windows from L2: at least D^2 floats per LOR and
//     plane with taps (halo 1.3-1.6x on top).
//   back: 16 FMAs per shared LOR load (plus 5 broadcast loads per q for 4 cells): FMA-bound on
//     M_dense = sum over LORs and planes of (distinct q) x D^2 = M / fill (fill = taps / (16 q), ~0.55
//     for physical patches), times the edge work of tiles that a q only partly reaches (~1.3x).
//   benchmarks/dualhead_projectors.py prints the counts and the fractions reached.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../common/window_walk.hpp"
#include "cuda_internal.cuh"

namespace dp::dualhead::gpu::detail {

namespace {

// --- layout rearrangements ----------------------------------------------------------------------------
// X[p][r_y][r_z][c_y][c_z] <-> image[v_z][v_y][p] through a 32 (p) x 32 (v_z) shared tile per v_y: the
// image side is read / written along p, the polyphase side along c_z (both coalesced). kToPoly: image
// -> X; else X -> image (the inverse).
template <bool kToPoly>
__global__ void __launch_bounds__(256) polyphase_kernel(const Layout L, const float* __restrict__ src,
                                                         float* __restrict__ dst) {
    __shared__ float tile[32][33];
    const int vy = blockIdx.z, p0 = blockIdx.x * 32, vz0 = blockIdx.y * 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int NY = L.image_ny(), NZ = L.image_nz(), P = L.n_planes, D = L.D;
    const int cy = vy / D, ry = vy - cy * D;
    const int64_t nyz = int64_t(L.n_y) * L.n_z;
    auto image_at = [&](int vz, int p) { return (int64_t(vz) * NY + vy) * P + p; };
    auto poly_at = [&](int vz, int p) {
        const int cz = vz / D, rz = vz - cz * D;
        return ((int64_t(p) * D + ry) * D + rz) * nyz + int64_t(cy) * L.n_z + cz;
    };
    for (int r = ty; r < 32; r += 8) {           // load: the image along p, or X along c_z
        if (kToPoly) {
            const int vz = vz0 + r, p = p0 + tx;
            if (vz < NZ && p < P) tile[r][tx] = src[image_at(vz, p)];
        } else {
            const int p = p0 + r, vz = vz0 + tx;
            if (vz < NZ && p < P) tile[tx][r] = src[poly_at(vz, p)];
        }
    }
    __syncthreads();
    for (int r = ty; r < 32; r += 8) {           // store: the other side
        if (kToPoly) {
            const int p = p0 + r, vz = vz0 + tx;
            if (vz < NZ && p < P) dst[poly_at(vz, p)] = tile[tx][r];
        } else {
            const int vz = vz0 + r, p = p0 + tx;
            if (vz < NZ && p < P) dst[image_at(vz, p)] = tile[r][tx];
        }
    }
}

// --- default forward ---------------------------------------------------------------------------------
// floor(a / b) for 0 <= a < 2^16 and b >= 1 through the float reciprocal: (a + 1/2) / b lies at least
// 1 / (2 b) from an integer, far beyond the few-ulp error of __fdividef at these sizes (the integer
// division costs ~20 instructions).
__device__ __forceinline__ int quotient_of(int a, int b) { return __float2int_rz(__fdividef(float(a) + 0.5f, float(b))); }

// A 4-byte asynchronous copy to a shared-memory address (the window walk carries it as 32 bits).
__device__ __forceinline__ void copy4_async(unsigned dst_shared, const char* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst_shared), "l"(src) : "memory");
}

// Shared memory: plane metadata (row start, box, r_z group starts), decoded taps [2][kTapStride], windows [2][win_cap].
// A tap buffer holds kTapCap taps and one pair of padding, which the tap loop reads (and does not use)
// when it loads the pair after a step's last one.
constexpr int kTapStride = kTapCap + 2;
// Blocks per SM the forward is built for (registers) and its small windows are sized for (shared memory).
constexpr int kFwdBlocksPerSm = 2;
struct FwdSmem {
    size_t box, rzg, tap, win, total;
};

__host__ __device__ inline FwdSmem fwd_smem(int n_planes, int D, int win_cap) {
    FwdSmem s;
    s.box = size_t(8) * n_planes;
    s.rzg = s.box + size_t(8) * n_planes;
    s.tap = align16(s.rzg + size_t(4) * n_planes * (D + 1));
    s.win = s.tap + size_t(8) * 2 * kTapStride;
    s.total = s.win + size_t(4) * 2 * win_cap;
    return s;
}

// The forward's inner loop: taps (byte offset, weight) in pairs (one 16-byte broadcast load), each
// added to the thread's rounds. kRounds: the active rounds as a compile-time mask (no predicates, no
// instructions for the others); 0: `rounds` says which, at run time (predicated instructions, which
// issue for every round).
// wb: the thread's round-0 LOR in the window (bytes); round r lies r kThreads floats further.
template <unsigned kRounds>
__device__ __forceinline__ void fwd_taps(const int2* __restrict__ dt, int nt, const char* wb,
                                         float (&acc)[kFwdRounds], unsigned rounds = kRounds) {
    auto one = [&](int off, float w) {
        const float* a = reinterpret_cast<const float*>(wb + off);
#pragma unroll
        for (int r = 0; r < kFwdRounds; ++r)
            if (kRounds != 0 ? ((kRounds >> r) & 1u) != 0 : (rounds & (1u << r)) != 0)
                acc[r] = fmaf(w, a[r * kThreads], acc[r]);
    };
    // The next pair's broadcast load is issued a pair ahead, so that its latency (a shared load,
    // ~30 cycles) overlaps this pair's loads and FMAs instead of stalling the pair's first address
    // add. The last iteration reads the pair after the step's taps, unused: a stale pair of the same
    // buffer, or its padding (kTapStride). The sums are the same additions in the same order.
    const int4* d4 = reinterpret_cast<const int4*>(dt);
    const int n_pairs = nt >> 1;
    int4 d = d4[0];
#pragma unroll 2
    for (int p = 0; p < n_pairs; ++p) {
        const int4 next = d4[p + 1];
        one(d.x, __int_as_float(d.y));
        one(d.z, __int_as_float(d.w));
        d = next;
    }
    if (nt & 1) {
        const int2 e = dt[nt - 1];
        one(e.x, __int_as_float(e.y));
    }
}

// The tap loop for the warp's `rounds`: a prefix 0 .. n-1 of them (the usual case: a class-sign's last
// tile ends after round n - 1 in its warps, and narrow classes' tiles hold fewer LORs) gets a loop
// without predicates; any other mask (skipped LORs) the predicated loop.
template <int kN = kFwdRounds>
__device__ __forceinline__ void fwd_taps_of(unsigned rounds, const int2* __restrict__ dt, int nt, const char* wb,
                                            float (&acc)[kFwdRounds]) {
    if constexpr (kN == 0) {
        fwd_taps<0>(dt, nt, wb, acc, rounds);
    } else {
        constexpr unsigned kPrefix = (1u << kN) - 1u;
        if (rounds == kPrefix) fwd_taps<kPrefix>(dt, nt, wb, acc);
        else fwd_taps_of<kN - 1>(rounds, dt, nt, wb, acc);
    }
}

template <bool kStaged>
__global__ void __launch_bounds__(kThreads, kFwdBlocksPerSm)
fwd_default_kernel(const __grid_constant__ FwdLaunch P, const float* __restrict__ X, const DTap* __restrict__ taps,
                   const int64_t* __restrict__ row_start, const int* __restrict__ rzg, const short4* __restrict__ boxes,
                   const float* __restrict__ skip, float* __restrict__ y, float* __restrict__ partial,
                   unsigned* __restrict__ tile_done) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Layout L = P.L;
    const int D = L.D;
    const int tid = threadIdx.x;

    // plane group (group-major), class, sign and tile of this block
    const int n_tiles = P.first_block[P.n_entries];   // blocks per plane group
    const int grp = static_cast<int>(blockIdx.x) / n_tiles;
    const int b = static_cast<int>(blockIdx.x) - grp * n_tiles;
    const int p_begin = (P.group0 + grp) * P.per, np = min(P.per, L.n_planes - p_begin);
    const int e = find_entry(P.first_block, P.n_entries, b);
    const int k = P.k[e];
    const ClassInfo c = class_info(L, k);
    const int npos = c.pos_y * c.pos_z, pitch = P.pitch[e];
    const int ntiles = fwd_tiles(c.pos_y, pitch, P.lpb);
    const int local = b - P.first_block[e];
    const int s = local / ntiles;
    const FwdTile T = fwd_tile(c.pos_y, pitch, local - s * ntiles, P.lpb);
    int s_y, s_z;
    class_sign(c, s, s_y, s_z);
    const int Wy = D * (c.a_y + 1), Wz = D * (c.a_z + 1);
    const int64_t lor0 = P.out[e] + int64_t(s) * npos;

    // this thread's padded positions f = f0 + r * kThreads + tid: LOR (li, lj) of the sign, index
    // lor = li pos_z + lj, or lor = -1 for padding and positions past the tile (which sit on the
    // tile's first row, column 0, for the global-memory kernel's reads)
    int li[kFwdRounds], lj[kFwdRounds], lor[kFwdRounds];
    bool on[kFwdRounds];
    unsigned rounds = 0;   // warp-uniform: rounds with at least one projected LOR
#pragma unroll
    for (int r = 0; r < kFwdRounds; ++r) {
        const int f = T.f0 + r * kThreads + tid, i = f / pitch, j = f - i * pitch;
        const bool real = f < T.f1 && j < c.pos_z;
        li[r] = real ? i : T.i_a;
        lj[r] = real ? j : 0;
        lor[r] = real ? i * c.pos_z + j : -1;
        on[r] = real && (skip == nullptr || skip[lor0 + lor[r]] != 0.0f);
        if (__any_sync(0xffffffffu, on[r])) rounds |= 1u << r;
    }
    if (!__syncthreads_or(rounds != 0)) {   // every LOR of the block skipped (in every plane group alike)
        if (!P.accumulate && grp == 0)
#pragma unroll
            for (int r = 0; r < kFwdRounds; ++r)
                if (lor[r] >= 0) y[lor0 + lor[r]] = 0.0f;
        return;
    }

    // plane metadata of this class for the launch's planes
    int64_t* m_row = reinterpret_cast<int64_t*>(smem);
    const FwdSmem S = fwd_smem(np, D, P.win_cap);
    short4* m_box = reinterpret_cast<short4*>(smem + S.box);
    int* m_rzg = reinterpret_cast<int*>(smem + S.rzg);   // [np][D + 1]: start of the taps with r_z = 0..D
    int2* dtap = reinterpret_cast<int2*>(smem + S.tap);
    float* win = reinterpret_cast<float*>(smem + S.win);
    const int64_t row0 = int64_t(k) * L.n_planes + p_begin;
    for (int pi = tid; pi < np; pi += kThreads) {
        m_row[pi] = row_start[row0 + pi];
        m_box[pi] = boxes[row0 + pi];
    }
    for (int q = tid; q < np * (D + 1); q += kThreads) m_rzg[q] = rzg[row0 * (D + 1) + q];
    __syncthreads();

    // steps: (plane pi, signed residue rz, taps [t, t + nt) of the row), non-empty ones only
    struct Step {
        int pi, rz, t, nt;
    };
    auto range = [&](int pi, int rz, int& a, int& bnd) {
        const int rzm = s_z > 0 ? rz : D - 1 - rz;
        a = m_rzg[pi * (D + 1) + rzm];
        bnd = m_rzg[pi * (D + 1) + rzm + 1];
    };
    auto advance = [&](Step st) -> Step {
        int pi = st.pi, rz = st.rz, t = st.t + st.nt, a, bnd;
        if (pi < 0) {
            pi = 0;
            rz = 0;
            range(0, 0, a, bnd);
            t = a;
        }
        for (;;) {
            range(pi, rz, a, bnd);
            if (t < bnd) return Step{pi, rz, t, min(kTapCap, bnd - t)};
            if (++rz == D) {
                rz = 0;
                if (++pi == np) return Step{np, 0, 0, 0};
            }
            range(pi, rz, a, bnd);
            t = a;
        }
    };
    const int64_t nyz = int64_t(L.n_y) * L.n_z;
    auto window_of = [&](const Step& st) -> Window {
        if constexpr (!kStaged) return fwd_global_window(L);
        const short4 bx = m_box[st.pi];
        return fwd_window(T, signed_box(Box{bx.x, bx.y, bx.z, bx.w}, c.a_y, c.a_z, s_y, s_z), c.pos_z, pitch,
                          P.plane[e]);
    };
    // the step's residue planes r_y = 0 .. D-1 at (p, r_z), from X
    auto plane_ptr = [&](const Step& st) { return X + (int64_t(p_begin + st.pi) * D * D + st.rz) * nyz; };
    // The window is copied with a flattened walk: thread tid takes elements tid, tid + kThreads, ... of the
    // row-major window (every thread busy on every copy) and copies each element's D residue planes
    // r_y. D = 4 (the scanners' crystals of 4 voxels) carries its source pointer and shared-memory
    // destination from one element to the next, in bytes, with the four planes at fixed strides: a
    // few adds per element besides its four copies. (With offsets carried in elements, ptxas rebuilt
    // both addresses per element and copy: 49 instructions per element, a quarter of the kernel's, in
    // the profile of a866790, benchmarks/RESULTS.md section 14j.) Other D use the general walk of
    // common/window_walk.hpp, a copy per r_y.
    const int ry_stride = int(int64_t(D) * nyz);   // X's r_y stride: D x n_y x n_z cells, far below 2^31
    auto stage = [&](const Step& st, const Window& w, int buf) {
        if constexpr (kStaged) {
            const float* src0 = plane_ptr(st) + int64_t(w.i_ref + w.y_ref) * L.n_z + w.z_ref;
            float* dst0 = win + buf * P.win_cap;
            const int plane = w.plane;
            if (D == 4) {
                const int cols = w.cols, n = w.rows * cols;
                // the walk's start and step: (row, col) of element tid, and the rows and columns a step of
                // kThreads elements moves (small quotients, exact through the float reciprocal: quotient_of)
                const int row0 = quotient_of(tid, cols), drow = quotient_of(kThreads, cols);
                int col = tid - row0 * cols;
                const int dcol = kThreads - drow * cols;
                const char* src = reinterpret_cast<const char*>(src0 + (int64_t(row0) * L.n_z + col));
                const unsigned dst0_s = static_cast<unsigned>(__cvta_generic_to_shared(dst0));
                unsigned dst = dst0_s + 4u * unsigned(row0 * w.pitch + col);
                const int64_t s_step = 4 * (int64_t(drow) * L.n_z + dcol), s_wrap = 4 * int64_t(L.n_z - cols);
                const unsigned d_step = 4u * unsigned(drow * w.pitch + dcol), d_wrap = 4u * unsigned(w.pitch - cols);
                const int64_t s_ry = 4 * int64_t(ry_stride);
                const unsigned d_ry = 4u * unsigned(plane);
                for (int e = tid; e < n; e += kThreads) {
                    copy4_async(dst, src);
                    copy4_async(dst + d_ry, src + s_ry);
                    copy4_async(dst + 2 * d_ry, src + 2 * s_ry);
                    copy4_async(dst + 3 * d_ry, src + 3 * s_ry);
                    col += dcol;
                    src += s_step;
                    dst += d_step;
                    if (col >= cols) {
                        col -= cols;
                        src += s_wrap;
                        dst += d_wrap;
                    }
                }
            } else {
                for_each_window_cell<kThreads>(tid, w.rows, w.cols, L.n_z, w.pitch, [&](int, int, int s_off, int d_off) {
                    const float* src = src0 + s_off;
                    float* dst = dst0 + d_off;
#pragma unroll 1
                    for (int ry = 0; ry < D; ++ry, src += ry_stride, dst += plane) __pipeline_memcpy_async(dst, src, 4);
                });
            }
        }
        __pipeline_commit();
    };
    // The next step's taps, loaded before this step's tap loop and decoded after it. They are kept as
    // loaded (DTap's 8 bytes as an int2: x = dy | dz << 16, y = w's bits): unpacking the 16-bit fields
    // at the load made the loading warps wait for it before their tap loop (the profile of 0ce29f7).
    static_assert(offsetof(DTap, dz) == 2 && offsetof(DTap, w) == 4, "DTap read as an int2 (little-endian)");
    constexpr int kTapsPerThread = kTapCap / kThreads;
    static_assert(kTapCap % kThreads == 0, "whole taps per thread");
    int2 pre[kTapsPerThread];
    auto prefetch = [&](const Step& st) {
        const int2* src = reinterpret_cast<const int2*>(taps) + (m_row[st.pi] + st.t);
#pragma unroll
        for (int q = 0; q < kTapsPerThread; ++q)
            if (tid + q * kThreads < st.nt) pre[q] = __ldg(src + tid + q * kThreads);
    };
    // a signed voxel offset (>= 0) in cells: a shift for D = 4 (the scanners' crystals of 4 voxels),
    // where the integer division costs ~25 instructions on the path to the step's barrier
    auto cells_of = [&](int e) { return D == 4 ? (e >> 2) : e / D; };
    auto decode = [&](const Step& st, const Window& w, int buf) {
        int2* dst = dtap + buf * kTapStride;
#pragma unroll
        for (int q = 0; q < kTapsPerThread; ++q) {
            const int t = tid + q * kThreads;
            if (t < st.nt) {
                const int dy = static_cast<int16_t>(pre[q].x), dz = pre[q].x >> 16;   // DTap's int16 fields
                const int ey = signed_offset(dy, Wy, s_y), qy = cells_of(ey), ry = ey - qy * D;
                const int qz = cells_of(signed_offset(dz, Wz, s_z));
                const int off = fwd_tap_offset(w, ry, qy, qz);
                dst[t] = make_int2(kStaged ? off * int(sizeof(float)) : off, pre[q].y);
            }
        }
    };

    float acc[kFwdRounds];
#pragma unroll
    for (int r = 0; r < kFwdRounds; ++r) acc[r] = 0.0f;
    Step cur = advance(Step{-1, 0, 0, 0});
    if (cur.pi < np) {
        Window wc = window_of(cur);
        stage(cur, wc, 0);
        prefetch(cur);
        decode(cur, wc, 0);
        __pipeline_wait_prior(0);
        __syncthreads();
        int buf = 0;
        for (;;) {
            const Step nxt = advance(cur);
            const bool more = nxt.pi < np;
            Window wn = wc;
            if (more) {
                wn = window_of(nxt);
                stage(nxt, wn, buf ^ 1);
                prefetch(nxt);
            }
            const int2* dt = dtap + buf * kTapStride;
            if (rounds == 0) {
                // every LOR of this warp skipped: nothing to accumulate
            } else if constexpr (kStaged) {
                // round 0's position in the window, whose origin is padded position i_a pitch (the
                // positions are linear in it); the taps' offsets are decoded in bytes
                const int base0 = (T.f0 - T.i_a * pitch) + tid;
                fwd_taps_of(rounds, dt, cur.nt, reinterpret_cast<const char*>(win + buf * P.win_cap + base0), acc);
            } else {
                int base[kFwdRounds];
#pragma unroll
                for (int r = 0; r < kFwdRounds; ++r) base[r] = fwd_lor_base(wc, li[r], lj[r]);
                const float* W = plane_ptr(cur);
                for (int t = 0; t < cur.nt; ++t) {
                    const int2 d = dt[t];
                    const float w = __int_as_float(d.y);
#pragma unroll
                    for (int r = 0; r < kFwdRounds; ++r)
                        if (rounds & (1u << r)) acc[r] = fmaf(w, __ldg(W + base[r] + d.x), acc[r]);
                }
            }
            if (!more) break;
            decode(nxt, wn, buf ^ 1);
            __pipeline_wait_prior(0);
            __syncthreads();
            cur = nxt;
            wc = wn;
            buf ^= 1;
        }
    }
    if (P.n_groups == 1) {
#pragma unroll
        for (int r = 0; r < kFwdRounds; ++r)
            if (lor[r] >= 0) {
                const int64_t o = lor0 + lor[r];
                const float v = on[r] ? acc[r] : 0.0f;
                y[o] = P.accumulate ? y[o] + v : v;
            }
        return;
    }
    // Several plane groups: each block leaves its tile's sums in the workspace (slot (group, tile), the
    // thread's positions r kThreads + tid < lpb), and the tile's last block to finish adds them into y
    // group by group, in the order that one launch per group adds them (the same floats). The fence
    // orders each thread's stores before the counter's increment (the pattern of the CUDA samples'
    // threadFenceReduction); the last block reads the sums through L2 (__ldcg), not from L1.
    float* mine = partial + (int64_t(grp) * n_tiles + b) * P.lpb;
#pragma unroll
    for (int r = 0; r < kFwdRounds; ++r)
        if (lor[r] >= 0) mine[r * kThreads + tid] = on[r] ? acc[r] : 0.0f;
    __threadfence();
    __syncthreads();
    // (no static shared flag: the kernel's opt-in limit is set for its dynamic shared memory alone)
    const bool last = tid == 0 && atomicAdd(tile_done + b, 1u) == static_cast<unsigned>(P.n_groups - 1);
    if (!__syncthreads_or(last)) return;
    __threadfence();
    const int64_t slot = int64_t(n_tiles) * P.lpb;
#pragma unroll
    for (int r = 0; r < kFwdRounds; ++r)
        if (lor[r] >= 0) {
            const int64_t o = lor0 + lor[r];
            const float* part = partial + int64_t(b) * P.lpb + r * kThreads + tid;
            float v = P.accumulate ? y[o] + __ldcg(part) : __ldcg(part);
            for (int g = 1; g < P.n_groups; ++g) v += __ldcg(part + g * slot);
            y[o] = v;
        }
}

// --- default back projection -------------------------------------------------------------------------
// The model for the back projection: per row, its distinct cell offsets q = (d_y / D, d_z / D) with the
// weights of all D^2 voxel residues of that cell (zero where the patch has no tap). Every tap of one q
// brings the same LOR value to the cell, so one shared load of it feeds up to 16 FMAs.
//
// A block is one warp and owns one unit (tiles.hpp: 16 x 8 cells) of one plane, for one chunk of
// kGroups voxel residues. It walks the launch's (class, sign) pairs in order and takes those that
// reach its unit (32 pairs tested at a time, one per lane; the hits taken from the ballot). Per step
// it stages, with asynchronous copies one step ahead, the LOR values its cells reach (zero outside
// the orientation's positions), the step's q's and their weights (mirrored for the sign); then each
// lane adds, per q and round (the unit's 4 warp tiles), one LOR value times its 16 residue weights.
// Warps never wait for each other: the per-step block barrier of the former 8-warp blocks held 28 %
// of the stall samples (benchmarks/RESULTS.md section 14d), since a step reaches the tiles of a block
// unevenly.
//
// Shared memory of the warp: q weights [2][kQCap][kGroups], q's [2][kQCap] (packed as stored, then
// decoded in place into byte offsets in the LOR window, or signed packed q's for the global-memory
// variant), LOR windows [2][y_cap].
struct BackSmem {
    size_t qw, qd, win, total;
};

__host__ __device__ inline BackSmem back_smem(int y_cap) {
    BackSmem s;
    s.qw = 0;
    s.qd = s.qw + size_t(4) * 2 * kQCap * kGroups;
    s.win = s.qd + size_t(4) * 2 * kQCap;
    s.total = s.win + size_t(4) * 2 * y_cap;
    return s;
}

// A back step: the cell offsets [t, t + nt) of the row of (class entry e, sign slot s) at this plane,
// whose offsets start at q0 (cnt of them) and whose (+,+) box is box (short4 as two ints; a short4 member
// compiled to more spills, ptxas sm_90). No step: e = n_entries, cnt = 0.
struct BackStep {
    int e, s, t, nt, cnt;
    long long q0;
    int2 box;
};

// Launch entry e's class, its row at plane p, and a row's (+,+) box mirrored for sign slot s (the signs in
// s_y, s_z): the decoding that the back kernel's walk, staging and compute and the blocks' costs share.
// L is P.L. The back kernel reads it from the parameter block too: a local copy of the layout compiled
// the hot kernel to a 20-byte spill (ptxas, sm_90), and without it the full iteration's back projection
// went from 289.0 to 280.5 ms on an H200 (benchmarks/RESULTS.md section 14p).
__device__ __forceinline__ ClassInfo back_class(const Layout& L, const BackLaunch& P, int e) {
    return class_info_of(L, P.cls[e] >> 16, P.cls[e] & 0xffff);
}
__device__ __forceinline__ int64_t back_row(const Layout& L, const BackLaunch& P, int e, int p) {
    return int64_t(P.k[e]) * L.n_planes + p;
}
__device__ __forceinline__ Box back_signed_box(const ClassInfo& c, int s, short4 bx, int& s_y, int& s_z) {
    class_sign(c, s, s_y, s_z);
    return signed_box(Box{bx.x, bx.y, bx.z, bx.w}, c.a_y, c.a_z, s_y, s_z);
}
__device__ __forceinline__ Box back_signed_box(const ClassInfo& c, int s, int2 packed, int& s_y, int& s_z) {
    return back_signed_box(c, s, *reinterpret_cast<const short4*>(&packed), s_y, s_z);
}

// Whether the back step of (entry e, sign slot s) at plane p has cell offsets and reaches unit U; cnt: its
// row's offset count. The walk of back_default_kernel and the blocks' costs (back_block_cost_kernel) test
// the same way.
__device__ __forceinline__ bool back_step_reaches(const BackLaunch& P, const int64_t* __restrict__ q_start,
                                                  const short4* __restrict__ boxes, int e, int s, int p,
                                                  const BackUnit& U, int& cnt) {
    const ClassInfo c = back_class(P.L, P, e);
    cnt = 0;
    if (s >= c.n_signs) return false;
    const int64_t row = back_row(P.L, P, e, p);
    cnt = static_cast<int>(q_start[row + 1] - q_start[row]);
    int s_y, s_z;
    const Box sb = back_signed_box(c, s, boxes[row], s_y, s_z);
    return cnt > 0 && back_reaches(sb, c.pos_y, c.pos_z, U.cy_a, U.cy_b, U.cz_a, U.cz_b);
}

// The back projection's blocks, heaviest first. A launch's blocks (unit, plane) differ in work by the
// steps that reach them, and the GPU starts blocks in index order, plane by plane. In that order the 72
// subsets' launches kept their SMs active 93.6 % of the elapsed cycles, with 12.4 of the 16 possible warps
// per SM on average (benchmarks/RESULTS.md section 14n): the launches ended on few blocks (which blocks ran
// last was not measured). Each block's cost is estimated from the steps that reach it,
// kBackStepCost + its q's per step (a step's set-up costs about as many instructions as 8 q's over
// four rounds, section 14m), and the blocks are started in decreasing cost (longest first): SMs active
// 98.0 %, 14.3 resident warps, the full iteration's back projection 313.9 -> 289.0 ms on an H200 (same
// build, section 14n).
constexpr unsigned kBackStepCost = 8;

__global__ void __launch_bounds__(256)
back_block_cost_kernel(const __grid_constant__ BackLaunch P, int n_units, const int64_t* __restrict__ q_start,
                       const short4* __restrict__ boxes, unsigned* __restrict__ cost, int* __restrict__ block) {
    // an int in practice: back_default keeps n_units * n_planes below 2^31, and Xb holds 2^11 floats per
    // block (a launch of 2^31 blocks would need 16 TB)
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_units * P.L.n_planes) return;
    const int p = b / n_units;
    const BackUnit U = back_unit(back_units(P.L.n_y, P.L.n_z), P.L.n_y, P.L.n_z, b - p * n_units);
    unsigned c = 0;
    for (int e = 0; e < P.n_entries; ++e)
        for (int s = 0; s < 4; ++s) {
            int cnt;
            if (back_step_reaches(P, q_start, boxes, e, s, p, U, cnt))
                c += kBackStepCost * static_cast<unsigned>((cnt + kQCap - 1) / kQCap) + static_cast<unsigned>(cnt);
        }
    cost[b] = c;
    block[b] = b;
}

// kStaged: LOR windows in shared memory (else read from y with bounds tests); kFull: the chunk has all
// kGroups residues (D = 4, or the full chunks of larger D)
template <bool kStaged, bool kFull>
__global__ void __launch_bounds__(32, 16)
back_default_kernel(const __grid_constant__ BackLaunch P, int chunk0, const float* __restrict__ y,
                    const int64_t* __restrict__ q_start, const int* __restrict__ q_pos, const float* __restrict__ q_w,
                    const short4* __restrict__ boxes, const int* __restrict__ order, float* __restrict__ Xb) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Layout& L = P.L;   // from the parameter block, not a local copy: see back_class
    const int D = L.D, D2 = D * D;
    const int lane = threadIdx.x;
    // block (unit, plane) = order[blockIdx.x] (heaviest first) or blockIdx.x, unit fastest
    const BackUnits G = back_units(L.n_y, L.n_z);
    const int b = order ? order[blockIdx.x] : static_cast<int>(blockIdx.x);
    const int p = b / G.n_units;
    const BackUnit U = back_unit(G, L.n_y, L.n_z, b - p * G.n_units);
    const int g0 = (chunk0 + blockIdx.y) * kGroups, ng = kFull ? kGroups : min(kGroups, D2 - g0);
    const BackSmem S = back_smem(P.y_cap);
    float* qwt = reinterpret_cast<float*>(smem + S.qw);   // [2][kQCap][kGroups]
    int* qdec = reinterpret_cast<int*>(smem + S.qd);       // [2][kQCap]
    float* ywin = reinterpret_cast<float*>(smem + S.win);  // [2][y_cap]

    // The walk over the pairs idx = 4 e + s: each lane tests one pair of the batch [cand - 32, cand); the
    // warp takes the hits from the ballot in order and reads the hit's row again (uniform loads, cached),
    // which keeps no per-lane state but the ballot live through the steps.
    const int n_cand = 4 * P.n_entries;
    int cand = 0;
    unsigned hits = 0;
    auto test_batch = [&]() {
        const int idx = cand + lane;
        bool ok = false;
        if (idx < n_cand) {
            int cnt;
            ok = back_step_reaches(P, q_start, boxes, idx >> 2, idx & 3, p, U, cnt);
        }
        hits = __ballot_sync(0xffffffffu, ok);
        cand += 32;
    };
    auto advance = [&](BackStep st) -> BackStep {
        if (st.t + st.nt < st.cnt) {   // the row's next chunk of offsets
            st.t += st.nt;
            st.nt = min(kQCap, st.cnt - st.t);
            return st;
        }
        while (hits == 0) {
            if (cand >= n_cand) return BackStep{P.n_entries, 0, 0, 0, 0, 0, make_int2(0, 0)};
            test_batch();
        }
        const int idx = cand - 32 + __ffs(hits) - 1;
        hits &= hits - 1;
        BackStep n;
        n.e = idx >> 2;
        n.s = idx & 3;
        n.t = 0;
        const int64_t row = back_row(L, P, n.e, p);
        n.q0 = q_start[row];
        n.cnt = static_cast<int>(q_start[row + 1] - n.q0);
        n.box = *reinterpret_cast<const int2*>(boxes + row);
        n.nt = min(kQCap, n.cnt);
        return n;
    };

    // LOR window (zero outside the orientation's positions), the q's and their weights of the chunk's
    // voxel residues, mirrored for the sign (voxel residue (r_y, r_z) <- model residue of the mirrored cell)
    auto stage = [&](const BackStep& st, int buf) {
        const ClassInfo c = back_class(L, P, st.e);
        int s_y, s_z;
        const Box sb = back_signed_box(c, st.s, st.box, s_y, s_z);
        if constexpr (kStaged) {
            // Row by row: a half-warp per row when the window is at most 16 columns wide (else the
            // whole warp, in column chunks of 32). A lane keeps its column; the rows holding valid LORs
            // [r_lo, r_hi) are found once, so the copy loop has no test and a compile-time step (the
            // compiler unrolls it), and the zero rows above and below are stored apart. (The flattened
            // walk cost ~30 instructions per element at 54cf8db, a row loop with a test per element 18
            // at 77e02b3.)
            const LorWindow w = back_window(U, sb);
            const float* y0 = y + P.in[st.e] + int64_t(st.s) * c.pos_y * c.pos_z + (int64_t(w.i_org) * c.pos_z + w.j_org);
            const int r_lo = min(max(0, -w.i_org), w.rows), r_hi = min(w.rows, c.pos_y - w.i_org);
            float* win0 = ywin + buf * P.y_cap;
            auto copy_rows = [&](auto row_step) {
                constexpr int kStep = decltype(row_step)::value, kLanes = 32 / kStep;
                for (int c0 = 0; c0 < w.cols; c0 += kLanes) {
                    const int col = c0 + lane % kLanes;
                    if (col >= w.cols) continue;
                    float* dst = win0 + col;
                    int row = lane / kLanes;
                    if (unsigned(w.j_org + col) < unsigned(c.pos_z)) {
                        for (; row < r_lo; row += kStep) dst[row * w.pitch] = 0.0f;
                        const float* src = y0 + int64_t(row) * c.pos_z + col;
                        const int64_t src_step = int64_t(kStep) * c.pos_z;
#pragma unroll 4
                        for (; row < r_hi; row += kStep, src += src_step) __pipeline_memcpy_async(dst + row * w.pitch, src, 4);
                    }
                    for (; row < w.rows; row += kStep) dst[row * w.pitch] = 0.0f;
                }
            };
            if (w.cols <= 16) copy_rows(std::integral_constant<int, 2>{});
            else copy_rows(std::integral_constant<int, 1>{});
        }
        // the weights: a lane always copies the same voxel residue g, whose mirrored model residue gm is
        // worked out once per step
        const int g = lane % kGroups;
        if (kFull || g < ng) {
            const int gv = g0 + g, ryv = gv / D, rzv = gv - ryv * D;
            const int gm = (s_y > 0 ? ryv : D - 1 - ryv) * D + (s_z > 0 ? rzv : D - 1 - rzv);
            const float* src = q_w + (st.q0 + st.t) * D2 + gm;
            float* dst = qwt + buf * kQCap * kGroups + g;
            for (int q = lane / kGroups; q < st.nt; q += 32 / kGroups)
                __pipeline_memcpy_async(dst + q * kGroups, src + q * D2, 4);
        }
        if (lane < st.nt) __pipeline_memcpy_async(qdec + buf * kQCap + lane, q_pos + st.q0 + st.t + lane, 4);
        __pipeline_commit();
    };
    static_assert(kQCap == 32, "one q per lane in stage and decode");

    float acc[kGroups][kBackRounds];
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
        for (int r = 0; r < kBackRounds; ++r) acc[g][r] = 0.0f;

    // one step's multiply-adds, its copies landed
    auto compute = [&](const BackStep& st, int buf) {
        const ClassInfo c = back_class(L, P, st.e);
        int s_y, s_z;
        const Box sb = back_signed_box(c, st.s, st.box, s_y, s_z);
        const LorWindow w = back_window(U, sb);
        // the q's decoded in place: byte offsets in the window (or signed packed q's)
        if (lane < st.nt) {
            int* d = qdec + buf * kQCap + lane;
            const int raw = *d;
            const int qy = s_y > 0 ? (raw >> 16) : c.a_y - (raw >> 16);
            const int qz = s_z > 0 ? (raw & 0xffff) : c.a_z - (raw & 0xffff);
            *d = kStaged ? back_tap_offset(w, sb, qy, qz) * int(sizeof(float)) : (qy << 16) | qz;
        }
        __syncwarp();
        // rounds (warp tiles) the step reaches
        unsigned act = 0;
#pragma unroll
        for (int r = 0; r < kBackRounds; ++r) {
            const int ra = U.cy_a + kTileY * r, rb = min(ra + kTileY - 1, U.cy_b);
            if (ra <= U.cy_b && back_reaches(sb, c.pos_y, c.pos_z, ra, rb, U.cz_a, U.cz_b)) act |= 1u << r;
        }
        const int* qd = qdec + buf * kQCap;
        const float4* qw = reinterpret_cast<const float4*>(qwt + buf * kQCap * kGroups);
        // the q's dense weights, loaded once for all rounds
        auto load_weights = [&](int q, float (&wq)[kGroups]) {
#pragma unroll
            for (int g4 = 0; g4 < kGroups / 4; ++g4) {
                if (kFull || 4 * g4 < ng) {
                    const float4 w4 = qw[q * (kGroups / 4) + g4];
                    wq[4 * g4] = w4.x, wq[4 * g4 + 1] = w4.y, wq[4 * g4 + 2] = w4.z, wq[4 * g4 + 3] = w4.w;
                }
            }
        };
        auto add = [&](int r, const float (&wq)[kGroups], float v) {
#pragma unroll
            for (int g = 0; g < kGroups; ++g)
                if (kFull || g < ng) acc[g][r] = fmaf(wq[g], v, acc[g][r]);
        };
        if constexpr (kStaged) {
            // The window holds zeros wherever a q brings no valid LOR to a cell, so no q is tested:
            // every reached tile takes every q. The rounds a step reaches are consecutive (a class's
            // reach is an interval in y, the rounds are consecutive 4-row tiles), so each run of rounds
            // [kFirst, kFirst + kCount) has its own loop without predicates: a step that reaches one
            // round issues its 16 FMAs per q, not the 64 of all four rounds with three predicated off.
            int ybyte[kBackRounds];
#pragma unroll
            for (int r = 0; r < kBackRounds; ++r)
                ybyte[r] = static_cast<int>(S.win) + (buf * P.y_cap + back_cell_base(w, r, lane)) * int(sizeof(float));
            auto q_loop = [&](auto first, auto count) {
                constexpr int kFirst = decltype(first)::value, kEnd = kFirst + decltype(count)::value;
                for (int q = 0; q < st.nt; ++q) {
                    const int off = qd[q];
                    float wq[kGroups];
                    load_weights(q, wq);
#pragma unroll
                    for (int r = kFirst; r < kEnd; ++r) add(r, wq, *reinterpret_cast<const float*>(smem + ybyte[r] + off));
                }
            };
            using I0 = std::integral_constant<int, 0>;
            using I1 = std::integral_constant<int, 1>;
            using I2 = std::integral_constant<int, 2>;
            using I3 = std::integral_constant<int, 3>;
            using I4 = std::integral_constant<int, 4>;
            static_assert(kBackRounds == 4, "one loop per run of consecutive rounds");
            switch (act) {
                case 0xf: q_loop(I0{}, I4{}); break;
                case 0x1: q_loop(I0{}, I1{}); break;
                case 0x3: q_loop(I0{}, I2{}); break;
                case 0x7: q_loop(I0{}, I3{}); break;
                case 0x2: q_loop(I1{}, I1{}); break;
                case 0x6: q_loop(I1{}, I2{}); break;
                case 0xe: q_loop(I1{}, I3{}); break;
                case 0x4: q_loop(I2{}, I1{}); break;
                case 0xc: q_loop(I2{}, I2{}); break;
                case 0x8: q_loop(I3{}, I1{}); break;
                default: break;   // no round reached (act is a run of consecutive rounds, see above)
            }
        } else {
            const float* yso = y + P.in[st.e] + int64_t(st.s) * c.pos_y * c.pos_z;
            const int cz = U.cz_a + lane % kTileZ;
            for (int q = 0; q < st.nt; ++q) {
                const int qy = qd[q] >> 16, qz = qd[q] & 0xffff;
                float wq[kGroups];
                load_weights(q, wq);
#pragma unroll
                for (int r = 0; r < kBackRounds; ++r) {
                    if (!(act & (1u << r))) continue;
                    const int i = U.cy_a + kTileY * r + lane / kTileZ - qy, j = cz - qz;
                    add(r, wq, (i >= 0 && i < c.pos_y && j >= 0 && j < c.pos_z) ? __ldg(yso + int64_t(i) * c.pos_z + j)
                                                                               : 0.0f);
                }
            }
        }
    };

    BackStep cur = advance(BackStep{-1, 0, 0, 0, 0, 0, make_int2(0, 0)});
    if (cur.e < P.n_entries) {
        stage(cur, 0);
        int buf = 0;
        for (;;) {
            const BackStep nxt = advance(cur);
            const bool more = nxt.e < P.n_entries;
            if (more) {
                stage(nxt, buf ^ 1);
                __pipeline_wait_prior(1);   // the current step's copies (the next step's may still fly)
            } else {
                __pipeline_wait_prior(0);
            }
            __syncwarp();
            compute(cur, buf);
            if (!more) break;
            __syncwarp();   // every lane done with buf before the step after next is staged into it
            cur = nxt;
            buf ^= 1;
        }
    }
    const int64_t nyz = int64_t(L.n_y) * L.n_z;
    const int cz = U.cz_a + lane % kTileZ;
#pragma unroll
    for (int r = 0; r < kBackRounds; ++r) {
        const int cy = U.cy_a + kTileY * r + lane / kTileZ;
        if (cy > U.cy_b || cz > U.cz_b) continue;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
            if (kFull || g < ng) {
                const int gv = g0 + g, ry = gv / D, rz = gv - ry * D;
                float* o = Xb + ((int64_t(p) * D + ry) * D + rz) * nyz + int64_t(cy) * L.n_z + cz;
                *o = P.accumulate ? *o + acc[g][r] : acc[g][r];
            }
        }
    }
}

}  // namespace

static void rearrange(const Layout& L, const float* src, float* dst, bool to_poly, cudaStream_t s) {
    const dim3 grid(div_up(L.n_planes, 32), div_up(L.image_nz(), 32), L.image_ny());
    if (to_poly) polyphase_kernel<true><<<grid, dim3(32, 8), 0, s>>>(L, src, dst);
    else polyphase_kernel<false><<<grid, dim3(32, 8), 0, s>>>(L, src, dst);
    DP_CUDA_CHECK_LAUNCH("polyphase_kernel");
}

// Window tiers of the default kernels: 'small' windows share launches whose blocks fit `blocks` times on
// an SM (the forward: kFwdBlocksPerSm blocks; the back projection: 16 one-warp blocks, the most its
// registers allow), each block's fixed part, windows and `reserve` bytes (the driver's 1 KB per block,
// and the forward another 1 KB) within the SM's share; within `budget` too. The forward gives narrow
// classes fewer LORs per block to stay there; larger windows get launches of their own (larger shared
// memory); windows beyond the budget use the global-memory kernels.
static size_t small_windows(const Impl& m, size_t fixed, int blocks, size_t reserve, size_t budget) {
    const size_t share = size_t(m.smem_per_sm) / blocks;
    return std::min(budget, share > fixed + reserve ? share - fixed - reserve : size_t(0));
}

static size_t window_budget(const Impl& m, size_t fixed) {
    const size_t device = m.max_smem > 0 && size_t(m.max_smem) > fixed ? size_t(m.max_smem) - fixed : 0;
    return m.window_limit > 0 ? std::min(device, m.window_limit) : device;
}

static int planes_per_group(const Impl& m) {
    const Layout& L = m.L;
    int groups = m.plane_groups;
    if (groups == 0) {   // automatic: image slices of at most ~24 MB per launch
        const double mb = double(L.n_voxels()) * 4.0 / (24.0 * 1024 * 1024);
        groups = std::max(1, static_cast<int>(mb + 0.999));
    }
    int per = div_up(L.n_planes, groups);
    per = std::min(per, kMaxPlanes);
    const int meta_cap = std::max(1, static_cast<int>((16 * 1024) / (16 + 4 * (L.D + 1))));
    return std::max(1, std::min(per, meta_cap));
}

// The default forward's plane groups per launch: as many as DeviceModel::fwd_groups_per_launch allows
// (0: all), as far as their sums fit kFwdPartialCap (a tile's lpb floats per group: 16.6 MB for the 3
// groups of one of the full-size head's 72 orientation subsets) and the grid's 2^31 - 1 blocks.
constexpr size_t kFwdPartialCap = size_t(64) << 20;

static int fwd_groups_per_launch(const Impl& m, int groups, int64_t blocks, int lpb) {
    const int64_t asked = m.fwd_groups_per_launch > 0 ? m.fwd_groups_per_launch : groups;
    const int64_t by_memory = int64_t(kFwdPartialCap / (size_t(blocks) * size_t(lpb) * sizeof(float)));
    const int64_t by_grid = int64_t(0x7fffffff) / blocks;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({int64_t(groups), asked, by_memory, by_grid})));
}

void forward_default(Impl& m, const ClassList& C, const float* image, const float* skip, float* y, cudaStream_t s) {
    const Layout& L = m.L;
    float* X = m.workspace(m.fwd_work);
    rearrange(L, image, X, true, s);
    const int per = planes_per_group(m), groups = div_up(L.n_planes, per);
    const size_t fixed = fwd_smem(per, L.D, 0).total;
    const size_t budget = window_budget(m, fixed + 1024);
    const size_t small = small_windows(m, fixed, kFwdBlocksPerSm, 2048, budget);
    for_each_entry_chunk(C, [&](int a0, int n) {
        // launch groups: (tier 0 small / 1 large staged / 2 global, LORs per block)
        std::vector<int> tier(n), lpb(n);
        std::vector<int64_t> need(n);
        for (int q = 0; q < n; ++q) {
            const int k = C.index[a0 + q];
            const ClassInfo c = class_info(L, k);
            const int pitch = fwd_pitch(c.pos_z, m.sz_max[k]);
            auto bound = [&](int lors) { return fwd_window_bound(c.pos_y, pitch, L.D, m.sy_max[k], lors); };
            tier[q] = -1;
            const int min_lors = m.narrow_blocks ? kFwdLors / 4 : kFwdLors;
            for (int lors = kFwdLors; lors >= min_lors && tier[q] < 0; lors /= 2)
                if (size_t(bound(lors)) * 8 <= small) tier[q] = 0, lpb[q] = lors;
            if (tier[q] < 0) {
                lpb[q] = kFwdLors;
                tier[q] = size_t(bound(kFwdLors)) * 8 <= budget ? 1 : 2;
            }
            need[q] = tier[q] == 2 ? 0 : bound(lpb[q]);
        }
        for (int t = 0; t < 3; ++t) {
            for (int lors = kFwdLors; lors >= kFwdLors / 4; lors /= 2) {
                FwdLaunch P{};
                P.L = L;
                P.lpb = lors;
                int64_t cap = 0, blocks = 0;
                for (int q = 0; q < n; ++q) {
                    if (tier[q] != t || lpb[q] != lors) continue;
                    const int k = C.index[a0 + q];
                    const ClassInfo c = class_info(L, k);
                    const int pitch = fwd_pitch(c.pos_z, m.sz_max[k]);
                    P.k[P.n_entries] = k;
                    P.pitch[P.n_entries] = pitch;
                    P.plane[P.n_entries] = fwd_plane_stride(c.pos_y, pitch, m.sy_max[k], lors);
                    P.out[P.n_entries] = C.offset[a0 + q];
                    P.first_block[P.n_entries] = static_cast<int>(blocks);
                    blocks += int64_t(c.n_signs) * fwd_tiles(c.pos_y, pitch, lors);
                    cap = std::max(cap, need[q]);
                    ++P.n_entries;
                }
                if (P.n_entries == 0) continue;
                P.first_block[P.n_entries] = static_cast<int>(blocks);
                P.win_cap = static_cast<int>(cap);
                P.per = per;
                const int per_launch = fwd_groups_per_launch(m, groups, blocks, lors);
                float* partial = nullptr;
                unsigned* done = nullptr;
                if (per_launch > 1) {
                    m.fwd_partial.reserve(size_t(per_launch) * size_t(blocks) * size_t(lors) * sizeof(float));
                    m.fwd_done.reserve(size_t(blocks) * sizeof(unsigned));
                    partial = m.fwd_partial.as<float>();
                    done = m.fwd_done.as<unsigned>();
                }
                const size_t smem = fwd_smem(std::min(per, L.n_planes), L.D, P.win_cap).total;
                for (int g0 = 0; g0 < groups; g0 += per_launch) {
                    P.group0 = g0;
                    P.n_groups = std::min(per_launch, groups - g0);
                    P.accumulate = g0 > 0;
                    if (P.n_groups > 1) DP_CUDA_CHECK(cudaMemsetAsync(done, 0, size_t(blocks) * sizeof(unsigned), s));
                    const unsigned grid = static_cast<unsigned>(blocks * P.n_groups);
                    if (t == 2) fwd_default_kernel<false><<<grid, kThreads, smem, s>>>(
                        P, X, m.taps.as<DTap>(), m.row_start.as<int64_t>(), m.rzg.as<int>(), m.boxes.as<short4>(), skip, y,
                        partial, done);
                    else fwd_default_kernel<true><<<grid, kThreads, smem, s>>>(
                        P, X, m.taps.as<DTap>(), m.row_start.as<int64_t>(), m.rzg.as<int>(), m.boxes.as<short4>(), skip, y,
                        partial, done);
                    DP_CUDA_CHECK_LAUNCH("fwd_default_kernel");
                }
            }
        }
    });
}

// The launch's blocks in decreasing estimated cost (back_block_cost_kernel), sorted on the device (CUB's
// radix sort, stable: equal costs keep their index order); a device array of n_units x n_planes block
// indices in the model's workspace, valid until the next call.
static const int* back_block_order(Impl& m, const BackLaunch& P, int n_units, cudaStream_t s) {
    const int n = n_units * P.L.n_planes;
    size_t sort_bytes = 0;
    DP_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, sort_bytes, static_cast<const unsigned*>(nullptr),
                                                            static_cast<unsigned*>(nullptr), static_cast<const int*>(nullptr),
                                                            static_cast<int*>(nullptr), n, 0, 32, s));
    const size_t arrays = 4 * size_t(n) * sizeof(int), temp = (sort_bytes + 255) / 256 * 256;
    m.back_order.reserve(temp + arrays);
    char* base = m.back_order.as<char>();
    void* sort_temp = base;
    unsigned* cost = reinterpret_cast<unsigned*>(base + temp);
    unsigned* cost_sorted = cost + n;
    int* index = reinterpret_cast<int*>(cost_sorted + n);
    int* order = index + n;
    back_block_cost_kernel<<<div_up(n, 256), 256, 0, s>>>(P, n_units, m.q_start.as<int64_t>(), m.boxes.as<short4>(),
                                                          cost, index);
    DP_CUDA_CHECK_LAUNCH("back_block_cost_kernel");
    DP_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(sort_temp, sort_bytes, cost, cost_sorted, index, order, n,
                                                            0, 32, s));
    return order;
}

void back_default(Impl& m, const ClassList& C, const float* y, float* image, cudaStream_t s) {
    const Layout& L = m.L;
    // classes (a_y, a_z), boxes and q's are packed as 16-bit fields
    if (L.n_y > 32767 || L.n_z > 32767)
        throw ValueError("n_y, n_z: the CUDA back projector handles at most 32767 crystal cells per axis");
    float* Xb = m.workspace(m.back_work);
    const BackUnits G = back_units(L.n_y, L.n_z);
    if (int64_t(G.n_units) * L.n_planes > 0x7fffffff)
        throw ValueError("n_y, n_z, n_planes: the CUDA back projector handles at most 2^31 - 1 (unit, plane) blocks");
    const unsigned n_blocks = static_cast<unsigned>(G.n_units) * static_cast<unsigned>(L.n_planes);
    const int chunks = div_up(int64_t(L.D) * L.D, kGroups);
    const size_t fixed = back_smem(0).total;
    const size_t budget = window_budget(m, fixed + 1024);
    // tiers: 0 windows small enough for 16 warps per SM (the most the registers allow), 1 larger
    // staged windows (fewer warps per SM), 2 the global-memory kernels
    const size_t small = small_windows(m, fixed, 16, 1024, budget);
    bool first = true;
    for_each_entry_chunk(C, [&](int a0, int n) {
        std::vector<int> tier(n);
        std::vector<int64_t> need(n);
        for (int q = 0; q < n; ++q) {
            const int k = C.index[a0 + q];
            need[q] = back_window_bound(m.sy_max[k], m.sz_max[k]);
            const size_t bytes = size_t(need[q]) * 8;   // two windows
            tier[q] = bytes <= small ? 0 : bytes <= budget ? 1 : 2;
        }
        for (int t = 0; t < 3; ++t) {
            BackLaunch P{};
            P.L = L;
            int64_t cap = 0;
            for (int q = 0; q < n; ++q) {
                if (tier[q] != t) continue;
                const int k = C.index[a0 + q];
                const ClassInfo c = class_info(L, k);
                P.k[P.n_entries] = k;
                P.cls[P.n_entries] = (c.a_y << 16) | c.a_z;
                P.in[P.n_entries] = C.offset[a0 + q];
                cap = std::max(cap, need[q]);
                ++P.n_entries;
            }
            if (P.n_entries == 0) continue;
            P.y_cap = t == 2 ? 0 : static_cast<int>(cap);
            P.accumulate = first ? 0 : 1;
            first = false;
            const size_t smem = back_smem(P.y_cap).total;
            const int* order = m.back_heavy_first ? back_block_order(m, P, G.n_units, s) : nullptr;
            // residue chunks of kGroups (all full for D = 4; a partial last chunk otherwise)
            const int full = (L.D * L.D) / kGroups, part = chunks - full;
            auto launch = [&](auto kernel, int n_chunks, int first_chunk) {
                if (n_chunks == 0) return;
                kernel<<<dim3(n_blocks, n_chunks), 32, smem, s>>>(
                    P, first_chunk, y, m.q_start.as<int64_t>(), m.q_pos.as<int>(), m.q_w.as<float>(),
                    m.boxes.as<short4>(), order, Xb);
                DP_CUDA_CHECK_LAUNCH("back_default_kernel");
            };
            if (t == 2) {
                launch(back_default_kernel<false, true>, full, 0);
                launch(back_default_kernel<false, false>, part, full);
            } else {
                launch(back_default_kernel<true, true>, full, 0);
                launch(back_default_kernel<true, false>, part, full);
            }
        }
    });
    rearrange(L, Xb, image, false, s);
}

void allow_default_kernels_smem(int max_smem) {
    for (const void* kern : {reinterpret_cast<const void*>(fwd_default_kernel<true>),
                             reinterpret_cast<const void*>(fwd_default_kernel<false>),
                             reinterpret_cast<const void*>(back_default_kernel<true, true>),
                             reinterpret_cast<const void*>(back_default_kernel<true, false>),
                             reinterpret_cast<const void*>(back_default_kernel<false, true>),
                             reinterpret_cast<const void*>(back_default_kernel<false, false>)})
        DP_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
}

}  // namespace dp::dualhead::gpu::detail
