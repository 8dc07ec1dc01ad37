// FIRST Super-LOR projectors on the GPU. Plain C++ header (no CUDA types) so that the bindings
// need no CUDA headers; the implementation is in cuda.cu.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "model.hpp"

namespace dp::first::gpu {

// The model resident on the GPU (folded taps, tables and their texture) plus the reusable
// workspaces of the three methods (lattice buffers, the image's 3D array, the sinogram layers).
class DeviceModel {
public:
    explicit DeviceModel(const HostModel& host);
    ~DeviceModel();
    DeviceModel(const DeviceModel&) = delete;
    DeviceModel& operator=(const DeviceModel&) = delete;

    const HostModel& host() const;
    size_t bytes() const;          // device memory held now (model + workspaces)
    bool fast_supported() const;   // the 5 x 3 tube (J = 2, K = 1) and the slice planes fit shared memory
    std::string fast_unsupported_reason() const;   // "" when supported
    // The fast forward stages each lattice plane into shared memory by one TMA box copy (sm_90+; opt-in
    // until verified on a GPU, cuda_fast.cu) or by cp.async copies of every thread. Both give the same bits.
    bool fast_forward_tma() const;
    void set_fast_forward_tma(bool on);   // ValueError when on and the TMA staging cannot run here
    std::string fast_forward_tma_unsupported_reason() const;   // "" when it can

    struct Impl;
    Impl& impl() { return *impl_; }

private:
    std::unique_ptr<Impl> impl_;
};

// All asynchronous on `stream` (a cudaStream_t); image (nz, n, n), sino (n_sel, n_rows, n_rows, n)
// device pointers. forward / back overwrite their output.
void forward(Method method, DeviceModel& model, const AngleList& angles, const float* image, float* sino,
             void* stream);
void back(Method method, DeviceModel& model, const AngleList& angles, const float* sino, float* image, void* stream);
// The paper's back projector: image = B sino, sens = B factors (factors nullptr: ones; sens may be nullptr).
void back_faithful(DeviceModel& model, const AngleList& angles, const float* sino, const float* factors, float* image,
                   float* sens, void* stream);

}  // namespace dp::first::gpu
