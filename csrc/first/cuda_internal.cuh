// Shared by the FIRST CUDA files: angle chunks, texture arrays, the resident model's state
// (DeviceModel::Impl) and the host launchers each file provides.
//
//   cuda_model.cu     the resident model (its upload, DeviceModel) and the dispatch of forward / back
//   cuda_fast.cu      the defaults: matched (exact transpose) and fast (staged lattice planes, registers)
//   cuda_faithful.cu  the paper's texture design (baseline)
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/bulk_copy.cuh"
#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/cuda_occupancy.cuh"
#include "../common/errors.hpp"
#include "../common/waves.hpp"
#include "cuda.hpp"
#include "tube.hpp"

namespace dp::first::gpu {

namespace detail {

// Angles per launch at most (the AngleChunk kernel parameter's capacity: 776 bytes). The fast kernels
// choose fewer to balance their waves and to keep their workspace (the lattice, and the back projection's
// rearranged sinogram) within kLatticeBudget.
constexpr int kChunk = 64;
constexpr size_t kLatticeBudget = size_t(512) << 20;   // bytes of the fast paths' per-launch workspace
constexpr int kFastRows = 8;        // LOR rows (m) per half-warp work unit in the fast forward
constexpr int kFastJ = kPaperJ, kFastK = kPaperK;

struct AngleChunk {
    int n;       // angles in this chunk
    int first;   // local index (in the call's sinogram) of the chunk's first angle
    int a[kChunk];   // the angles' indices in the full sinogram (rows of the footprint tables)
    float c[kChunk];
    float s[kChunk];
};

// Calls f once per launch with consecutive angles of A, at most `chunk` (<= kChunk) a launch, the launches
// as even as they can be (sizes differ by at most one): 130 angles by 32 are 26 x 5, not 32 x 4 + 2,
// whose last launch would keep a fraction of the GPU busy for a whole block's time.
template <typename F>
inline void for_each_chunk(const AngleList& A, int chunk, F&& f) {
    if (chunk < 1 || chunk > kChunk) throw std::logic_error("for_each_chunk: chunk out of [1, kChunk]");
    const int n_sel = static_cast<int>(A.index.size());
    const int launches = waves::even_launches(n_sel, chunk);
    for (int l = 0, a0 = 0; l < launches; ++l) {
        AngleChunk ch{};
        ch.n = waves::even_launch_size(n_sel, launches, l);
        ch.first = a0;
        for (int q = 0; q < ch.n; ++q) {
            ch.a[q] = A.index[a0 + q];
            ch.c[q] = A.cos[a0 + q];
            ch.s[q] = A.sin[a0 + q];
        }
        a0 += ch.n;
        f(ch);
    }
}

inline int div_up(int64_t a, int b) { return static_cast<int>((a + b - 1) / b); }

// --- texture-backed arrays ----------------------------------------------------------------------
class TextureArray {
public:
    TextureArray() = default;
    TextureArray(const TextureArray&) = delete;
    TextureArray& operator=(const TextureArray&) = delete;
    ~TextureArray() { release(); }

