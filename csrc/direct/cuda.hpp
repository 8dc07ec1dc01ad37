// CUDA DIRECT projectors (host API; plain C++ so the bindings need no CUDA headers).
//
// Methods:
//   tlp      the paper's thread-level scheme: one output voxel per thread (worker.hpp).
//   ilp      the paper's instruction-level scheme: 16 z-voxels per thread share one kernel
//            identifier, so each weight is fetched once per offset and applied 16 times.
//   columns  mSR regrouped into (dy, dx) columns; each thread keeps a run of R output z-voxels in
//            registers and a window of the neighbour column, so every source value loaded feeds
//            up to `span` multiply-adds and every weight R of them (R = 16). Source values come
//            through L1/L2; also the slab kernel's fallback for halos too wide to stage.
//   slab     (default) the columns scheme with the source staged in shared memory: a block of
//            32 x 4 pixels walks the kernel's dy rows keeping a ring of 4 source rows, staging one
//            new row per dy; window loads are shared-memory reads at immediate offsets. When the
//            LUT factorises per column (radial part x TOF/axial part, true for all Gaussian and
//            double-Gaussian kernels) and the per-tap table is too large for the caches, each
//            column gathers one weight, prefetched a few columns ahead; otherwise (small or
//            arbitrary kernels, or method slab_table) every tap's weight is gathered. Rows are staged
//            as float4 where nx allows.
//   slab_r16 the slab as it was before issue 17 (16-voxel runs, element copies): the baseline the
//            benchmarks time the default against.
#pragma once

#include <string>

#include "../common/cuda_memory.hpp"
#include "../common/hd.hpp"
#include "worker.hpp"

namespace dp::direct::gpu {

enum class Method { tlp, ilp, columns, slab, slab_table, slab_r16 };

// The slab kernel's variants (Method slab, slab_table, slab_r16).
enum class SlabVariant { slab = 0, table = 1, r16 = 2 };

// The slab variant of a method; ValueError for a method that is not one.
SlabVariant slab_variant(Method method);

Method parse_method(const std::string& name);

// Spans (taps per column) the column kernels are compiled for; longer columns are split.
constexpr int kSpanClasses[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16};
constexpr int kNumSpanClasses = sizeof(kSpanClasses) / sizeof(int);
// The per-tap weight table (DeviceLut): group g's weights for kernel a are one vector of padded_span
// floats, the class span padded to 1, 2 or a multiple of 4 so that they load as float / float2 /
// float4 vectors, starting at table_index(w0, n_kernels, a, padded) (w0, the group's first tap column,
// a multiple of padded_alignment).
DP_HD constexpr int padded_span(int span) { return span <= 2 ? span : (span + 3) / 4 * 4; }
DP_HD constexpr int padded_alignment(int padded) { return padded < 4 ? padded : 4; }
DP_HD constexpr unsigned table_index(int w0, int n_kernels, int kernel, int padded) {
    return static_cast<unsigned>(w0) * static_cast<unsigned>(n_kernels) + static_cast<unsigned>(kernel) * padded;
}

// Per transaxial row dy of the kernel support: the z range its columns read (relative to the
// output z), where each span class starts in the group list, and its range of tap columns.
// Stored as kRowInts ints: dy, z_lo, z_extent, class_begin[kNumSpanClasses + 1], tap_begin, tap_end.
constexpr int kRowClassBegin = 3;
constexpr int kRowTapBegin = kRowClassBegin + kNumSpanClasses + 1;
constexpr int kRowInts = kRowTapBegin + 2;
struct RowInfo {
    int dy, z_lo, z_extent;
    int class_begin[kNumSpanClasses + 1];
};

// The slab launch chosen for one LUT, direction and weight mode (cuda_slab.cu): the kernel variant, its
// grid, shared memory and row split, worked out at the first projection and reused, so that a projection
// is one launch (plus a memset with a row split) and no device queries.
struct SlabLaunch {
    bool ready = false;
    bool columns = false;          // the halo is too wide for any slab: the columns kernel instead
    const void* kernel = nullptr;  // the slab_kernel instantiation
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    size_t bytes = 0;              // dynamic shared memory
    int row_split = 0;             // > 0: each tile's kernel rows split over two blocks at this row
    int halo = 0;                  // staged x halo (the kernel's, rounded up to 4 with vec)
    bool vec = false;              // rows staged as float4 (when the source is 16-byte aligned)
    bool factored = false;         // the kernel gathers the factored weights (radial), not the per-tap table
    int whole_plan_groups = 0;     // > 0: the whole plan (this many groups, every row info) staged once per block
};

// One view's LUTs resident on the device, plus the column plan of the fast methods:
// groups (dy, dx, dz_min, weight tap column w0), sorted by (dy, span class, dx), and one RowInfo
// per dy. The per-tap weight table holds group g's weight for kernel a and tap s at
// w0 * n_kernels + a * padded_span + s (w0 aligned so that each (group, kernel) run is a whole
// vector); the factored tap factors at w0 + s.
class DeviceLut {
public:
    DeviceLut(const LutRef& host, const Dims& dims);

