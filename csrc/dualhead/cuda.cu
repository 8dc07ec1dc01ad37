// Dual-head projectors on the GPU: the paper's algorithms 1-3 and the default tiled pair.
//
// Every method computes y[lor] = sum_p sum_taps w * image[v_z, v_y, p] with the addressing of
// layout.hpp (tap_voxel), and its exact transpose.
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
//       indices recomputed on the fly. Back: atomicAdd scatter.
// default (tiles.hpp for the arithmetic)
//   The image is first rearranged into the polyphase layout X[p][r_y][r_z][c_y][c_z] (r = voxel
//   index mod D within its crystal cell, c = cell). A class, sign and plane is then a strided 2D
//   correlation: LOR (i, j) reads cell (i + q_y, j + q_z) of residue plane (r_y, r_z) per tap.
//   forward: a block owns 1024 consecutive shift positions of one signed orientation (4 per thread,
//     256 threads; warps of 32 positions consecutive in j) and walks the planes. Per step (plane p,
//     residue r_z) it stages the D residue planes r_y of the image window its LORs reach (cp.async,
//     double buffered) and decodes that step's taps (mirrored for the sign) into window offsets;
//     each thread then accumulates its 4 LORs with one shared load and one FMA per tap and LOR, the
//     taps being block-uniform (broadcast). Window rows are padded so that the 32 LORs of a warp hit
//     32 distinct banks even across a row wrap. LORs whose skip value is 0 get 0; warps (and
//     blocks) whose LORs are all skipped do no work. Plane-group launches (accumulating into y) keep
//     the image slice that the running blocks read in L2.
//   back: a gather, no atomics: a block owns one plane and 32 warp tiles of 4 x 8 image cells (4 per
//     warp), each thread one cell per round with one accumulator per voxel residue of the cell (D x D,
//     up to 16; larger D loops over residue chunks in the grid: 64 accumulators). The model is used as
//     per-row lists of distinct cell offsets q with the dense D x D weights of that cell: every tap of
//     one q brings the same LOR value to the cell, so one shared load feeds up to 16 FMAs. Per step
//     (class, sign) the block stages the LOR values its cells reach (zero outside the orientation's
//     positions) and the q list (weights mirrored for the sign). Warp tiles the orientation does not
//     reach skip the step; on tiles at the edge of its reach each q is skipped unless it brings a
//     valid LOR to some cell of the tile. The polyphase result is rearranged into the image.
//   Windows too large for shared memory (very wide patches on very large heads) fall back to kernels
//   that read the polyphase image / the LOR values from global memory with the same offsets.
//
// Floor (per full projection; M multiply-adds = sum over LORs of their taps over all planes):
//   forward: per tap and warp one 16-byte broadcast load (two taps) + 4 shared loads (+4 IADD, 4 FMA)
//     for 4 x 32 MACs: bound by shared-memory bandwidth (one warp-wide load per SM and clock) at
//     4.5 / 128 loads per MAC, i.e. ~28% of the FMA rate; plus the image windows from L2: at least
//     D^2 floats per LOR and plane with taps (halo 1.3-1.6x on top).
//   back: 16 FMAs per shared LOR load (plus 5 broadcast loads per q for 4 cells): FMA-bound on
//     M_dense = sum over LORs and planes of (distinct q) x D^2 = M / fill (fill = taps / (16 q), ~0.55
//     for physical patches), times the edge work of tiles that a q only partly reaches (~1.3x).
//   benchmarks/dualhead_projectors.py prints the counts and the fractions reached.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "cuda.hpp"
#include "tiles.hpp"