    // A 3D (layered = false) or 2D layered (layered = true) array of float or float2 texels
    // (channels = 1, 2) with linear filtering and zero outside (border addressing); coordinates are
    // unnormalised.
    void create(int w, int h, int depth, bool layered, int channels) {
        release();
        if (channels != 1 && channels != 2) throw std::logic_error("TextureArray: 1 or 2 channels");
        const cudaChannelFormatDesc desc = channels == 2 ? cudaCreateChannelDesc<float2>() : cudaCreateChannelDesc<float>();
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
        elem_ = 4 * channels;
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
inline cuda::DeviceBuffer upload(const std::vector<T>& v) {
    cuda::DeviceBuffer b(std::max<size_t>(1, v.size() * sizeof(T)));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
    return b;
}

// One half-warp's work in the fast forward: ring difference d, LOR rows m0 .. m0 + count - 1.
struct FastUnit {
    int d, m0, count, pad;
};

}  // namespace detail

// --- the resident model ---------------------------------------------------------------------------------
struct DeviceModel::Impl {
    using TextureArray = detail::TextureArray;
    HostModel host;
    cuda::DeviceBuffer Q, base, slope, super_of_delta, flip_k, units;
    cuda::DeviceBuffer delta_order, group_start, group_super, group_flip;
    cuda::DeviceBuffer fp_weight, fp_origin;   // footprint tables of every angle (tube.hpp)
    int n_units = 0;
    TextureArray table;              // Super-LOR tubes: layered ((2J+1)(2K+1), x) by (n, y) by n_super
    // workspaces, grown on demand
    cuda::DeviceBuffer lattice;      // fast and faithful forward: chunk x n x nz x pitch
    cuda::DeviceBuffer rearranged_sino;  // fast back: the chunk's sinogram rearranged by ring difference (cuda_fast.cu)
    TextureArray lattice_tex;        // faithful forward: the lattice as a 3D array (pitch, nz, chunk n)
    cuda::DeviceBuffer table_linear; // the same tables in global memory (faithful back: staged to shared)
    // faithful back, layered x chunk * n_deltas: [0] without the sensitivity, (n, n_rows) float, or for the
    // paper's tube (n + 1, n_rows) float2 (the ratios of two neighbouring bins); [1] with it, (n, n_rows) float2
    TextureArray corrections[2];
    cuda::DeviceBuffer layers;       // staging of the corrections
    // pitch: floats per lattice row; the fast forward's shared planes hold rows -pz_lo .. plane_rows - pz_lo - 1
    // of a lattice plane's slices (zero outside 0 .. nz - 1), both multiples of 8 (cuda_model.cu)
    int pitch = 0, pz_lo = 0, plane_rows = 0, faithful_chunk = 0, faithful_forward_chunk = 0;
    std::string faithful_forward_unsupported;   // "" when the faithful forward's texture fits
    int max_smem = 0;                // shared memory a block may opt into (bytes), read once
    // the fast kernels' shared memory (bytes); the forward's for each staging ([1]: TMA)
    size_t fast_forward_smem[2] = {0, 0}, fast_back_smem = 0;
    // the fast kernels' resident blocks on the whole GPU with that shared memory (their launches' waves; the
    // forward's TMA staging is chosen only where it keeps them)
    long long fast_forward_slots = 1, fast_back_slots = 1;
    // The fast forward's staging of lattice planes: TMA boxes (sm_90+) or cp.async copies (cuda_fast.cu,
    // choose_fast_forward_staging). DeviceModel::set_fast_forward_tma switches it.
    bool fast_forward_tma = false;
    std::string fast_forward_tma_unsupported;   // "" where the TMA staging can run
    // the lattice buffer's tensor map, encoded again only when the buffer or its rows change
    CUtensorMap lattice_map{};
    const void* lattice_map_base = nullptr;
    uint64_t lattice_map_rows = 0;

    // Uploads the model, reads the device's limits, sizes the kernels' shared memory and opts the
    // kernels into it, once (cuda_model.cu).
    explicit Impl(const HostModel& h);

    Footprints footprints() const { return {fp_weight.as<float>(), fp_origin.as<FootprintOrigin>()}; }

    // Bytes of the lattice of a chunk of angles, (chunk, n, slices, pitch) or (chunk, n, pitch, slices) floats.
    size_t lattice_bytes(int chunk, int slices) const {
        return static_cast<size_t>(chunk) * host.D.n * slices * pitch * sizeof(float);
    }

    // The lattice buffer of a chunk of angles (lattice_bytes), grown on demand.
    float* lattice_for(int chunk, int slices) {
        lattice.reserve(lattice_bytes(chunk, slices));
        return lattice.as<float>();
    }
};

namespace detail {

using Impl = DeviceModel::Impl;

// cuda_fast.cu: the image resampled on the LOR lattice (fast and faithful forward), the default pair
void resample(Impl& m, const AngleChunk& ch, const float* image, float* lattice, cudaStream_t s);
void forward_matched(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s);
void back_matched(Impl& m, const AngleList& angles, const float* sino, float* image, cudaStream_t s);
void forward_fast(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s);
void back_fast(Impl& m, const AngleList& angles, const float* sino, float* image, cudaStream_t s);
size_t fast_forward_smem(const Impl& m, bool tma);
size_t fast_back_smem(const Impl& m);
long long fast_back_grid_rows(const Impl& m);   // the fast back projection's grid rows (planes x slice blocks)
void allow_fast_kernels_smem(int max_smem);
void count_fast_kernel_slots(Impl& m);
void choose_fast_forward_staging(Impl& m);   // sets fast_forward_tma(_unsupported); needs max_smem

// cuda_faithful.cu: the paper's texture design (its back projection is the public back_faithful)
void forward_faithful(Impl& m, const AngleList& angles, const float* image, float* sino, cudaStream_t s);
void allow_faithful_kernels_smem(int max_smem);

}  // namespace detail

}  // namespace dp::first::gpu