    const Dims& dims() const { return dims_; }
    LutRef device_ref() const;  // the raw LUTs on the device (tlp, ilp)
    size_t bytes() const;

    const int* groups() const { return groups_.as<int>(); }
    const int* rows() const { return rows_.as<int>(); }
    int n_groups() const { return static_cast<int>(groups_.bytes() / sizeof(int[4])); }
    int n_rows() const { return n_rows_; }
    int halo_x() const { return halo_x_; }
    int z_lo() const { return z_lo_; }      // smallest dz read by any column
    int z_span() const { return z_span_; }  // dz range read by all columns together
    int max_row_groups() const { return max_row_groups_; }
    int max_span_class() const { return max_span_class_; }  // the largest span class of any group
    const float* weights(bool forward) const { return forward ? w_fwd_.as<float>() : w_back_.as<float>(); }
    // Column factorisation weight(a, group, tap) = radial(group, a) * tap_factor(tap), exact (to
    // float rounding) for every kernel whose identifier dependence is radial only, which includes
    // all Gaussian and double-Gaussian models: then only one value per column is gathered.
    bool factored(bool forward) const { return forward ? factored_fwd_ : factored_back_; }
    const float* radial(bool forward) const { return forward ? h_fwd_.as<float>() : h_back_.as<float>(); }
    const float* tap_factor(bool forward) const { return forward ? t_fwd_.as<float>() : t_back_.as<float>(); }
    size_t radial_bytes(bool forward) const { return forward ? h_fwd_.bytes() : h_back_.bytes(); }
    int max_row_taps() const { return max_row_taps_; }
    size_t table_bytes() const { return w_back_.bytes(); }  // one direction's per-tap weight table
    int balanced_row_split() const { return row_split_; }   // kernel row splitting the taps in half
    // The slab launch of this LUT for a direction and variant.
    SlabLaunch& slab_launch(bool forward, SlabVariant v) const { return slab_launch_[forward][static_cast<int>(v)]; }

private:
    Dims dims_;
    int n_offsets_, n_kernels_;
    cuda::DeviceBuffer lormap_, offsets_, flip_, values_;
    cuda::DeviceBuffer groups_, rows_, w_fwd_, w_back_, h_fwd_, h_back_, t_fwd_, t_back_;
    bool factored_fwd_ = false, factored_back_ = false;
    int max_row_taps_ = 0, row_split_ = 1;
    int n_rows_ = 0, halo_x_ = 0, z_lo_ = 0, z_span_ = 1, max_row_groups_ = 0, max_span_class_ = 0;
    mutable SlabLaunch slab_launch_[2][3];
};

// dst = H src (forward) or H^T src on the device; src, dst are (nz, ny, nx) float32 device
// pointers that must not alias. Asynchronous on `stream` (a cudaStream_t, 0 = legacy default).
void project(bool forward, Method method, const float* src, float* dst, const DeviceLut& lut,
             void* stream);

}  // namespace dp::direct::gpu
