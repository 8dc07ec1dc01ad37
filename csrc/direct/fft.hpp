// FFT convolution engine of the DIRECT FFT and low-rank projectors (science.md 1.8), CPU side.
//
// One engine serves one image shape (nz, ny, nx) and one padded FFT grid (Mz, My, Mx). Per view it
// keeps, resident, r >= 1 kernel spectra K^_j on the padded grid (half spectrum, Mz x My x (Mx/2+1),
// scaled by 1 / (Mz My Mx) so that no separate normalisation pass is needed) and, when r > 1 or a
// per-pixel weight is wanted, r coefficient maps c_j (ny, nx) that are broadcast along z (they come
// from the 2D LORmap). With pad() = zero padding to the FFT grid and crop() = its transpose:
//
//   forward:  out = crop( IFFT( sum_j K^_j . FFT( pad(c_j . x) ) ) )
//   adjoint:  out = sum_j c_j . crop( IFFT( conj(K^_j) . FFT( pad(y) ) ) )
//
// (without coefficient maps c_j = 1). The adjoint is the exact transpose of the forward map for any
// padding; the forward map is the *linear* convolution on the N outputs only when M >= N + h per
// axis (h the kernel half-extent), otherwise it wraps around (cyclic convolution).
//
// This header is plain C++ (no FFTW or CUDA types) so that the bindings can include it.
#pragma once

#include <complex>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "../common/errors.hpp"

namespace dp::fft {

struct Shape3 {
    int nz, ny, nx;
    long long size() const { return static_cast<long long>(nz) * ny * nx; }
};

// Number of complex values of the half spectrum of a real (Mz, My, Mx) grid: Mz * My * (Mx/2 + 1).
inline long long half_spectrum_size(const Shape3& m) {
    return static_cast<long long>(m.nz) * m.ny * (m.nx / 2 + 1);
}

// Throws ValueError unless every extent is positive and the padded grid holds the image.
void check_shapes(const Shape3& image, const Shape3& padded);

// FFTW planner effort. measure: FFTW times candidate algorithms once per (padded shape, threads)
// and the plan is cached for the process; it pays off because a reconstruction runs the same
// transform hundreds of times (2 per view per iteration). estimate: no timing, instant planning,
// for one-off use. (Plans made with measure may differ between processes in the last float bit.)
enum class Planner { estimate, measure };
Planner parse_planner(const std::string& name);

// One view's terms as host arrays. Exactly one of `kernels` / `spectra` is non-null.
struct ViewTerms {
    int rank = 1;
    // (rank, Mz, My, Mx) float: kernels laid out on the padded grid, offset d at index d mod M
    // (wrap-around for negative offsets). The engine transforms them (R2C) once.
    const float* kernels = nullptr;
    // (rank, Mz, My, Mx/2+1) complex<float>: spectra given directly (unnormalised DFT convention,
    // i.e. what an R2C of the kernel above would give). They must be the spectra of real kernels
    // (Hermitian): the GPU engine rebuilds the other x half by conjugate symmetry, and a C2R reads
    // the redundant bins differently on the CPU and the GPU otherwise.
    const std::complex<float>* spectra = nullptr;
    // (rank, ny, nx) float coefficient maps, or null (then rank must be 1 and c_1 = 1).
    const float* coefficients = nullptr;
};

// Throws ValueError unless the terms are usable: rank >= 1, exactly one of kernels / spectra, and
// coefficient maps whenever rank > 1. Shared by the CPU and GPU engines.
void check_view_terms(const ViewTerms& terms);

// The resident per-view terms of an engine (host or device storage, per View type). Not locked:
// the engine's own mutex, which also guards its scratch buffers, covers it.
template <typename View>
class ViewTable {
public:
    const View& at(int v) const {
        auto it = views_.find(v);
        if (it == views_.end())
            throw ValueError("view: " + std::to_string(v) + " has no kernel spectra in this FFT engine "
                             "(set_view first)");
        return it->second;
    }
    bool contains(int v) const { return views_.count(v) != 0; }
    void put(int v, View&& view) { views_[v] = std::move(view); }
    void erase(int v) { views_.erase(v); }
    template <typename F>
    void for_each(F&& f) const {
        for (const auto& kv : views_) f(kv.second);
    }

private:
    std::unordered_map<int, View> views_;
};

// CPU engine: FFTW3 single precision, multi-threaded.
//   * Plans are cached per (padded shape, thread count, planner) for the life of the process and
//     shared by all engines; they are created under one mutex because FFTW's planner is not
//     thread-safe (fftwf_execute_dft_* on distinct arrays is, and is what the engine calls).
//   * Scratch buffers belong to the engine; calls on one engine are serialised by its own mutex
//     (each call is already multi-threaded inside), calls on different engines run concurrently.
class CpuFftEngine {
public:
    // threads <= 0: OpenMP's default (omp_get_max_threads()).
    CpuFftEngine(const Shape3& image, const Shape3& padded, int threads, Planner planner);
    ~CpuFftEngine();
    CpuFftEngine(const CpuFftEngine&) = delete;
    CpuFftEngine& operator=(const CpuFftEngine&) = delete;

    // Computes (or copies) and keeps view v's spectra and coefficient maps; replaces earlier ones.
    void set_view(int v, const ViewTerms& terms);
    bool has_view(int v) const;
    int rank(int v) const;
    void drop_view(int v);

    // dst = H_v src / H_v^T src. src and dst are (nz, ny, nx) C-contiguous float32, not aliased.
    void forward(int v, const float* src, float* dst);
    void adjoint(int v, const float* src, float* dst);

    const Shape3& image_shape() const;
    const Shape3& padded_shape() const;
    int threads() const;
    size_t bytes() const;  // resident spectra + coefficient maps + scratch

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dp::fft
