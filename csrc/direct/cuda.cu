#include <cuda_pipeline.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/errors.hpp"
#include "columns.hpp"
#include "cuda.hpp"

namespace dp::direct::gpu {

Method parse_method(const std::string& name) {
    if (name == "tlp") return Method::tlp;
    if (name == "ilp") return Method::ilp;
    if (name == "slab" || name == "default") return Method::slab;
    if (name == "slab_table") return Method::slab_table;
    if (name == "columns") return Method::columns;
    throw ValueError("method: expected 'default', 'slab', 'slab_table', 'columns', 'tlp' or 'ilp', got '" + name + "'");
}

namespace {

template <typename T>
cuda::DeviceBuffer upload(const T* host, size_t count) {
    cuda::DeviceBuffer b(count * sizeof(T));
    b.upload(host, count * sizeof(T));
    return b;
}

// Factor each group's tap weights W[(w0 + k) * nk + a] = h[g * nk + a] * t[w0 + k]. The reference
// tap is the group's largest; the result is accepted when it reproduces every weight to 2e-6 of
// the table's largest value (float rounding of the product is ~1e-7 relative).
bool factor_columns(const std::vector<float>& W, const std::vector<int>& groups,
                    const std::vector<int>& taps_per_group, int nk, std::vector<float>& h,
                    std::vector<float>& t) {
    const size_t n_groups = taps_per_group.size();
    const size_t stride = W.size() / nk;
    h.assign(n_groups * nk, 0.0f);
    t.assign(stride, 0.0f);
    float wmax = 0.0f;
    for (float v : W) wmax = std::max(wmax, std::fabs(v));
    const double tol = 2e-6 * wmax;
    for (size_t g = 0; g < n_groups; ++g) {
        const size_t w0 = groups[4 * g + 3];
        const int n = taps_per_group[g];
        int k_ref = 0, a_ref = 0;
        double best = -1.0;
        for (int k = 0; k < n; ++k)
            for (int a = 0; a < nk; ++a)
                if (W[(w0 + k) * nk + a] > best) best = W[(w0 + k) * nk + a], k_ref = k, a_ref = a;
        if (best <= 0.0) continue;  // an all-zero column: h = t = 0 reproduces it
        for (int a = 0; a < nk; ++a) h[g * nk + a] = W[(w0 + k_ref) * nk + a];
        for (int k = 0; k < n; ++k) t[w0 + k] = static_cast<float>(W[(w0 + k) * nk + a_ref] / best);
        for (int k = 0; k < n; ++k)
            for (int a = 0; a < nk; ++a)
                if (std::fabs(static_cast<double>(h[g * nk + a]) * t[w0 + k] - W[(w0 + k) * nk + a]) > tol)
                    return false;
    }
    return true;
}

int span_class(int taps) {
    for (int c = 0; c < kNumSpanClasses; ++c)
        if (taps <= kSpanClasses[c]) return c;
    return -1;
}

}  // namespace

DeviceLut::DeviceLut(const LutRef& h, const Dims& d)
    : dims_(d), n_offsets_(h.n_offsets), n_kernels_(h.n_kernels) {
    lormap_ = upload(h.lormap, static_cast<size_t>(d.ny) * d.nx);
    offsets_ = upload(h.offsets, static_cast<size_t>(h.n_offsets) * 3);
    flip_ = upload(h.flip, static_cast<size_t>(h.n_offsets));
    values_ = upload(h.values, static_cast<size_t>(h.n_offsets) * h.n_kernels);

    // Column plan: split columns longer than the largest span class, bucket them by span class
    // (each group padded with zero weights to its class span), order by (dy, class, dx).
    int halo[3];
    const std::vector<KernelColumn> cols = kernel_columns(h, d, halo);
    halo_x_ = halo[2];
    struct Piece {
        int dy, dx, dz_min, cls;
        std::vector<int> taps;
    };
    std::vector<Piece> pieces;
    auto pieces_taps = [](const std::vector<Piece>& ps) {
        std::vector<int> n;
        for (const Piece& p : ps) n.push_back(static_cast<int>(p.taps.size()));
        return n;
    };
    const int max_span = kSpanClasses[kNumSpanClasses - 1];
    for (const KernelColumn& c : cols)
        for (size_t k0 = 0; k0 < c.taps.size(); k0 += max_span) {
            const size_t k1 = std::min(c.taps.size(), k0 + max_span);
            std::vector<int> taps(c.taps.begin() + k0, c.taps.begin() + k1);
            const int cls = span_class(static_cast<int>(taps.size()));
            pieces.push_back({c.dy, c.dx, c.dz_min + static_cast<int>(k0), cls, std::move(taps)});
        }
    std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
        return a.dy != b.dy ? a.dy < b.dy : a.cls != b.cls ? a.cls < b.cls : a.dx < b.dx;
    });
    std::vector<int> groups, rows;
    int wstride = 0;
    for (size_t g = 0; g < pieces.size(); ++g) {
        const Piece& p = pieces[g];
        if (g == 0 || p.dy != pieces[g - 1].dy) {  // new row
            RowInfo r{p.dy, p.dz_min, 0, {}};
            size_t e = g;
            int z_hi = p.dz_min;
            for (; e < pieces.size() && pieces[e].dy == p.dy; ++e) {
                r.z_lo = std::min(r.z_lo, pieces[e].dz_min);
                z_hi = std::max(z_hi, pieces[e].dz_min + kSpanClasses[pieces[e].cls] - 1);
            }
            r.z_extent = z_hi - r.z_lo + 1;
            for (int c = 0; c <= kNumSpanClasses; ++c) {
                size_t k = g;
                while (k < e && pieces[k].cls < c) ++k;
                r.class_begin[c] = static_cast<int>(k);
            }
            int taps = 0;
            for (size_t k = g; k < e; ++k) taps += kSpanClasses[pieces[k].cls];
            rows.insert(rows.end(), {r.dy, r.z_lo, r.z_extent});
            rows.insert(rows.end(), r.class_begin, r.class_begin + kNumSpanClasses + 1);
            rows.insert(rows.end(), {wstride, wstride + taps});
            max_row_taps_ = std::max(max_row_taps_, taps);
        }
        groups.insert(groups.end(), {p.dy, p.dx, p.dz_min, wstride});
        wstride += kSpanClasses[p.cls];
    }
    n_rows_ = static_cast<int>(rows.size() / kRowInts);
    for (int r = 0; r < n_rows_; ++r)
        max_row_groups_ = std::max(max_row_groups_, rows[r * kRowInts + kRowClassBegin + kNumSpanClasses] -
                                                        rows[r * kRowInts + kRowClassBegin]);
    z_lo_ = 0;
    int z_hi = 0;
    for (int r = 0; r < n_rows_; ++r) {
        z_lo_ = std::min(z_lo_, rows[r * kRowInts + 1]);
        z_hi = std::max(z_hi, rows[r * kRowInts + 1] + rows[r * kRowInts + 2] - 1);
    }
    z_span_ = z_hi - z_lo_ + 1;
    // The kernel row where half of the padded taps are done (rows are in dy order).
    {
        long long total = 0, acc = 0;
        for (int r = 0; r < n_rows_; ++r) total += rows[r * kRowInts + kRowTapBegin + 1] - rows[r * kRowInts + kRowTapBegin];
        row_split_ = std::max(1, n_rows_ / 2);
        for (int r = 0; r < n_rows_; ++r) {
            acc += rows[r * kRowInts + kRowTapBegin + 1] - rows[r * kRowInts + kRowTapBegin];
            if (2 * acc >= total) {
                row_split_ = std::min(std::max(r + 1, 1), std::max(n_rows_ - 1, 1));
                break;
            }
        }
    }
    // Weights are stored tap-major, (stride, n_kernels): the lanes of a warp hold neighbouring
    // pixels whose identifiers are consecutive, so one weight load of the warp touches one or two
    // cache lines instead of one line per lane.
    std::vector<float> wf(static_cast<size_t>(n_kernels_) * wstride, 0.0f), wb(wf.size(), 0.0f);
    for (size_t g = 0; g < pieces.size(); ++g) {
        const int w0 = groups[4 * g + 3];
        for (size_t k = 0; k < pieces[g].taps.size(); ++k) {
            const int i = pieces[g].taps[k];
            for (int a = 0; a < n_kernels_; ++a) {
                const size_t at = (static_cast<size_t>(w0) + k) * n_kernels_ + a;
                wb[at] = h.values[back_weight_index(a, i, n_offsets_)];
                wf[at] = h.values[forward_weight_index(a, h.flip[i], n_offsets_)];
            }
        }
    }
    rows_ = upload(rows.data(), rows.size());
    groups_ = upload(groups.data(), groups.size());
    w_fwd_ = upload(wf.data(), wf.size());
    w_back_ = upload(wb.data(), wb.size());
    std::vector<float> radial, taps;
    const std::vector<int> n_taps = pieces_taps(pieces);
    if ((factored_fwd_ = factor_columns(wf, groups, n_taps, n_kernels_, radial, taps))) {
        h_fwd_ = upload(radial.data(), radial.size());
        t_fwd_ = upload(taps.data(), taps.size());
    }
    if ((factored_back_ = factor_columns(wb, groups, n_taps, n_kernels_, radial, taps))) {
        h_back_ = upload(radial.data(), radial.size());
        t_back_ = upload(taps.data(), taps.size());
    }
}

