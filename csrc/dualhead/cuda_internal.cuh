// Shared by the dual-head CUDA files: the device tap, the kernels' launch parameter blocks, the resident
// model's state (DeviceModel::Impl) and the host launchers each file provides.
//
//   cuda_model.cu    the resident model (its upload, DeviceModel) and the dispatch of forward / back
//   cuda_default.cu  the default pair: polyphase layout, tiled forward, gathering back projection
//   cuda_paper.cu    the paper's algorithms 1-3 (baselines)
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "cuda.hpp"
#include "tiles.hpp"

namespace dp::dualhead::gpu {

using namespace tiles;

namespace detail {


// A tap on the device: the model's (dy, dz, w), regrouped per row by residue group
// g = (dz mod D) * D + (dy mod D).
struct __align__(8) DTap {
    int16_t dy, dz;
    float w;
};
static_assert(sizeof(DTap) == 8, "8-byte taps");

constexpr int kAlgThreads = 128;   // the paper's blocks: one thread per plane

inline int div_up(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

__host__ __device__ inline size_t align16(size_t x) { return (x + 15) & ~size_t(15); }

// --- launch parameter blocks (passed by value, < 4 KB) -------------------------------------------
struct FwdLaunch {
    Layout L;
    int n_entries, win_cap;
    int lpb;   // padded positions per block (<= kFwdLors)
    // plane groups: group g holds planes [g per, min((g + 1) per, n_planes)); this launch computes
    // groups [group0, group0 + n_groups), each over all of the entries' tiles (group-major block
    // order). accumulate: add to y (an earlier launch wrote it).
    int per, group0, n_groups, accumulate;
    int k[kMaxEntries];
    int pitch[kMaxEntries];   // per class: its padded rows (fwd_pitch) and window plane stride (fwd_plane_stride)
    int plane[kMaxEntries];
    int first_block[kMaxEntries + 1];
    long long out[kMaxEntries];   // start of the class's block in y
};

struct BackLaunch {
    Layout L;
    int n_entries, accumulate, y_cap;
    int k[kMaxEntries];
    int cls[kMaxEntries];         // the class as (a_y << 16) | a_z
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

// Entries [a0, a0 + n) of the class list, kMaxEntries at a time.
template <typename F>
inline void for_each_entry_chunk(const ClassList& C, F&& f) {
    const int n = static_cast<int>(C.index.size());
    for (int a0 = 0; a0 < n; a0 += kMaxEntries) f(a0, std::min(kMaxEntries, n - a0));
}

}  // namespace detail

// --- the resident model (uploaded by its constructor in cuda_model.cu) -------------------------------------
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
    cuda::DeviceBuffer fwd_partial, fwd_done; // the forward's per-plane-group sums of a tile and their counters
    cuda::DeviceBuffer partial;               // alg2 partial sums
    cuda::DeviceBuffer back_order;            // the default back projection's block order and its sort's workspace
    int max_smem = 0;                         // opt-in shared memory per block (bytes), read once
    int smem_per_sm = 0;                      // shared memory per SM (bytes), read once
    size_t window_limit = 0;
    int plane_groups = 0;
    bool narrow_blocks = false;
    bool back_heavy_first = true;
    int fwd_groups_per_launch = 0;            // the forward's plane groups per launch (0: all that fit)

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

    // Uploads the model (the taps regrouped per row, the back projection's cell offsets) and reads the
    // device's shared-memory limits (cuda_model.cu).
    Impl(const HostModel& h, size_t limit);

    float* workspace(cuda::DeviceBuffer& b) {
        b.reserve(size_t(L.n_voxels()) * sizeof(float));
        return b.as<float>();
    }

    size_t model_bytes() const {
        return taps.bytes() + row_start.bytes() + rzg.bytes() + q_start.bytes() + q_pos.bytes() + q_w.bytes() +
               boxes.bytes();
    }
};

namespace detail {

using Impl = DeviceModel::Impl;

// cuda_default.cu: the default pair, and the opt-in to the device's shared memory its kernels need
void forward_default(Impl& m, const ClassList& C, const float* image, const float* skip, float* y, cudaStream_t s);
void back_default(Impl& m, const ClassList& C, const float* y, float* image, cudaStream_t s);
void allow_default_kernels_smem(int max_smem);

// cuda_paper.cu: the paper's algorithms 1-3
void forward_alg(Method method, Impl& m, const ClassList& C, const float* image, const float* skip, float* y,
                 cudaStream_t s);
void back_alg(Method method, Impl& m, const ClassList& C, const float* y, float* image, cudaStream_t s);

}  // namespace detail

}  // namespace dp::dualhead::gpu