namespace dp::dualhead::gpu {

using namespace tiles;

namespace {

// A tap on the device: the model's (dy, dz, w), regrouped per row by residue group
// g = (dz mod D) * D + (dy mod D).
struct __align__(8) DTap {
    int16_t dy, dz;
    float w;
};
static_assert(sizeof(DTap) == 8, "8-byte taps");

constexpr int kAlgThreads = 128;   // the paper's blocks: one thread per plane

int div_up(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

__host__ __device__ inline size_t align16(size_t x) { return (x + 15) & ~size_t(15); }

// --- launch parameter blocks (passed by value, < 4 KB) -------------------------------------------
struct FwdLaunch {
    Layout L;
    int n_entries, p_begin, n_planes, accumulate, win_cap;
    int lpb;   // LORs per block (<= kFwdLors)
    int k[kMaxEntries];
    int first_block[kMaxEntries + 1];
    long long out[kMaxEntries];   // start of the class's block in y
};

struct BackLaunch {
    Layout L;
    int n_entries, accumulate, y_cap;
    int k[kMaxEntries];
    long long in[kMaxEntries];    // start of the class's block in y
};

// alg1: first = LOR prefix; alg2/alg3: first = shift-position prefix
struct AlgLaunch {
    Layout L;
    int n_entries;
    int k[kMaxEntries];
    long long out[kMaxEntries];
    long long first[kMaxEntries + 1];
};
static_assert(sizeof(FwdLaunch) < 4000 && sizeof(BackLaunch) < 4000 && sizeof(AlgLaunch) < 4000,
              "kernel parameter blocks must stay below 4 KB");

template <typename T>
__device__ __forceinline__ int find_entry(const T* first, int n, T b) {
    int lo = 0, hi = n;     // first[lo] <= b < first[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (first[mid] <= b) lo = mid;
        else hi = mid;
    }
    return lo;
}

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
// Shared memory: plane metadata (row start, box, r_z group starts), decoded taps [2][kTapCap], windows [2][win_cap].
struct FwdSmem {
    size_t box, rzg, tap, win, total;
};

__host__ __device__ inline FwdSmem fwd_smem(int n_planes, int D, int win_cap) {
    FwdSmem s;
    s.box = size_t(8) * n_planes;
    s.rzg = s.box + size_t(8) * n_planes;
    s.tap = align16(s.rzg + size_t(4) * n_planes * (D + 1));
    s.win = s.tap + size_t(8) * 2 * kTapCap;
    s.total = s.win + size_t(4) * 2 * win_cap;
    return s;
}

// The forward's inner loop: taps (byte offset, weight) in pairs (one 16-byte broadcast load), each
// added to the thread's rounds. kAll: every round active (no predicates); else rounds says which.
template <unsigned kAll>
__device__ __forceinline__ void fwd_taps(const int2* __restrict__ dt, int nt, const char* const (&wp)[kFwdRounds],
                                         float (&acc)[kFwdRounds], unsigned rounds = kAll) {
    auto one = [&](int off, float w) {
#pragma unroll
        for (int r = 0; r < kFwdRounds; ++r)
            if (kAll != 0 || (rounds & (1u << r)))
                acc[r] = fmaf(w, *reinterpret_cast<const float*>(wp[r] + off), acc[r]);
    };
    const int4* d4 = reinterpret_cast<const int4*>(dt);
    int t = 0;
    for (; t + 1 < nt; t += 2) {
        const int4 d = d4[t >> 1];
        one(d.x, __int_as_float(d.y));
        one(d.z, __int_as_float(d.w));
    }
    if (t < nt) {
        const int2 d = dt[t];
        one(d.x, __int_as_float(d.y));
    }
}

template <bool kStaged>
__global__ void __launch_bounds__(kThreads, 2)
fwd_default_kernel(const __grid_constant__ FwdLaunch P, const float* __restrict__ X, const DTap* __restrict__ taps,
                   const int64_t* __restrict__ row_start, const int* __restrict__ rzg, const short4* __restrict__ boxes,
                   const float* __restrict__ skip, float* __restrict__ y) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Layout L = P.L;
    const int D = L.D, np = P.n_planes;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    // class, sign and tile of this block
    const int b = blockIdx.x;
    const int e = find_entry(P.first_block, P.n_entries, b);
    const int k = P.k[e];
    const ClassInfo c = class_info(L, k);
    const int npos = c.pos_y * c.pos_z;
    const int ntiles = (npos + P.lpb - 1) / P.lpb;
    const int local = b - P.first_block[e];
    const int s = local / ntiles;
    const FwdTile T = fwd_tile(c.pos_y, c.pos_z, local - s * ntiles, P.lpb);
    int s_y, s_z;
    class_sign(c, s, s_y, s_z);
    const int Wy = D * (c.a_y + 1), Wz = D * (c.a_z + 1);
    const int64_t lor0 = P.out[e] + int64_t(s) * npos;

    // this thread's LORs: f = f0 + r * kThreads + tid; lanes past the tile sit on the tile's first LOR
    int li[kFwdRounds], lj[kFwdRounds];
    bool in_tile[kFwdRounds], on[kFwdRounds];
    unsigned rounds = 0;   // warp-uniform: rounds with at least one projected LOR
#pragma unroll
    for (int r = 0; r < kFwdRounds; ++r) {
        const int f = T.f0 + r * kThreads + tid;
        in_tile[r] = f < T.f1;
        on[r] = in_tile[r] && (skip == nullptr || skip[lor0 + f] != 0.0f);
        li[r] = in_tile[r] ? f / c.pos_z : T.i_a;
        lj[r] = in_tile[r] ? f - (f / c.pos_z) * c.pos_z : T.j_lo;
        if (__any_sync(0xffffffffu, on[r])) rounds |= 1u << r;
    }
    if (!__syncthreads_or(rounds != 0)) {   // every LOR of the block skipped
        if (!P.accumulate)
#pragma unroll
            for (int r = 0; r < kFwdRounds; ++r)
                if (in_tile[r]) y[lor0 + T.f0 + r * kThreads + tid] = 0.0f;
        return;
    }

