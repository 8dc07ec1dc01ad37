// FIRST Super-LOR projectors on the GPU: launches around tube.hpp.
// This file: the resident model (the host model's tables uploaded once, the Super-LOR tubes as a layered
// texture, the work units of the fast forward) and the dispatch of forward / back to the defaults
// (cuda_fast.cu) or the paper's texture design (cuda_faithful.cu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_internal.cuh"

namespace dp::first::gpu {

using namespace detail;

DeviceModel::Impl::Impl(const HostModel& h) : host(h) {
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
    table.create(D.n_j() * D.n_k(), D.n, D.n_super, true, 1);   // [S][i][(j, k)]: (j, k) fastest
    table.copy_from(host.table.data(), false, nullptr, D.n_super);
    table_linear = upload(host.table);
    DP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    pitch = (D.n_rows_ext() + 3) / 4 * 4;
    // the fast forward's shared planes: the taps reach rows K - base_min before slice 0 and base_max + K + 1
    // past the last; both paddings rounded up to 8 rows so that a plane's slices start 128-byte aligned in
    // shared memory (8 rows of 64 + 2J = 68 floats are 17 x 128 bytes), as a TMA box's destination must
    auto round8 = [](int v) { return (v + 7) / 8 * 8; };
    pz_lo = round8(D.K - host.base_min);
    plane_rows = round8(D.nz + pz_lo + host.base_max + D.K + 1);
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
    // the faithful forward's lattice texture: (pitch, nz, chunk n); checked when it is used. The lattice
    // is held twice (linear and as the texture): both together within the lattice budget
    faithful_forward_chunk = std::min({kChunk, max_depth / D.n,
                                       static_cast<int>(std::max<size_t>(1, kLatticeBudget / lattice_bytes(2, D.nz)))});
    if (pitch > max_w || D.nz > max_h || faithful_forward_chunk < 1)
        faithful_forward_unsupported = "n, n_rows: the lattice of " + std::to_string(D.n) + " x " +
                                       std::to_string(D.nz) + " exceeds the GPU's 3D texture (" +
                                       std::to_string(max_w) + " x " + std::to_string(max_h) + " x " +
                                       std::to_string(max_depth) + "); use method='matched' or 'fast'";
    detail::choose_fast_forward_staging(*this);
    fast_forward_smem[0] = detail::fast_forward_smem(*this, false);
    fast_forward_smem[1] = detail::fast_forward_smem(*this, true);
    fast_back_smem = detail::fast_back_smem(*this);
    // the kernels' shared memory, opted into once per upload (up to the device's limit; each launch asks
    // for what it needs)
    detail::allow_fast_kernels_smem(max_smem);
    detail::allow_faithful_kernels_smem(max_smem);
    detail::count_fast_kernel_slots(*this);
}


DeviceModel::DeviceModel(const HostModel& host) : impl_(std::make_unique<Impl>(host)) {}
DeviceModel::~DeviceModel() = default;
const HostModel& DeviceModel::host() const { return impl_->host; }
size_t DeviceModel::bytes() const {
    const Impl& m = *impl_;
    return m.Q.bytes() + m.base.bytes() + m.slope.bytes() + m.super_of_delta.bytes() + m.flip_k.bytes() +
           m.delta_order.bytes() + m.group_start.bytes() + m.group_super.bytes() + m.group_flip.bytes() +
           m.units.bytes() + m.table.bytes() + m.lattice.bytes() + m.rearranged_sino.bytes() + m.lattice_tex.bytes() +
           m.fp_weight.bytes() + m.fp_origin.bytes() + m.corrections[0].bytes() + m.corrections[1].bytes() + m.table_linear.bytes() +
           m.layers.bytes();
}

std::string DeviceModel::fast_unsupported_reason() const {
    const Impl& m = *impl_;
    if (m.host.D.J != kFastJ || m.host.D.K != kFastK)
        return "the fast CUDA kernels are compiled for the paper's 5 x 3 tube (J = 2, K = 1)";
    const size_t need = std::max(m.fast_forward_smem[0], m.fast_back_smem);   // the cp.async staging's at least
    if (need > static_cast<size_t>(m.max_smem))
        return "n_rows: the fast kernels' slice planes (" + std::to_string(m.host.D.nz) + " slices, " +
               std::to_string(m.plane_rows) + " with the taps' reach) need " +
               std::to_string(need >> 10) + " KiB of shared memory, the GPU has " + std::to_string(m.max_smem >> 10);
    const long long grid_rows = detail::fast_back_grid_rows(m);   // a CUDA grid's y dimension
    if (grid_rows > 65535)
        return "n, n_rows: the fast back projection's grid of " + std::to_string(grid_rows) +
               " (plane, slice block) rows exceeds the 65535 a CUDA grid allows";
    return "";
}

bool DeviceModel::fast_supported() const { return fast_unsupported_reason().empty(); }

bool DeviceModel::fast_forward_tma() const { return impl_->fast_forward_tma; }
std::string DeviceModel::fast_forward_tma_unsupported_reason() const { return impl_->fast_forward_tma_unsupported; }
void DeviceModel::set_fast_forward_tma(bool on) {
    if (on && !impl_->fast_forward_tma_unsupported.empty())
        throw ValueError("fast_forward_tma: " + impl_->fast_forward_tma_unsupported);
    impl_->fast_forward_tma = on;
}

namespace {

void require_fast(const DeviceModel& model) {
    const std::string why = model.fast_unsupported_reason();
    if (!why.empty()) throw ValueError("method: " + why + "; use method='matched'");
}

}  // namespace

void forward(Method method, DeviceModel& model, const AngleList& angles, const float* image, float* sino, void* stream) {
    auto& m = model.impl();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (method == Method::Faithful) return forward_faithful(m, angles, image, sino, s);
    if (method == Method::Matched) return forward_matched(m, angles, image, sino, s);
    require_fast(model);
    forward_fast(m, angles, image, sino, s);
}

void back(Method method, DeviceModel& model, const AngleList& angles, const float* sino, float* image, void* stream) {
    auto& m = model.impl();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (method == Method::Faithful) return back_faithful(model, angles, sino, nullptr, image, nullptr, stream);
    if (method == Method::Matched) return back_matched(m, angles, sino, image, s);
    require_fast(model);
    back_fast(m, angles, sino, image, s);
}

}  // namespace dp::first::gpu
