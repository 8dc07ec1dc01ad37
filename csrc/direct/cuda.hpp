// CUDA DIRECT projectors (host API; plain C++ so the bindings need no CUDA headers).
//
// Methods:
//   tlp      the paper's thread-level scheme: one output voxel per thread (worker.hpp).
//   ilp      the paper's instruction-level scheme: 16 z-voxels per thread share one kernel
//            identifier, so each weight is fetched once per offset and applied 16 times.
//   columns  (default) mSR regrouped into (dy, dx) columns; each thread keeps a run of R output
//            z-voxels in registers and a sliding window of the neighbour column, so every source
//            value loaded feeds up to `span` multiply-adds and every weight R of them
//            (R = 16; columns24 / columns32 are the same scheme with longer z-runs).
#pragma once

#include <string>

#include "../common/cuda_memory.hpp"
#include "worker.hpp"

namespace dp::direct::gpu {

enum class Method { tlp, ilp, columns, columns24, columns32 };  // columnsN: z-run of N

Method parse_method(const std::string& name);

// Spans (taps per column) the columns kernel is compiled for; longer columns are split.
constexpr int kSpanClasses[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16};
constexpr int kNumSpanClasses = sizeof(kSpanClasses) / sizeof(int);

// One view's LUTs resident on the device, plus the column plan of the default method.
class DeviceLut {
public:
    DeviceLut(const LutRef& host, const Dims& dims);

    const Dims& dims() const { return dims_; }
    LutRef device_ref() const;  // the raw LUTs on the device (tlp, ilp)
    size_t bytes() const;

    // Column plan: groups (dy, dx, dz_min, weight column) sorted by span class.
    const int* groups() const { return groups_.as<int>(); }
    const float* weights(bool forward) const { return forward ? w_fwd_.as<float>() : w_back_.as<float>(); }
    int weight_stride() const { return wstride_; }
    const int* class_begin() const { return class_begin_; }

private:
    Dims dims_;
    int n_offsets_, n_kernels_;
    cuda::DeviceBuffer lormap_, offsets_, flip_, values_;
    cuda::DeviceBuffer groups_, w_fwd_, w_back_;
    int wstride_ = 0;
    int class_begin_[kNumSpanClasses + 1] = {};
};

// dst = H src (forward) or H^T src on the device; src, dst are (nz, ny, nx) float32 device
// pointers that must not alias. Asynchronous on `stream` (a cudaStream_t, 0 = legacy default).
void project(bool forward, Method method, const float* src, float* dst, const DeviceLut& lut,
             void* stream);

}  // namespace dp::direct::gpu
