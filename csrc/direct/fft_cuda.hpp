// FFT convolution engine of the DIRECT FFT and low-rank projectors, GPU side (cuFFT).
// Same maths and view terms as the CPU engine (fft.hpp); plain C++ so the bindings need no CUDA
// headers.
//
//   forward:  pad+coefficient kernel (all r slots in one launch) -> batched R2C (r transforms)
//             -> one kernel sum_j K^_j X^_j (in place, slot 0) -> C2R -> crop kernel
//   adjoint:  pad kernel -> R2C -> one kernel conj(K^_j) Y^ for every j (r slots)
//             -> batched C2R (r transforms) -> one fused crop + coefficient + sum_j kernel
//
// Everything stays on the device and is enqueued on the caller's stream (cufftSetStream); nothing
// synchronises except set_view. Kernel spectra are computed on the device (batched R2C) once per
// view and stay resident.
//
// Plans and scratch buffers are kept per (stream) in a context owned by the engine, because a cuFFT
// plan's work area must not be used by two streams at once; work on one stream is ordered, so one
// context per stream is race-free. Enqueueing on one engine is serialised by a mutex.
#pragma once

#include <memory>

#include "fft.hpp"

namespace dp::fft::gpu {

class CudaFftEngine {
public:
    // Binds to the current CUDA device; every later call must run with that device current.
    CudaFftEngine(const Shape3& image, const Shape3& padded);
    ~CudaFftEngine();
    CudaFftEngine(const CudaFftEngine&) = delete;
    CudaFftEngine& operator=(const CudaFftEngine&) = delete;

    // Host arrays in; uploads, transforms on the device (legacy default stream) and synchronises.
    void set_view(int v, const ViewTerms& host_terms);
    bool has_view(int v) const;
    int rank(int v) const;
    void drop_view(int v);

    // src, dst: (nz, ny, nx) float32 device pointers, not aliased. Asynchronous on `stream`
    // (a cudaStream_t; 0 = legacy default stream).
    void forward(int v, const float* src, float* dst, void* stream);
    void adjoint(int v, const float* src, float* dst, void* stream);

    const Shape3& image_shape() const;
    const Shape3& padded_shape() const;
    int device() const;
    size_t bytes() const;  // resident spectra + coefficient maps + scratch of all stream contexts

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dp::fft::gpu