    // plane metadata of this class for the launch's planes
    int64_t* m_row = reinterpret_cast<int64_t*>(smem);
    const FwdSmem S = fwd_smem(np, D, P.win_cap);
    short4* m_box = reinterpret_cast<short4*>(smem + S.box);
    int* m_rzg = reinterpret_cast<int*>(smem + S.rzg);   // [np][D + 1]: start of the taps with r_z = 0..D
    int2* dtap = reinterpret_cast<int2*>(smem + S.tap);
    float* win = reinterpret_cast<float*>(smem + S.win);
    const int64_t row0 = int64_t(k) * L.n_planes + P.p_begin;
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
        return fwd_window(T, signed_box(Box{bx.x, bx.y, bx.z, bx.w}, c.a_y, c.a_z, s_y, s_z), c.pos_z);
    };
    // the step's residue planes r_y = 0 .. D-1 at (p, r_z), from X
    auto plane_ptr = [&](const Step& st) { return X + (int64_t(P.p_begin + st.pi) * D * D + st.rz) * nyz; };
    auto stage = [&](const Step& st, const Window& w, int buf) {
        if constexpr (kStaged) {
            const float* src0 = plane_ptr(st) + int64_t(w.i_ref + w.y_ref) * L.n_z + (w.j_ref + w.z_ref);
            float* dst0 = win + buf * P.win_cap;
            for (int ry = 0; ry < D; ++ry) {
                const float* src = src0 + int64_t(ry) * D * nyz;   // X's r_y stride
                float* dst = dst0 + ry * w.plane;
                for (int row = warp; row < w.rows; row += kWarps)
                    for (int col = lane; col < w.cols; col += 32)
                        __pipeline_memcpy_async(dst + row * w.pitch + col, src + int64_t(row) * L.n_z + col, 4);
            }
        }
        __pipeline_commit();
    };
    DTap pre[2];
    auto prefetch = [&](const Step& st) {
        const int64_t t0 = m_row[st.pi] + st.t;
#pragma unroll
        for (int q = 0; q < 2; ++q)
            if (tid + q * kThreads < st.nt) pre[q] = taps[t0 + tid + q * kThreads];
    };
    auto decode = [&](const Step& st, const Window& w, int buf) {
        int2* dst = dtap + buf * kTapCap;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int t = tid + q * kThreads;
            if (t < st.nt) {
                const int ey = signed_offset(pre[q].dy, Wy, s_y), qy = ey / D, ry = ey - qy * D;
                const int qz = signed_offset(pre[q].dz, Wz, s_z) / D;
                const int off = fwd_tap_offset(w, ry, qy, qz);
                dst[t] = make_int2(kStaged ? off * int(sizeof(float)) : off, __float_as_int(pre[q].w));
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
            int base[kFwdRounds];
#pragma unroll
            for (int r = 0; r < kFwdRounds; ++r) base[r] = fwd_lor_base(wc, li[r], lj[r]);
            const int2* dt = dtap + buf * kTapCap;
            if (rounds == 0) {
                // every LOR of this warp skipped: nothing to accumulate
            } else if constexpr (kStaged) {
                const char* wp[kFwdRounds];   // byte offsets decoded: one add per tap and LOR
#pragma unroll
                for (int r = 0; r < kFwdRounds; ++r)
                    wp[r] = reinterpret_cast<const char*>(win + buf * P.win_cap + base[r]);
                if (rounds == (1u << kFwdRounds) - 1) fwd_taps<(1u << kFwdRounds) - 1>(dt, cur.nt, wp, acc);
                else fwd_taps<0>(dt, cur.nt, wp, acc, rounds);
            } else {
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
#pragma unroll
    for (int r = 0; r < kFwdRounds; ++r)
        if (in_tile[r]) {
            const int64_t o = lor0 + T.f0 + r * kThreads + tid;
            const float v = on[r] ? acc[r] : 0.0f;
            y[o] = P.accumulate ? y[o] + v : v;
        }
}

// --- default back projection -------------------------------------------------------------------------
// The model for the back projection: per row, its distinct cell offsets q = (d_y / D, d_z / D) with the
// weights of all D^2 voxel residues of that cell (zero where the patch has no tap). Every tap of one q
// brings the same LOR value to the cell, so one shared load of it feeds up to 16 FMAs.
//
// Shared memory: per class the row's first q / q count / box at this plane, decoded q's [2][kQCap]
// (byte offset in the LOR window, packed signed q), their weights [2][kQCap][kGroups] (voxel residues
// of the block's chunk, mirrored for the sign), LOR windows [2][y_cap].
struct BackSmem {
    size_t cnt, box, qd, qw, win, total;
};

__host__ __device__ inline BackSmem back_smem(int n_entries, int y_cap) {
    BackSmem s;
    s.cnt = size_t(8) * n_entries;
    s.box = align16(s.cnt + size_t(4) * n_entries);
    s.qd = s.box + size_t(8) * n_entries;
    s.qw = align16(s.qd + size_t(8) * 2 * kQCap);
    s.win = s.qw + size_t(4) * 2 * kQCap * kGroups;
    s.total = s.win + size_t(4) * 2 * y_cap;
    return s;
}

// kFull: the block's chunk has all kGroups residues (D = 4, or the full chunks of larger D)
template <bool kStaged, bool kFull>
__global__ void __launch_bounds__(kThreads, 2)
back_default_kernel(const __grid_constant__ BackLaunch P, int chunk0, const float* __restrict__ y,
                    const int64_t* __restrict__ q_start, const int* __restrict__ q_pos, const float* __restrict__ q_w, const short4* __restrict__ boxes,
                    float* __restrict__ Xb) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Layout L = P.L;
    const int D = L.D, D2 = D * D;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const BackGrid G = back_grid(L.n_y, L.n_z);
    const BackBlock B = back_block(G, L.n_y, L.n_z, blockIdx.x);
    const int p = blockIdx.y;
    const int g0 = (chunk0 + blockIdx.z) * kGroups, ng = kFull ? kGroups : min(kGroups, D2 - g0);

    // this thread's cells, one per round r: warp tile wt0 + warp + kWarps r (recomputed where needed,
    // so that only the accumulators stay live through the loops)
    struct Cell {
        int ty, tz, cy, cz;
        bool tile, ok;
    };
    auto cell_of = [&](int r) {
        Cell c;
        const int wt = B.wt0 + warp + kWarps * r;
        c.tile = wt < B.wt1;
        const int wy = c.tile ? wt / G.n_wz : 0, wz = c.tile ? wt - wy * G.n_wz : 0;
        c.ty = kTileY * wy;
        c.tz = kTileZ * wz;
        c.cy = c.ty + lane / kTileZ;
        c.cz = c.tz + lane % kTileZ;
        c.ok = c.tile && c.cy < L.n_y && c.cz < L.n_z;
        return c;
    };

    int64_t* m_q0 = reinterpret_cast<int64_t*>(smem);
    const BackSmem S = back_smem(P.n_entries, P.y_cap);
    int* m_cnt = reinterpret_cast<int*>(smem + S.cnt);
    short4* m_box = reinterpret_cast<short4*>(smem + S.box);
    int2* qdec = reinterpret_cast<int2*>(smem + S.qd);       // [2][kQCap]: (byte offset, (q_y << 16) | q_z)
    float* qwt = reinterpret_cast<float*>(smem + S.qw);      // [2][kQCap][kGroups]
    float* ywin = reinterpret_cast<float*>(smem + S.win);
    for (int e = tid; e < P.n_entries; e += kThreads) {
        const int64_t row = int64_t(P.k[e]) * L.n_planes + p;
        m_q0[e] = q_start[row];
        m_cnt[e] = static_cast<int>(q_start[row + 1] - q_start[row]);
        m_box[e] = boxes[row];
    }
    __syncthreads();

    // steps: (class e, sign s, cell offsets [t, t + nt) of the row), the block's cells reached only
    struct Step {
        int e, s, t, nt;
    };
    auto sbox = [&](int e, int s) {
        const ClassInfo c = class_info(L, P.k[e]);
        int s_y, s_z;
        class_sign(c, s, s_y, s_z);
        const short4 bx = m_box[e];
        return signed_box(Box{bx.x, bx.y, bx.z, bx.w}, c.a_y, c.a_z, s_y, s_z);
    };
    auto advance = [&](Step st) -> Step {
        int e = st.e, s = st.s, t = st.t + st.nt;
        if (e < 0) e = s = t = 0;
        while (e < P.n_entries) {
            const ClassInfo c = class_info(L, P.k[e]);
            if (t < m_cnt[e] && back_reaches(sbox(e, s), c.pos_y, c.pos_z, B.cy_a, B.cy_b, B.cz_a, B.cz_b))
                return Step{e, s, t, min(kQCap, m_cnt[e] - t)};
            t = 0;
            if (++s == c.n_signs) {
                s = 0;
                ++e;
            }
        }
        return Step{P.n_entries, 0, 0, 0};
    };
    auto y_of = [&](const Step& st) {
        const ClassInfo c = class_info(L, P.k[st.e]);
        return y + P.in[st.e] + int64_t(st.s) * c.pos_y * c.pos_z;
    };
    // LOR window (zero outside the orientation's positions) and the q weights of the chunk's voxel
    // residues, mirrored for the sign (voxel residue (r_y, r_z) <- model residue of the mirrored cell)
    auto stage = [&](const Step& st, int buf) {
        const ClassInfo c = class_info(L, P.k[st.e]);
        int s_y, s_z;
        class_sign(c, st.s, s_y, s_z);
        if constexpr (kStaged) {
            const LorWindow w = back_window(B, sbox(st.e, st.s));
            const float* yso = y_of(st);
            float* dst = ywin + buf * P.y_cap;
            for (int row = warp; row < w.rows; row += kWarps) {
                const int i = w.i_org + row;
                const bool row_ok = i >= 0 && i < c.pos_y;
                for (int col = lane; col < w.cols; col += 32) {
                    const int j = w.j_org + col;
                    if (row_ok && j >= 0 && j < c.pos_z)
                        __pipeline_memcpy_async(dst + row * w.pitch + col, yso + int64_t(i) * c.pos_z + j, 4);
                    else
                        dst[row * w.pitch + col] = 0.0f;
                }
            }
        }
        const float* src = q_w + (m_q0[st.e] + st.t) * D2;
        float* dst = qwt + buf * kQCap * kGroups;
        for (int idx = tid; idx < st.nt * kGroups; idx += kThreads) {
            const int q = idx / kGroups, g = idx - q * kGroups;
            if (kFull || g < ng) {
                const int gv = g0 + g, ryv = gv / D, rzv = gv - ryv * D;
                const int gm = (s_y > 0 ? ryv : D - 1 - ryv) * D + (s_z > 0 ? rzv : D - 1 - rzv);
                __pipeline_memcpy_async(dst + idx, src + int64_t(q) * D2 + gm, 4);
            }
        }
        __pipeline_commit();
    };
    int qpre = 0;
    auto prefetch = [&](const Step& st) {
        if (tid < st.nt) qpre = q_pos[m_q0[st.e] + st.t + tid];
    };
    auto decode = [&](const Step& st, int buf) {
        if (tid < st.nt) {
            const ClassInfo c = class_info(L, P.k[st.e]);
            int s_y, s_z;
            class_sign(c, st.s, s_y, s_z);
            const int qy = s_y > 0 ? (qpre >> 16) : c.a_y - (qpre >> 16);
            const int qz = s_z > 0 ? (qpre & 0xffff) : c.a_z - (qpre & 0xffff);
            const Box sb = sbox(st.e, st.s);
            const int off = kStaged ? back_tap_offset(back_window(B, sb), sb, qy, qz) * int(sizeof(float)) : 0;
            qdec[buf * kQCap + tid] = make_int2(off, (qy << 16) | qz);
        }
    };

    float acc[kGroups][kBackRounds];
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
        for (int r = 0; r < kBackRounds; ++r) acc[g][r] = 0.0f;

    Step cur = advance(Step{-1, 0, 0, 0});
    if (cur.e < P.n_entries) {
        stage(cur, 0);
        prefetch(cur);
        decode(cur, 0);
        __pipeline_wait_prior(0);
        __syncthreads();
        int buf = 0;
        for (;;) {
            const Step nxt = advance(cur);
            const bool more = nxt.e < P.n_entries;
            if (more) {
                stage(nxt, buf ^ 1);
                prefetch(nxt);
            }
            const ClassInfo c = class_info(L, P.k[cur.e]);
            const Box sb = sbox(cur.e, cur.s);
            const LorWindow w = back_window(B, sb);
            // per round (warp-uniform): the tile reached at all (act), reached by every q from every cell
            // (interior: no test); the q_y / q_z reaching a LOR from some cell of the tile start at ylo / zlo
            unsigned act = 0, interior = 0;
            int ybyte[kBackRounds], ylo[kBackRounds], zlo[kBackRounds];
            int cyr[kBackRounds], czr[kBackRounds];   // (global-memory variant only)
#pragma unroll
            for (int r = 0; r < kBackRounds; ++r) {
                const Cell cl = cell_of(r);
                if (cl.tile && back_reaches(sb, c.pos_y, c.pos_z, cl.ty, cl.ty + kTileY - 1, cl.tz, cl.tz + kTileZ - 1))
                    act |= 1u << r;
                if (back_tile_interior(sb, c.pos_y, c.pos_z, cl.ty, cl.tz)) interior |= 1u << r;
                ybyte[r] = static_cast<int>(S.win) + (buf * P.y_cap + (cl.ok ? back_cell_base(w, B, cl.cy, cl.cz) : 0)) *
                                                          int(sizeof(float));
                ylo[r] = cl.ty - c.pos_y + 1;
                zlo[r] = cl.tz - c.pos_z + 1;
                cyr[r] = cl.ok ? cl.cy : -(1 << 20);   // an invalid cell reaches no LOR
                czr[r] = cl.cz;
            }
            if (act) {
                const unsigned yspan = c.pos_y + kTileY - 2, zspan = c.pos_z + kTileZ - 2;
                const int2* qd = qdec + buf * kQCap;
                const float4* qw = reinterpret_cast<const float4*>(qwt + buf * kQCap * kGroups);
                const float* yso = y_of(cur);
                for (int q = 0; q < cur.nt; ++q) {
                    const int2 d = qd[q];
                    const int qy = d.y >> 16, qz = d.y & 0xffff;
                    float wq[kGroups];   // the q's weights, loaded once for all rounds
#pragma unroll
                    for (int g4 = 0; g4 < kGroups / 4; ++g4) {
                        if (kFull || 4 * g4 < ng) {
                            const float4 w4 = qw[q * (kGroups / 4) + g4];
                            wq[4 * g4] = w4.x, wq[4 * g4 + 1] = w4.y, wq[4 * g4 + 2] = w4.z, wq[4 * g4 + 3] = w4.w;
                        }
                    }
#pragma unroll
                    for (int r = 0; r < kBackRounds; ++r) {
                        // skip a q that reaches no valid LOR from this tile (border tiles only)
                        if (!(act & (1u << r)) ||
                            (!(interior & (1u << r)) &&
                             (unsigned(qy - ylo[r]) > yspan || unsigned(qz - zlo[r]) > zspan)))
                            continue;
                        float v;
                        if constexpr (kStaged) {
                            v = *reinterpret_cast<const float*>(smem + ybyte[r] + d.x);
                        } else {
                            const int i = cyr[r] - qy, j = czr[r] - qz;
                            v = (i >= 0 && i < c.pos_y && j >= 0 && j < c.pos_z) ? __ldg(yso + int64_t(i) * c.pos_z + j)
                                                                                 : 0.0f;
                        }
#pragma unroll
                        for (int g = 0; g < kGroups; ++g)
                            if (kFull || g < ng) acc[g][r] = fmaf(wq[g], v, acc[g][r]);
                    }
                }
            }
            if (!more) break;
            decode(nxt, buf ^ 1);
            __pipeline_wait_prior(0);
            __syncthreads();
            cur = nxt;
            buf ^= 1;
        }
    }
    const int64_t nyz = int64_t(L.n_y) * L.n_z;
#pragma unroll
    for (int r = 0; r < kBackRounds; ++r) {
        const Cell cl = cell_of(r);
        if (!cl.ok) continue;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
            if (kFull || g < ng) {
                const int gv = g0 + g, ry = gv / D, rz = gv - ry * D;
                float* o = Xb + ((int64_t(p) * D + ry) * D + rz) * nyz + int64_t(cl.cy) * L.n_z + cl.cz;
                *o = P.accumulate ? *o + acc[g][r] : acc[g][r];
            }
        }
    }
}

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

// --- the resident model ---------------------------------------------------------------------------------
struct DeviceModel::Impl {
    Layout L;
    int64_t n_taps = 0, n_offsets = 0;
    // forward and alg1-3: the taps regrouped per row by residue g = (dz mod D) D + (dy mod D), the row
    // starts and, per row, the start of the taps with dz mod D = 0 .. D (relative to the row start)
    cuda::DeviceBuffer taps, row_start, rzg;
    // back: per row its distinct cell offsets q (packed (q_y << 16) | q_z) with the D^2 residue weights
    // (r_y D + r_z; zero where no tap) and their row starts
    cuda::DeviceBuffer q_start, q_pos, q_w;
    cuda::DeviceBuffer boxes;          // per row: q_y / q_z range of its taps (short4; empty: lo > hi)
    std::vector<int> sy_max, sz_max;   // per class: widest box over the planes (cells), for the window bounds
    cuda::DeviceBuffer fwd_work, back_work;   // polyphase image for the forward / the back projection
    cuda::DeviceBuffer partial;               // alg2 partial sums
    int max_smem = 0;                         // opt-in shared memory per block (bytes), read once
    int smem_per_sm = 0;                      // shared memory per SM (bytes), read once
    size_t window_limit = 0;
    int plane_groups = 0;
    bool narrow_blocks = false;

