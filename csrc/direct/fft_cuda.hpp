// FFT convolution engine of the DIRECT FFT and low-rank projectors, GPU side (cuFFT).
// Same maths and view terms as the CPU engine (fft.hpp); plain C++ so the bindings need no CUDA
// headers.
//
// The spectra are kept z-first (half along z, full along y and x): a 3D DFT is a z-DFT of the image's
// columns and 2D DFTs of the planes, and the coefficient maps c_j(y, x) commute with the z-DFT, so
// each projection needs only one z-DFT each way (fft_cuda.cu says why that is faster):
//
//   forward:  z-pad + z-R2C of the image -> modulation by c_j and xy-pad (all r slots in one launch)
//             -> batched 2D C2C (r Kz planes) -> one kernel sum_j K^_j X^_j (in place, slot 0)
//             -> 2D C2C inverse (Kz planes) -> xy-crop -> z-C2R -> z-crop
//   adjoint:  z-pad + z-R2C -> xy-pad -> 2D C2C -> one kernel conj(K^_j) Y^ for every j (r slots)
//             -> batched 2D C2C inverse -> one fused xy-crop + coefficient + sum_j kernel -> z-C2R -> z-crop
//
// Everything stays on the device and is enqueued on the caller's stream (cufftSetStream); nothing
// synchronises except set_view. Kernel spectra are computed on the device once per view (or spread
// from the R2C layout they are given in) and stay resident.
//
// Plans (sharing one work area) and scratch buffers are kept per (stream) in a context owned by the engine, because a cuFFT
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
