// Dual-head projectors on the GPU: the resident model (the host model uploaded once, regrouped for the
// forward's tap walk and the back projection's cell offsets) and the dispatch of forward / back to the
// default tiled pair (cuda_default.cu) or the paper's algorithms 1-3 (cuda_paper.cu). Every method
// computes y[lor] = sum_p sum_taps w * image[v_z, v_y, p] with the addressing of layout.hpp (tap_voxel),
// and its exact transpose.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_internal.cuh"

namespace dp::dualhead::gpu {

using namespace detail;

DeviceModel::Impl::Impl(const HostModel& h, size_t limit) : L(h.L), n_taps(h.n_taps()), window_limit(limit) {
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
    allow_default_kernels_smem(max_smem);
}

DeviceModel::DeviceModel(const HostModel& host, size_t window_limit) : impl_(std::make_unique<Impl>(host, window_limit)) {}
DeviceModel::~DeviceModel() = default;
const Layout& DeviceModel::layout() const { return impl_->L; }
int64_t DeviceModel::n_taps() const { return impl_->n_taps; }
size_t DeviceModel::model_bytes() const { return impl_->model_bytes(); }
size_t DeviceModel::bytes() const {
    const Impl& m = *impl_;
    return m.model_bytes() + m.fwd_work.bytes() + m.back_work.bytes() + m.partial.bytes() + m.back_order.bytes() +
           m.fwd_partial.bytes() + m.fwd_done.bytes();
}
int DeviceModel::plane_groups() const { return impl_->plane_groups; }
void DeviceModel::set_plane_groups(int groups) {
    if (groups < 0) throw ValueError("plane_groups: expected >= 0 (0: automatic), got " + std::to_string(groups));
    impl_->plane_groups = groups;
}
bool DeviceModel::narrow_blocks() const { return impl_->narrow_blocks; }
void DeviceModel::set_narrow_blocks(bool on) { impl_->narrow_blocks = on; }
bool DeviceModel::back_heavy_first() const { return impl_->back_heavy_first; }
void DeviceModel::set_back_heavy_first(bool on) { impl_->back_heavy_first = on; }
int DeviceModel::fwd_groups_per_launch() const { return impl_->fwd_groups_per_launch; }
void DeviceModel::set_fwd_groups_per_launch(int groups) {
    if (groups < 0)
        throw ValueError("fwd_groups_per_launch: expected >= 0 (0: all that fit), got " + std::to_string(groups));
    impl_->fwd_groups_per_launch = groups;
}

Method parse_method(const std::string& name) {
    if (name == "default") return Method::Default;
    if (name == "alg1") return Method::Alg1;
    if (name == "alg2") return Method::Alg2;
    if (name == "alg3") return Method::Alg3;
    throw ValueError("method: expected 'default', 'alg1', 'alg2' or 'alg3', got '" + name + "'");
}

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