LutRef DeviceLut::device_ref() const {
    return {lormap_.as<int32_t>(), offsets_.as<int32_t>(), flip_.as<int32_t>(), values_.as<float>(),
            n_offsets_, n_kernels_};
}

size_t DeviceLut::bytes() const {
    return lormap_.bytes() + offsets_.bytes() + flip_.bytes() + values_.bytes() + groups_.bytes() +
           rows_.bytes() + w_fwd_.bytes() + w_back_.bytes() + h_fwd_.bytes() + h_back_.bytes() +
           t_fwd_.bytes() + t_back_.bytes();
}

namespace {

// ---- tlp: one voxel per thread, the shared per-voxel math -------------------------------------
template <bool kForward>
__global__ void tlp_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, LutRef lut) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= d.nx || y >= d.ny || z >= d.nz) return;
    dst[(static_cast<long long>(z) * d.ny + y) * d.nx + x] = project_voxel<kForward>(src, d, lut, z, y, x);
}

// ---- ilp: 16 z-voxels per thread, one weight fetch per offset (the paper's Fig. 3) -------------
constexpr int kIlpRun = 16;

template <bool kForward>
__global__ void ilp_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, LutRef lut) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * kIlpRun;
    if (x >= d.nx || y >= d.ny) return;
    const long long plane = static_cast<long long>(d.ny) * d.nx;
    const int own = __ldg(lut.lormap + y * d.nx + x);
    float acc[kIlpRun] = {};
    for (int i = 0; i < lut.n_offsets; ++i) {
        const int dz = __ldg(lut.offsets + 3 * i), sy = y + __ldg(lut.offsets + 3 * i + 1),
                  sx = x + __ldg(lut.offsets + 3 * i + 2);
        if (sy < 0 || sy >= d.ny || sx < 0 || sx >= d.nx) continue;
        const int w = kForward ? forward_weight_index(__ldg(lut.lormap + sy * d.nx + sx), __ldg(lut.flip + i), lut.n_offsets)
                               : back_weight_index(own, i, lut.n_offsets);
        const float wv = __ldg(lut.values + w);
        const float* col = src + static_cast<long long>(sy) * d.nx + sx;
#pragma unroll
        for (int j = 0; j < kIlpRun; ++j) {
            const int z = z0 + j + dz;
            if (z >= 0 && z < d.nz) acc[j] = fmaf(wv, __ldg(col + z * plane), acc[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < kIlpRun; ++j)
        if (z0 + j < d.nz) dst[(z0 + j) * plane + static_cast<long long>(y) * d.nx + x] = acc[j];
}

// ---- columns and slab ------------------------------------------------------------------------------
struct ColumnPlan {
    const int4* groups;    // (dy, dx, dz_min, weight tap column), sorted by (dy, class, dx)
    const int* rows;       // n_rows x kRowInts (RowInfo)
    const float* weights;  // (stride, n_kernels) tap-major; flipped taps for the forward projection
    const float* radial;   // factored weights: (n_groups, n_kernels), or null
    const float* tap_factor;  // factored weights: (stride,), or null
    const int* lormap;
    int n_kernels, n_rows;
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
constexpr int kSlabRun = 16;  // output z-voxels per thread in the slab kernel

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

template <bool kForward, typename Source>
__device__ __forceinline__ float radial_weight(const Source& in, const ColumnPlan& p, const int4* groups, int g,
                                               int ny, int nx, int x, int y, int own_id) {
    return __ldg(p.radial + static_cast<long long>(g) * p.n_kernels +
                 kernel_id<kForward>(in, p, groups[g], ny, nx, x, y, own_id));
}

// Radial weights of the next kPrefetch columns, in flight while the current column is computed.
constexpr int kPrefetch = 3;
struct RadialQueue {
    float h[kPrefetch];
};

// All groups [g0, g1) of one span class S: load the R + S - 1 source values of the neighbour
// column once, then apply the S taps to the R outputs from registers. `groups` may point to
// global or shared memory.
//   table path:    each tap's weight is gathered from the (stride, n_kernels) table.
//   factored path: weight = radial(group, id) * tap_factor(tap); the one gathered value per
//                  column is loaded kPrefetch columns ahead -- across span classes, up to the end
//                  of the kernel row g_end -- so its latency (an L2 read) hides behind the
//                  multiply-adds of the columns before it; tap factors come from shared memory.
template <bool kForward, int R, int S, bool kFactored, typename Source>
__device__ __forceinline__ void column_class(const Source& in, const ColumnPlan& p, const int4* groups,
                                             const float* taps, int g0, int g1, int g_end, int ny, int nx,
                                             int x, int y, int z0, int own_id, RadialQueue& q,
                                             float (&acc)[R]) {
    for (int g = g0; g < g1; ++g) {
        const int4 G = groups[g];
        float w[S];
        if (kFactored) {
            const float h = q.h[0];
#pragma unroll
            for (int k = 0; k + 1 < kPrefetch; ++k) q.h[k] = q.h[k + 1];
            q.h[kPrefetch - 1] = g + kPrefetch < g_end
                                     ? radial_weight<kForward>(in, p, groups, g + kPrefetch, ny, nx, x, y, own_id)
                                     : 0.0f;
#pragma unroll
            for (int s = 0; s < S; ++s) w[s] = h * taps[G.w + s];
        } else {
            const float* wcol = p.weights + static_cast<long long>(G.w) * p.n_kernels + kernel_id<kForward>(in, p, G, ny, nx, x, y, own_id);
#pragma unroll
            for (int s = 0; s < S; ++s) w[s] = __ldg(wcol + s * p.n_kernels);
        }
        float win[R + S - 1];
        load_window<R, S>(in, G, ny, nx, x, y, z0, win);
#pragma unroll
        for (int s = 0; s < S; ++s) {
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] = fmaf(w[s], win[r + s], acc[r]);
        }
    }
}

template <bool kForward, int R, bool kFactored, typename Source, int... C>
__device__ __forceinline__ void row_classes(const Source& in, const ColumnPlan& p, const int4* groups,
                                            const float* taps, const int* row, const Dims& d, int x, int y,
                                            int z0, int own_id, float (&acc)[R], std::integer_sequence<int, C...>) {
    const int g_begin = __ldg(row + kRowClassBegin), g_end = __ldg(row + kRowClassBegin + kNumSpanClasses);
    RadialQueue q;
#pragma unroll
    for (int k = 0; k < kPrefetch; ++k)
        q.h[k] = kFactored && g_begin + k < g_end
                     ? radial_weight<kForward>(in, p, groups, g_begin + k, d.ny, d.nx, x, y, own_id) : 0.0f;
    (column_class<kForward, R, kSpanClasses[C], kFactored>(in, p, groups, taps, __ldg(row + kRowClassBegin + C),
                                                            __ldg(row + kRowClassBegin + 1 + C), g_end, d.ny,
                                                            d.nx, x, y, z0, own_id, q, acc), ...);
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

// Slab: a block computes a TX x TY pixel tile (32 x 4 or 16 x 8) for a z-run of R and walks the
// kernel's rows dy in increasing order. Shared memory holds the source rows y0 + dy .. y0 + dy +
// TY - 1 (x from x0 - halo, z from z0 + z_lo over the support's whole z range + R - 1) in a ring of
// row slots, with, for the forward projection, the same rows of LORmap. While the block computes
// row dy, asynchronous copies (cp.async, zero-filled outside the volume) bring in source row
// y0 + dy + TY and the next kernel row's groups and tap factors, so the copies' latency hides
// behind the multiply-adds. Windows are read at immediate offsets.
// Ring depth SLOTS: with TY + 2 slots (TY rows in use, 1 being filled, 1 still read by threads
// finishing the previous row) one barrier per kernel row suffices; with TY + 1 slots (used when
// the deeper ring would cost blocks per SM) a second barrier guards the slot being refilled.
// PITCH (floats per slot row) is >= TX + 2 halo; for 16-wide tiles it is 16 mod 32 so that the two
// pixel rows of a warp fall in different shared-memory banks.
template <bool kForward, int TX, int TY, int PITCH, bool kFactored, int SLOTS>
__global__ void __launch_bounds__(TX * TY, 4)
slab_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, ColumnPlan p, int halo,
            int z_lo, int z_ext, int max_row_groups, int max_row_taps, int row_split) {
    static_assert(SLOTS == TY + 1 || SLOTS == TY + 2, "ring depth");
    constexpr int kSlots = SLOTS, kPlanBuffers = SLOTS == TY + 2 ? 3 : 2;
    // Shared memory: source [z_ext][kSlots][PITCH]; identifiers [kSlots][PITCH] (forward);
    // row groups [kPlanBuffers][max_row_groups]; tap factors [kPlanBuffers][max_row_taps].
    extern __shared__ __align__(16) float smem[];
    constexpr int R = kSlabRun;
    constexpr int kZStride = kSlots * PITCH;
    float* slab = smem;
    int* ring_ids = reinterpret_cast<int*>(slab + z_ext * kZStride);
    int4* group_buf = reinterpret_cast<int4*>(ring_ids + (kForward ? kSlots * PITCH : 0));
    float* tap_buf = reinterpret_cast<float*>(group_buf + kPlanBuffers * max_row_groups);

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

    // Asynchronous copy of source row gy (and its identifiers) into its ring slot; elements outside
    // the volume are zero-filled by the copy itself (source size 0).
    auto stage_row = [&](int gy) {
        const int slot = ((gy % kSlots) + kSlots) % kSlots;
        const bool row_in = gy >= 0 && gy < d.ny;
        // (sz, sx) walk the z_ext x width slab row by row; stepping them incrementally avoids an
        // integer division per element.
        int sz = tid / width, sx = tid - sz * width;
        const int step_z = kThreads / width, step_x = kThreads - step_z * width;
        const float* row_src = src + static_cast<long long>(row_in ? gy : 0) * d.nx;
        for (; sz < z_ext;) {
            const int gx = x0 - halo + sx, gz = z0 + z_lo + sz;
            const bool in = row_in && gx >= 0 && gx < d.nx && gz >= 0 && gz < d.nz;
            __pipeline_memcpy_async(slab + sz * kZStride + slot * PITCH + sx, in ? row_src + gz * plane + gx : src,
                                    sizeof(float), in ? 0 : sizeof(float));
            sx += step_x;
            sz += step_z;
            if (sx >= width) {
                sx -= width;
                ++sz;
            }
        }
        if (kForward)
            for (int k = tid; k < width; k += kThreads) {
                const int gx = x0 - halo + k;
                const bool in = row_in && gx >= 0 && gx < d.nx;
                __pipeline_memcpy_async(ring_ids + slot * PITCH + k, in ? p.lormap + gy * d.nx + gx : p.lormap,
                                        sizeof(int), in ? 0 : sizeof(int));
            }
    };
    // Asynchronous copy of kernel row `row`'s groups and tap factors into buffer row % kPlanBuffers.
    auto stage_plan = [&](int row) {
        const int* info = p.rows + row * kRowInts;
        const int g0 = __ldg(info + kRowClassBegin), g1 = __ldg(info + kRowClassBegin + kNumSpanClasses);
        for (int g = g0 + tid; g < g1; g += kThreads)
            __pipeline_memcpy_async(group_buf + (row % kPlanBuffers) * max_row_groups + g - g0, p.groups + g, sizeof(int4));
        if (kFactored) {
            const int t0 = __ldg(info + kRowTapBegin), t1 = __ldg(info + kRowTapBegin + 1);
            for (int t = t0 + tid; t < t1; t += kThreads)
                __pipeline_memcpy_async(tap_buf + (row % kPlanBuffers) * max_row_taps + t - t0, p.tap_factor + t, sizeof(float));
        }
    };

    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    const int dy0 = __ldg(p.rows + row_begin * kRowInts);
    for (int k = 0; k < TY; ++k) stage_row(y0 + dy0 + k);  // the first ring position
    stage_plan(row_begin);
    __pipeline_commit();
    for (int row = row_begin; row < row_end; ++row) {
        const int* info = p.rows + row * kRowInts;
        const int dy = __ldg(info);
        // A gap in dy (not produced by ellipsoidal supports) needs the whole ring restaged.
        if (row > row_begin && dy != __ldg(info - kRowInts) + 1) {
            __pipeline_wait_prior(0);
            __syncthreads();
            for (int k = 0; k < TY; ++k) stage_row(y0 + dy + k);
            __pipeline_commit();
        }
        // Prefetch for the next kernel row, then wait for everything but that prefetch.
        if (kSlots == TY + 1 && row > row_begin) __syncthreads();  // the refilled slot is free
        if (row + 1 < row_end) {
            stage_row(y0 + dy + TY);
            stage_plan(row + 1);
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        if (active) {
            const int slot = (((y + dy) % kSlots) + kSlots) % kSlots;
            const RingSlab<PITCH, SLOTS> in{slab + slot * PITCH + tx + halo - z_lo * kZStride,
                                     ring_ids + slot * PITCH + tx + halo};
            const int g_begin = __ldg(info + kRowClassBegin), t_begin = __ldg(info + kRowTapBegin);
            const int buf = row % kPlanBuffers;
            row_classes<kForward, R, kFactored>(in, p, group_buf + buf * max_row_groups - g_begin,
                                                tap_buf + buf * max_row_taps - t_begin, info, d, x, y, z0,
                                                own_id, acc, std::make_integer_sequence<int, kNumSpanClasses>{});
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

size_t slab_bytes(bool forward, const DeviceLut& lut, int tx, int slots, int slots_deep) {
    const size_t pitch = slab_pitch(tx, lut.halo_x());
    const size_t buffers = slots == slots_deep ? 3 : 2;
    return sizeof(float) * slots * pitch * (lut.z_span() + kSlabRun - 1) + (forward ? sizeof(int) * slots * pitch : 0) +
           buffers * (sizeof(int4) * lut.max_row_groups() + sizeof(float) * lut.max_row_taps());
}

ColumnPlan column_plan(bool forward, const DeviceLut& lut) {
    const bool f = lut.factored(forward);
    return {reinterpret_cast<const int4*>(lut.groups()), lut.rows(), lut.weights(forward),
            f ? lut.radial(forward) : nullptr, f ? lut.tap_factor(forward) : nullptr,
            lut.device_ref().lormap, lut.device_ref().n_kernels, lut.n_rows()};
}

template <bool kForward, int R>
void launch_columns(const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream) {
    const Dims d = lut.dims();
    const dim3 grid((d.ny * d.nx + kColumnsBlock - 1) / kColumnsBlock, (d.nz + R - 1) / R);
    columns_kernel<kForward, R><<<grid, kColumnsBlock, 0, stream>>>(src, dst, d, column_plan(kForward, lut));
    DP_CUDA_CHECK_LAUNCH("direct columns_kernel");
}

// Fraction of the resident block slots a grid of `blocks` keeps busy over its waves.
double wave_efficiency(long long blocks, long long slots) {
    const long long waves = (blocks + slots - 1) / slots;
    return static_cast<double>(blocks) / static_cast<double>(waves * slots);
}

template <bool kForward, int TX, int TY, int PITCH, bool kFactored, int SLOTS>
void launch_slab_config(const float* src, float* dst, const DeviceLut& lut, size_t bytes, cudaStream_t stream) {
    const Dims d = lut.dims();
    auto kernel = slab_kernel<kForward, TX, TY, PITCH, kFactored, SLOTS>;
    DP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    dim3 grid((d.nx + TX - 1) / TX, (d.ny + TY - 1) / TY, (d.nz + kSlabRun - 1) / kSlabRun);
    // When the tiles fill the GPU's block slots badly (e.g. 540 tiles on 396 slots: the second wave
    // 36 % full), split each tile's kernel rows over two blocks: twice the blocks, half the work
    // each, so the last wave is fuller. Worth it only for a clear gain (the split restages rows).
    int device = 0, n_sm = 0, per_sm = 0;
    DP_CUDA_CHECK(cudaGetDevice(&device));
    DP_CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
    DP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, TX * TY, bytes));
    const long long tiles = static_cast<long long>(grid.x) * grid.y * grid.z, slots = std::max(1, per_sm) * n_sm;
    int row_split = 0;
    if (lut.n_rows() >= 8 && wave_efficiency(2 * tiles, slots) > 1.15 * wave_efficiency(tiles, slots)) {
        row_split = lut.balanced_row_split();
        grid.z *= 2;
        DP_CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(float) * d.nz * d.ny * d.nx, stream));
    }
    kernel<<<grid, dim3(TX, TY), bytes, stream>>>(src, dst, d, column_plan(kForward, lut), lut.halo_x(), lut.z_lo(),
                                                 lut.z_span() + kSlabRun - 1, lut.max_row_groups(),
                                                 lut.max_row_taps(), row_split);
    DP_CUDA_CHECK_LAUNCH("direct slab_kernel");
}

template <bool kForward, int TX, int TY, int SLOTS>
void launch_slab_pitch(const float* src, float* dst, const DeviceLut& lut, bool factored, size_t bytes,
                       cudaStream_t stream) {
    const int pitch = slab_pitch(TX, lut.halo_x());
    constexpr int P[4] = {TX == 32 ? 64 : 48, TX == 32 ? 128 : 80, TX == 32 ? 256 : 144, TX == 32 ? 256 : 272};
    auto go = [&](auto pitch_c) {
        constexpr int PC = decltype(pitch_c)::value;
        if (factored) return launch_slab_config<kForward, TX, TY, PC, true, SLOTS>(src, dst, lut, bytes, stream);
        return launch_slab_config<kForward, TX, TY, PC, false, SLOTS>(src, dst, lut, bytes, stream);
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
// (same result, source through the caches) takes over.
template <bool kForward>
void launch_slab(const float* src, float* dst, const DeviceLut& lut, bool allow_factored, cudaStream_t stream) {
    int device = 0, max_block = 0, max_sm = 0;
    DP_CUDA_CHECK(cudaGetDevice(&device));
    DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    DP_CUDA_CHECK(cudaDeviceGetAttribute(&max_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    // The factored weights pay off once the per-tap table no longer sits in the caches (measured
    // on an H200: the stress kernel's 29 MB table 1.4x slower than factored, the clinical
    // kernel's 1 MB table 4 % faster).
    constexpr size_t kCachedTableBytes = 4u << 20;
    const bool factored = allow_factored && lut.factored(kForward) && lut.table_bytes() > kCachedTableBytes;
    auto fits4 = [&](size_t bytes) { return 4 * (bytes + 1024) <= static_cast<size_t>(max_sm); };
    const size_t narrow = slab_bytes(kForward, lut, 16, 10, 10);
    if (slab_pitch(16, lut.halo_x()) != 0 && fits4(narrow))
        return launch_slab_pitch<kForward, 16, 8, 10>(src, dst, lut, factored, narrow, stream);
    const size_t deep = slab_bytes(kForward, lut, 32, 6, 6), shallow = slab_bytes(kForward, lut, 32, 5, 6);
    if (slab_pitch(32, lut.halo_x()) != 0) {
        if (fits4(deep)) return launch_slab_pitch<kForward, 32, 4, 6>(src, dst, lut, factored, deep, stream);
        if (shallow <= static_cast<size_t>(max_block))
            return launch_slab_pitch<kForward, 32, 4, 5>(src, dst, lut, factored, shallow, stream);
    }
    return launch_columns<kForward, 16>(src, dst, lut, stream);
}

template <bool kForward>
void launch(Method m, const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream) {
    const Dims d = lut.dims();
    switch (m) {
        case Method::tlp: {
            const dim3 block(16, 16, 2);  // the paper's 512-thread block
            const dim3 grid((d.nx + 15) / 16, (d.ny + 15) / 16, (d.nz + 1) / 2);
            tlp_kernel<kForward><<<grid, block, 0, stream>>>(src, dst, d, lut.device_ref());
            DP_CUDA_CHECK_LAUNCH("direct tlp_kernel");
            return;
        }
        case Method::ilp: {
            const dim3 block(16, 16, 1);
            const dim3 grid((d.nx + 15) / 16, (d.ny + 15) / 16, (d.nz + kIlpRun - 1) / kIlpRun);
            ilp_kernel<kForward><<<grid, block, 0, stream>>>(src, dst, d, lut.device_ref());
            DP_CUDA_CHECK_LAUNCH("direct ilp_kernel");
            return;
        }
        case Method::columns:
            return launch_columns<kForward, 16>(src, dst, lut, stream);
        case Method::slab:
            return launch_slab<kForward>(src, dst, lut, true, stream);
        case Method::slab_table:
            return launch_slab<kForward>(src, dst, lut, false, stream);
    }
}

}  // namespace

void project(bool forward, Method method, const float* src, float* dst, const DeviceLut& lut, void* stream) {
    if (src == dst) throw ValueError("out: must not alias the input array");
    const auto s = static_cast<cudaStream_t>(stream);
    if (forward)
        launch<true>(method, src, dst, lut, s);
    else
        launch<false>(method, src, dst, lut, s);
}

}  // namespace dp::direct::gpu
