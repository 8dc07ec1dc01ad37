#include <algorithm>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/errors.hpp"
#include "columns.hpp"
#include "cuda.hpp"

namespace dp::direct::gpu {

Method parse_method(const std::string& name) {
    if (name == "tlp") return Method::tlp;
    if (name == "ilp") return Method::ilp;
    if (name == "columns" || name == "default") return Method::columns;
    if (name == "columns24") return Method::columns24;
    if (name == "columns32") return Method::columns32;
    throw ValueError("method: expected 'default', 'columns', 'columns24', 'columns32', 'tlp' or 'ilp', got '" + name + "'");
}

namespace {

template <typename T>
cuda::DeviceBuffer upload(const T* host, size_t count) {
    cuda::DeviceBuffer b(count * sizeof(T));
    b.upload(host, count * sizeof(T));
    return b;
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
    // (each group padded with zero weights to its class span), order by class.
    int halo[3];
    const std::vector<KernelColumn> cols = kernel_columns(h, d, halo);
    struct Piece {
        int dy, dx, dz_min, cls;
        std::vector<int> taps;
    };
    std::vector<Piece> pieces;
    const int max_span = kSpanClasses[kNumSpanClasses - 1];
    for (const KernelColumn& c : cols)
        for (size_t k0 = 0; k0 < c.taps.size(); k0 += max_span) {
            const size_t k1 = std::min(c.taps.size(), k0 + max_span);
            std::vector<int> taps(c.taps.begin() + k0, c.taps.begin() + k1);
            const int cls = span_class(static_cast<int>(taps.size()));
            pieces.push_back({c.dy, c.dx, c.dz_min + static_cast<int>(k0), cls, std::move(taps)});
        }
    std::stable_sort(pieces.begin(), pieces.end(),
                     [](const Piece& a, const Piece& b) { return a.cls < b.cls; });
    std::vector<int> groups;
    wstride_ = 0;
    for (const Piece& p : pieces) {
        groups.insert(groups.end(), {p.dy, p.dx, p.dz_min, wstride_});
        wstride_ += kSpanClasses[p.cls];
    }
    for (int c = 0, g = 0; c <= kNumSpanClasses; ++c) {
        while (g < static_cast<int>(pieces.size()) && pieces[g].cls < c) ++g;
        class_begin_[c] = g;
    }
    // Weights are stored tap-major, (stride, n_kernels): the lanes of a warp hold neighbouring
    // pixels whose identifiers are consecutive, so one weight load of the warp touches one or two
    // cache lines instead of one line per lane.
    std::vector<float> wf(static_cast<size_t>(n_kernels_) * wstride_, 0.0f), wb(wf.size(), 0.0f);
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
    groups_ = upload(groups.data(), groups.size());
    w_fwd_ = upload(wf.data(), wf.size());
    w_back_ = upload(wb.data(), wb.size());
}

LutRef DeviceLut::device_ref() const {
    return {lormap_.as<int32_t>(), offsets_.as<int32_t>(), flip_.as<int32_t>(), values_.as<float>(),
            n_offsets_, n_kernels_};
}

size_t DeviceLut::bytes() const {
    return lormap_.bytes() + offsets_.bytes() + flip_.bytes() + values_.bytes() + groups_.bytes() +
           w_fwd_.bytes() + w_back_.bytes();
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

// ---- columns (default) ---------------------------------------------------------------------------
constexpr int kColumnsBlock = 128;

struct ColumnPlan {
    const int4* groups;     // (dy, dx, dz_min, weight tap column)
    const float* weights;   // (stride, n_kernels) tap-major; flipped taps for the forward projection
    const int* lormap;
    int n_kernels;
    int class_begin[kNumSpanClasses + 1];
};

// All groups of one span class S: load the R + S - 1 source values of the neighbour column once,
// then apply the S taps to the R outputs from registers.
template <bool kForward, int R, int S>
__device__ __forceinline__ void column_class(const float* __restrict__ src, const ColumnPlan& p,
                                             const Dims& d, int cls, int x, int y, int z0,
                                             int own_id, float (&acc)[R]) {
    const long long plane = static_cast<long long>(d.ny) * d.nx;
    for (int g = p.class_begin[cls]; g < p.class_begin[cls + 1]; ++g) {
        const int4 G = __ldg(p.groups + g);
        const int qy = y + G.x, qx = x + G.y;
        const bool inside_xy = qy >= 0 && qy < d.ny && qx >= 0 && qx < d.nx;
        const int q = inside_xy ? qy * d.nx + qx : 0;
        const int id = kForward ? __ldg(p.lormap + q) : own_id;
        const float* wcol = p.weights + static_cast<long long>(G.w) * p.n_kernels + id;
        const float* col = src + q;
        const int zs = z0 + G.z;
        float win[R + S - 1];
#pragma unroll
        for (int k = 0; k < R + S - 1; ++k) {
            const int z = zs + k;
            win[k] = (inside_xy && z >= 0 && z < d.nz) ? __ldg(col + z * plane) : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < S; ++s) {
            const float w = __ldg(wcol + s * p.n_kernels);
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] = fmaf(w, win[r + s], acc[r]);
        }
    }
}

template <bool kForward, int R, int... C>
__device__ __forceinline__ void all_classes(const float* src, const ColumnPlan& p, const Dims& d,
                                            int x, int y, int z0, int own_id, float (&acc)[R],
                                            std::integer_sequence<int, C...>) {
    (column_class<kForward, R, kSpanClasses[C]>(src, p, d, C, x, y, z0, own_id, acc), ...);
}

template <bool kForward, int R>
__global__ void __launch_bounds__(kColumnsBlock)
columns_kernel(const float* __restrict__ src, float* __restrict__ dst, Dims d, ColumnPlan p) {
    const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
    if (pixel >= d.ny * d.nx) return;
    const int y = pixel / d.nx, x = pixel - y * d.nx;
    const int z0 = blockIdx.y * R;
    const int own_id = kForward ? 0 : __ldg(p.lormap + pixel);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    all_classes<kForward, R>(src, p, d, x, y, z0, own_id, acc,
                             std::make_integer_sequence<int, kNumSpanClasses>{});
    const long long plane = static_cast<long long>(d.ny) * d.nx;
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (z0 + r < d.nz) dst[(z0 + r) * plane + pixel] = acc[r];
}

template <bool kForward, int R>
void launch_columns(const float* src, float* dst, const DeviceLut& lut, cudaStream_t stream) {
    const Dims d = lut.dims();
    ColumnPlan p{reinterpret_cast<const int4*>(lut.groups()), lut.weights(kForward),
                 lut.device_ref().lormap, lut.device_ref().n_kernels, {}};
    std::copy(lut.class_begin(), lut.class_begin() + kNumSpanClasses + 1, p.class_begin);
    const dim3 grid((d.ny * d.nx + kColumnsBlock - 1) / kColumnsBlock, (d.nz + R - 1) / R);
    columns_kernel<kForward, R><<<grid, kColumnsBlock, 0, stream>>>(src, dst, d, p);
    DP_CUDA_CHECK_LAUNCH("direct columns_kernel");
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
        case Method::columns24:
            return launch_columns<kForward, 24>(src, dst, lut, stream);
        case Method::columns32:
            return launch_columns<kForward, 32>(src, dst, lut, stream);
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