    // Host arrays uploaded in chunks (the model can be several GB).
    template <typename T>
    struct Uploader {
        cuda::DeviceBuffer& dst;
        std::vector<T> chunk;
        int64_t done = 0;
        static constexpr size_t kCap = size_t(1) << 24;
        void push(const T& v) {
            chunk.push_back(v);
            if (chunk.size() >= kCap) flush();
        }
        void flush() {
            if (chunk.empty()) return;
            DP_CUDA_CHECK(cudaMemcpy(dst.as<T>() + done, chunk.data(), chunk.size() * sizeof(T), cudaMemcpyHostToDevice));
            done += int64_t(chunk.size());
            chunk.clear();
        }
    };

    Impl(const HostModel& h, size_t limit) : L(h.L), n_taps(h.n_taps()), window_limit(limit) {
        const int D = L.D, D2 = D * D;
        const int64_t n_rows = int64_t(L.n_classes()) * L.n_planes;
        if (int64_t(h.tap_start.size()) != n_rows + 1) throw ValueError("model: inconsistent tap_start");
        if (L.image_ny() > 65535) throw ValueError("scanner: the CUDA projectors need n_y * voxels_per_crystal <= 65535");
        // pass 1: distinct cell offsets per row (for the sizes of the back projection's arrays)
        std::vector<int64_t> qs(n_rows + 1, 0);
        std::vector<int64_t> keys;
        auto row_keys = [&](int64_t r) {
            keys.clear();
            for (int64_t t = h.tap_start[r]; t < h.tap_start[r + 1]; ++t)
                keys.push_back((int64_t(h.tap_dy[t] / D) << 16 | (h.tap_dz[t] / D)) << 32 | (t - h.tap_start[r]));
            std::sort(keys.begin(), keys.end());
        };
        for (int64_t r = 0; r < n_rows; ++r) {
            row_keys(r);
            int64_t n = 0;
            for (size_t a = 0; a < keys.size(); ++a) n += (a == 0 || (keys[a] >> 32) != (keys[a - 1] >> 32));
            qs[r + 1] = qs[r] + n;
        }
        n_offsets = qs[n_rows];
        taps = cuda::DeviceBuffer(std::max<size_t>(8, size_t(n_taps) * sizeof(DTap)));
        q_pos = cuda::DeviceBuffer(std::max<size_t>(4, size_t(n_offsets) * sizeof(int)));
        q_w = cuda::DeviceBuffer(std::max<size_t>(4, size_t(n_offsets) * D2 * sizeof(float)));
        std::vector<int> rz_host(size_t(n_rows) * (D + 1));
        std::vector<short4> box_host(n_rows);
        sy_max.assign(L.n_classes(), 0);
        sz_max.assign(L.n_classes(), 0);
        Uploader<DTap> up_taps{taps};
        Uploader<int> up_pos{q_pos};
        Uploader<float> up_w{q_w};
        std::vector<int> count(D2 + 1), next(D2);
        std::vector<DTap> row_taps;
        std::vector<float> wq(D2);
        for (int64_t r = 0; r < n_rows; ++r) {
            const int64_t a = h.tap_start[r], b = h.tap_start[r + 1];
            std::fill(count.begin(), count.end(), 0);
            int ylo = 1 << 30, yhi = -1, zlo = 1 << 30, zhi = -1;
            for (int64_t t = a; t < b; ++t) {
                const int dy = h.tap_dy[t], dz = h.tap_dz[t];
                ++count[(dz % D) * D + (dy % D) + 1];
                ylo = std::min(ylo, dy / D), yhi = std::max(yhi, dy / D);
                zlo = std::min(zlo, dz / D), zhi = std::max(zhi, dz / D);
            }
            for (int g = 0; g < D2; ++g) count[g + 1] += count[g];
            for (int rz = 0; rz <= D; ++rz) rz_host[size_t(r) * (D + 1) + rz] = count[rz * D];
            if (b > a) {
                box_host[r] = make_short4(short(ylo), short(yhi), short(zlo), short(zhi));
                const int k = static_cast<int>(r / L.n_planes);
                sy_max[k] = std::max(sy_max[k], yhi - ylo);
                sz_max[k] = std::max(sz_max[k], zhi - zlo);
            } else {
                box_host[r] = make_short4(0, -1, 0, -1);
            }
            // forward: taps in residue-group order
            row_taps.resize(size_t(b - a));
            std::copy(count.begin(), count.end() - 1, next.begin());
            for (int64_t t = a; t < b; ++t) {
                const int dy = h.tap_dy[t], dz = h.tap_dz[t];
                DTap& d = row_taps[next[(dz % D) * D + (dy % D)]++];
                d.dy = int16_t(dy);
                d.dz = int16_t(dz);
                d.w = h.tap_w[t];
            }
            for (const DTap& d : row_taps) up_taps.push(d);
            // back: distinct cell offsets with their residue weights
            row_keys(r);
            for (size_t i = 0; i < keys.size();) {
                const int64_t q = keys[i] >> 32;
                std::fill(wq.begin(), wq.end(), 0.0f);
                for (; i < keys.size() && (keys[i] >> 32) == q; ++i) {
                    const int64_t t = a + (keys[i] & 0xffffffff);
                    wq[(h.tap_dy[t] % D) * D + (h.tap_dz[t] % D)] += h.tap_w[t];
                }
                up_pos.push(static_cast<int>(q));
                for (float v : wq) up_w.push(v);
            }
        }
        up_taps.flush();
        up_pos.flush();
        up_w.flush();
        row_start = cuda::DeviceBuffer(h.tap_start.size() * sizeof(int64_t));
        row_start.upload(h.tap_start.data(), h.tap_start.size() * sizeof(int64_t));
        q_start = cuda::DeviceBuffer(qs.size() * sizeof(int64_t));
        q_start.upload(qs.data(), qs.size() * sizeof(int64_t));
        rzg = cuda::DeviceBuffer(rz_host.size() * sizeof(int));
        rzg.upload(rz_host.data(), rz_host.size() * sizeof(int));
        boxes = cuda::DeviceBuffer(box_host.size() * sizeof(short4));
        boxes.upload(box_host.data(), box_host.size() * sizeof(short4));

        int dev = 0;
        DP_CUDA_CHECK(cudaGetDevice(&dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        DP_CUDA_CHECK(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
        for (const void* kern : {reinterpret_cast<const void*>(fwd_default_kernel<true>),
                                 reinterpret_cast<const void*>(fwd_default_kernel<false>),
                                 reinterpret_cast<const void*>(back_default_kernel<true, true>),
                                 reinterpret_cast<const void*>(back_default_kernel<true, false>),
                                 reinterpret_cast<const void*>(back_default_kernel<false, true>),
                                 reinterpret_cast<const void*>(back_default_kernel<false, false>)})
            DP_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
    }

    float* workspace(cuda::DeviceBuffer& b) {
        const size_t need = size_t(L.n_voxels()) * sizeof(float);
        if (b.bytes() < need) {
            b = cuda::DeviceBuffer();
            b = cuda::DeviceBuffer(need);
        }
        return b.as<float>();
    }

    size_t model_bytes() const {
        return taps.bytes() + row_start.bytes() + rzg.bytes() + q_start.bytes() + q_pos.bytes() + q_w.bytes() +
               boxes.bytes();
    }
};

DeviceModel::DeviceModel(const HostModel& host, size_t window_limit) : impl_(std::make_unique<Impl>(host, window_limit)) {}
DeviceModel::~DeviceModel() = default;
const Layout& DeviceModel::layout() const { return impl_->L; }
int64_t DeviceModel::n_taps() const { return impl_->n_taps; }
size_t DeviceModel::model_bytes() const { return impl_->model_bytes(); }
size_t DeviceModel::bytes() const {
    const Impl& m = *impl_;
    return m.model_bytes() + m.fwd_work.bytes() + m.back_work.bytes() + m.partial.bytes();
}
int DeviceModel::plane_groups() const { return impl_->plane_groups; }
void DeviceModel::set_plane_groups(int groups) {
    if (groups < 0) throw ValueError("plane_groups: expected >= 0 (0: automatic), got " + std::to_string(groups));
    impl_->plane_groups = groups;
}
bool DeviceModel::narrow_blocks() const { return impl_->narrow_blocks; }
void DeviceModel::set_narrow_blocks(bool on) { impl_->narrow_blocks = on; }

Method parse_method(const std::string& name) {
    if (name == "default") return Method::Default;
    if (name == "alg1") return Method::Alg1;
    if (name == "alg2") return Method::Alg2;
    if (name == "alg3") return Method::Alg3;
    throw ValueError("method: expected 'default', 'alg1', 'alg2' or 'alg3', got '" + name + "'");
}

namespace {

using Impl = DeviceModel::Impl;

// Entries [a0, a0 + n) of the class list, kMaxEntries at a time.
template <typename F>
void for_each_entry_chunk(const ClassList& C, F&& f) {
    const int n = static_cast<int>(C.index.size());
    for (int a0 = 0; a0 < n; a0 += kMaxEntries) f(a0, std::min(kMaxEntries, n - a0));
}

void rearrange(const Layout& L, const float* src, float* dst, bool to_poly, cudaStream_t s) {
    const dim3 grid(div_up(L.n_planes, 32), div_up(L.image_nz(), 32), L.image_ny());
    if (to_poly) polyphase_kernel<true><<<grid, dim3(32, 8), 0, s>>>(L, src, dst);
    else polyphase_kernel<false><<<grid, dim3(32, 8), 0, s>>>(L, src, dst);
    DP_CUDA_CHECK_LAUNCH("polyphase_kernel");
}

// Window tiers of the default kernels: 'small' windows share launches whose blocks fit twice on an
// SM (two blocks of fixed part + windows + 1 KB reserved); narrow classes get fewer LORs per block to
// stay there; larger windows get launches of their own (larger shared memory); windows beyond the
// limit use the global-memory kernels.
size_t small_windows(const Impl& m, size_t fixed) {
    const size_t half = size_t(m.smem_per_sm) / 2;
    return half > fixed + 2048 ? half - fixed - 2048 : 0;
}

size_t window_budget(const Impl& m, size_t fixed) {
    const size_t device = m.max_smem > 0 && size_t(m.max_smem) > fixed ? size_t(m.max_smem) - fixed : 0;
    return m.window_limit > 0 ? std::min(device, m.window_limit) : device;
}

int planes_per_launch(const Impl& m) {
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

void forward_default(Impl& m, const ClassList& C, const float* image, const float* skip, float* y, cudaStream_t s) {
    const Layout& L = m.L;
    float* X = m.workspace(m.fwd_work);
    rearrange(L, image, X, true, s);
    const int per = planes_per_launch(m);
    const size_t fixed = fwd_smem(per, L.D, 0).total;
    const size_t budget = window_budget(m, fixed + 1024);
    const size_t small = std::min(small_windows(m, fixed), budget);
    for_each_entry_chunk(C, [&](int a0, int n) {
        // launch groups: (tier 0 small / 1 large staged / 2 global, LORs per block)
        std::vector<int> tier(n), lpb(n);
        std::vector<int64_t> need(n);
        for (int q = 0; q < n; ++q) {
            const int k = C.index[a0 + q];
            const ClassInfo c = class_info(L, k);
            auto bound = [&](int lors) {
                return fwd_window_bound(c.pos_y, c.pos_z, L.D, m.sy_max[k], m.sz_max[k], lors);
            };
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
                    P.k[P.n_entries] = k;
                    P.out[P.n_entries] = C.offset[a0 + q];
                    P.first_block[P.n_entries] = static_cast<int>(blocks);
                    blocks += int64_t(c.n_signs) * div_up(int64_t(c.pos_y) * c.pos_z, lors);
                    cap = std::max(cap, need[q]);
                    ++P.n_entries;
                }
                if (P.n_entries == 0) continue;
                P.first_block[P.n_entries] = static_cast<int>(blocks);
                P.win_cap = static_cast<int>(cap);
                for (int p0 = 0; p0 < L.n_planes; p0 += per) {
                    P.p_begin = p0;
                    P.n_planes = std::min(per, L.n_planes - p0);
                    P.accumulate = p0 > 0;
                    const size_t smem = fwd_smem(P.n_planes, L.D, P.win_cap).total;
                    if (t == 2) fwd_default_kernel<false><<<static_cast<unsigned>(blocks), kThreads, smem, s>>>(
                        P, X, m.taps.as<DTap>(), m.row_start.as<int64_t>(), m.rzg.as<int>(), m.boxes.as<short4>(), skip, y);
                    else fwd_default_kernel<true><<<static_cast<unsigned>(blocks), kThreads, smem, s>>>(
                        P, X, m.taps.as<DTap>(), m.row_start.as<int64_t>(), m.rzg.as<int>(), m.boxes.as<short4>(), skip, y);
                    DP_CUDA_CHECK_LAUNCH("fwd_default_kernel");
                }
            }
        }
    });
}

void back_default(Impl& m, const ClassList& C, const float* y, float* image, cudaStream_t s) {
    const Layout& L = m.L;
    if (L.n_planes > 65535) throw ValueError("n_planes: the CUDA back projector handles at most 65535 planes");
    float* Xb = m.workspace(m.back_work);
    const BackGrid G = back_grid(L.n_y, L.n_z);
    const int chunks = div_up(int64_t(L.D) * L.D, kGroups);
    const size_t fixed = back_smem(kMaxEntries, 0).total;
    const size_t budget = window_budget(m, fixed + 1024);
    bool first = true;
    for_each_entry_chunk(C, [&](int a0, int n) {
        std::vector<int> tier(n);
        std::vector<int64_t> need(n);
        for (int q = 0; q < n; ++q) {
            const int k = C.index[a0 + q];
            need[q] = back_window_bound(G, L.n_y, L.n_z, m.sy_max[k], m.sz_max[k]);
            tier[q] = size_t(need[q]) * 8 <= budget ? 0 : 1;
        }
        for (int t = 0; t < 2; ++t) {
            BackLaunch P{};
            P.L = L;
            int64_t cap = 0;
            for (int q = 0; q < n; ++q) {
                if (tier[q] != t) continue;
                P.k[P.n_entries] = C.index[a0 + q];
                P.in[P.n_entries] = C.offset[a0 + q];
                cap = std::max(cap, need[q]);
                ++P.n_entries;
            }
            if (P.n_entries == 0) continue;
            P.y_cap = t == 1 ? 0 : static_cast<int>(cap);
            P.accumulate = first ? 0 : 1;
            first = false;
            const size_t smem = back_smem(P.n_entries, P.y_cap).total;
            // residue chunks of kGroups (all full for D = 4; a partial last chunk otherwise)
            const int full = (L.D * L.D) / kGroups, part = chunks - full;
            auto launch = [&](auto kernel, int n_chunks, int first_chunk) {
                if (n_chunks == 0) return;
                kernel<<<dim3(G.n_blocks, L.n_planes, n_chunks), kThreads, smem, s>>>(
                    P, first_chunk, y, m.q_start.as<int64_t>(), m.q_pos.as<int>(), m.q_w.as<float>(),
                    m.boxes.as<short4>(), Xb);
                DP_CUDA_CHECK_LAUNCH("back_default_kernel");
            };
            if (t == 1) {
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

// AlgLaunch of entries [a0, a0 + n): first = LOR (per_lor) or shift-position prefix.
AlgLaunch alg_launch(const Layout& L, const ClassList& C, int a0, int n, bool per_lor) {
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
            const size_t need = size_t(kAlg2Batch) * 4 * kAlgThreads * sizeof(float);
            if (m.partial.bytes() < need) {
                m.partial = cuda::DeviceBuffer();
                m.partial = cuda::DeviceBuffer(need);
            }
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

}  // namespace

void forward(Method method, DeviceModel& model, const ClassList& classes, const float* image, const float* skip,
             float* y, void* stream) {
    auto& m = model.impl();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (classes.index.empty()) throw ValueError("classes: expected at least one class");
    if (method == Method::Default) forward_default(m, classes, image, skip, y, s);
    else forward_alg(method, m, classes, image, skip, y, s);
}

void back(Method method, DeviceModel& model, const ClassList& classes, const float* y, float* image, void* stream) {
    auto& m = model.impl();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (classes.index.empty()) throw ValueError("classes: expected at least one class");
    if (method == Method::Default) back_default(m, classes, y, image, s);
    else back_alg(method, m, classes, y, image, s);
}

}  // namespace dp::dualhead::gpu
