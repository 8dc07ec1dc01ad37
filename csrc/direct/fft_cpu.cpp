// CPU FFT convolution engine (FFTW3f + OpenMP). See fft.hpp for the maths and the contract.
#include "fft.hpp"

#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "../common/errors.hpp"

namespace dp::fft {

void check_shapes(const Shape3& n, const Shape3& m) {
    require(n.nz > 0 && n.ny > 0 && n.nx > 0, "shape: every extent must be positive");
    require(m.nz > 0 && m.ny > 0 && m.nx > 0, "padded: every extent must be positive");
    require(m.nz >= n.nz && m.ny >= n.ny && m.nx >= n.nx,
            "padded: the FFT grid (" + std::to_string(m.nz) + ", " + std::to_string(m.ny) + ", " +
                std::to_string(m.nx) + ") must be at least the image shape (" + std::to_string(n.nz) +
                ", " + std::to_string(n.ny) + ", " + std::to_string(n.nx) + ") on every axis");
}

Planner parse_planner(const std::string& name) {
    if (name == "measure") return Planner::measure;
    if (name == "estimate") return Planner::estimate;
    throw ValueError("planner: expected 'measure' or 'estimate', got '" + name + "'");
}

namespace {

// ---- FFTW plans, shared by all engines -------------------------------------------------------
struct Plans {
    fftwf_plan r2c;  // real (Mz, My, Mx) -> half spectrum, out of place
    fftwf_plan c2r;  // half spectrum -> real, out of place, destroys its input
};

// FFTW's planner (and the global fftwf_plan_with_nthreads it reads) is not thread-safe; only the
// fftwf_execute* functions are. Every planner call happens under this mutex.
std::mutex& planner_mutex() {
    static std::mutex m;
    return m;
}

template <typename T>
struct FftwFree {
    void operator()(T* p) const { fftwf_free(p); }
};
using RealBuffer = std::unique_ptr<float, FftwFree<float>>;
using ComplexBuffer = std::unique_ptr<fftwf_complex, FftwFree<fftwf_complex>>;

RealBuffer alloc_real(long long n) {
    RealBuffer b(fftwf_alloc_real(static_cast<size_t>(n)));
    if (!b) throw OutOfMemory("FFT engine: could not allocate " + std::to_string(4 * n) + " bytes");
    return b;
}

ComplexBuffer alloc_complex(long long n) {
    ComplexBuffer b(fftwf_alloc_complex(static_cast<size_t>(n)));
    if (!b) throw OutOfMemory("FFT engine: could not allocate " + std::to_string(8 * n) + " bytes");
    return b;
}

// Plans live for the process (a handful of shapes per session); they are executed with the
// new-array interface on engine buffers, which fftwf_alloc_* aligns exactly like the planning
// buffers, as FFTW requires.
const Plans& plans_for(const Shape3& m, int threads, Planner planner) {
    std::lock_guard<std::mutex> lock(planner_mutex());
    static bool threads_ready = false;
    if (!threads_ready) {
        if (!fftwf_init_threads()) throw std::runtime_error("FFTW: fftwf_init_threads failed");
        threads_ready = true;
    }
    using Key = std::tuple<int, int, int, int, int>;
    static std::map<Key, Plans> cache;
    const Key key{m.nz, m.ny, m.nx, threads, static_cast<int>(planner)};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;

    // FFTW_MEASURE overwrites the arrays while it times candidates: plan on throw-away buffers.
    RealBuffer re = alloc_real(m.size());
    ComplexBuffer sp = alloc_complex(half_spectrum_size(m));
    fftwf_plan_with_nthreads(threads);
    const unsigned flags = planner == Planner::measure ? FFTW_MEASURE : FFTW_ESTIMATE;
    Plans p;
    p.r2c = fftwf_plan_dft_r2c_3d(m.nz, m.ny, m.nx, re.get(), sp.get(), flags);
    p.c2r = fftwf_plan_dft_c2r_3d(m.nz, m.ny, m.nx, sp.get(), re.get(), flags | FFTW_DESTROY_INPUT);
    if (!p.r2c || !p.c2r) {
        if (p.r2c) fftwf_destroy_plan(p.r2c);
        if (p.c2r) fftwf_destroy_plan(p.c2r);
        throw std::runtime_error("FFTW: fftwf_plan_dft_r2c_3d / c2r_3d failed for the grid (" +
                                 std::to_string(m.nz) + ", " + std::to_string(m.ny) + ", " +
                                 std::to_string(m.nx) + ")");
    }
    return cache.emplace(key, p).first->second;
}

// ---- element-wise passes (OpenMP) ---------------------------------------------------------------
// Complex products are written out by hand: std::complex<float>::operator* goes through the
// NaN-checking __mulsc3 without -ffast-math and would not vectorise.

// buf (Mz, My, Mx) = zero-padded src (nz, ny, nx), times c (ny, nx) when given.
void pad(const float* src, const float* c, float* buf, const Shape3& n, const Shape3& m, int threads) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int z = 0; z < m.nz; ++z)
        for (int y = 0; y < m.ny; ++y) {
            float* row = buf + (static_cast<long long>(z) * m.ny + y) * m.nx;
            if (z >= n.nz || y >= n.ny) {
                std::fill(row, row + m.nx, 0.0f);
                continue;
            }
            const float* s = src + (static_cast<long long>(z) * n.ny + y) * n.nx;
            if (c) {
                const float* cr = c + static_cast<long long>(y) * n.nx;
                for (int x = 0; x < n.nx; ++x) row[x] = s[x] * cr[x];
            } else {
                std::memcpy(row, s, sizeof(float) * n.nx);
            }
            std::fill(row + n.nx, row + m.nx, 0.0f);
        }
}

// dst (nz, ny, nx) (=, or += when accumulate) crop(buf) times c (ny, nx) when given.
void crop(const float* buf, const float* c, float* dst, bool accumulate, const Shape3& n, const Shape3& m,
          int threads) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int z = 0; z < n.nz; ++z)
        for (int y = 0; y < n.ny; ++y) {
            const float* row = buf + (static_cast<long long>(z) * m.ny + y) * m.nx;
            float* d = dst + (static_cast<long long>(z) * n.ny + y) * n.nx;
            const float* cr = c ? c + static_cast<long long>(y) * n.nx : nullptr;
            for (int x = 0; x < n.nx; ++x) {
                const float v = cr ? row[x] * cr[x] : row[x];
                d[x] = accumulate ? d[x] + v : v;
            }
        }
}

// out[k] (=, or += when accumulate) K[k] * X[k], or conj(K[k]) * X[k]. out may alias X.
template <bool kConj>
void spectral_product(const fftwf_complex* K, const fftwf_complex* X, fftwf_complex* out,
                      bool accumulate, long long count, int threads) {
    const float* k = reinterpret_cast<const float*>(K);
    const float* x = reinterpret_cast<const float*>(X);
    float* o = reinterpret_cast<float*>(out);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long long i = 0; i < count; ++i) {
        const float kr = k[2 * i], ki = kConj ? -k[2 * i + 1] : k[2 * i + 1];
        const float xr = x[2 * i], xi = x[2 * i + 1];
        const float re = kr * xr - ki * xi, im = kr * xi + ki * xr;
        o[2 * i] = accumulate ? o[2 * i] + re : re;
        o[2 * i + 1] = accumulate ? o[2 * i + 1] + im : im;
    }
}

}  // namespace

// ---- the engine ---------------------------------------------------------------------------------
struct CpuFftEngine::Impl {
    struct View {
        int rank = 1;
        std::vector<float> spectra;       // (rank, Mc) complex, interleaved, scaled by 1/(Mz My Mx)
        std::vector<float> coefficients;  // (rank, ny, nx), empty: c_1 = 1
        const fftwf_complex* spectrum(int j, long long mc) const {
            return reinterpret_cast<const fftwf_complex*>(spectra.data() + 2 * j * mc);
        }
        const float* coef(int j, const Shape3& n) const {
            return coefficients.empty() ? nullptr : coefficients.data() + static_cast<long long>(j) * n.ny * n.nx;
        }
    };

    Shape3 n, m;
    long long mc;
    int threads;
    const Plans* plans;
    RealBuffer real;         // (Mz, My, Mx)
    ComplexBuffer spec, acc; // (Mc) each
    ViewTable<View> views;
    mutable std::mutex mutex;  // serialises calls on this engine (scratch + view table)
};

CpuFftEngine::CpuFftEngine(const Shape3& image, const Shape3& padded, int threads, Planner planner)
    : impl_(new Impl) {
    check_shapes(image, padded);
    Impl& s = *impl_;
    s.n = image;
    s.m = padded;
    s.mc = half_spectrum_size(padded);
    s.threads = threads > 0 ? threads : omp_get_max_threads();
    s.plans = &plans_for(padded, s.threads, planner);
    s.real = alloc_real(padded.size());
    s.spec = alloc_complex(s.mc);
    s.acc = alloc_complex(s.mc);
}

CpuFftEngine::~CpuFftEngine() = default;

void check_view_terms(const ViewTerms& t) {
    require(t.rank >= 1, "rank: expected at least one kernel term, got " + std::to_string(t.rank));
    require((t.kernels != nullptr) != (t.spectra != nullptr),
            "set_view: give exactly one of kernels (spatial, padded grid) or spectra");
    require(t.rank == 1 || t.coefficients != nullptr,
            "coefficients: a rank-" + std::to_string(t.rank) + " view needs its coefficient maps");
}

void CpuFftEngine::set_view(int v, const ViewTerms& t) {
    Impl& s = *impl_;
    check_view_terms(t);
    Impl::View view;
    view.rank = t.rank;
    view.spectra.resize(static_cast<size_t>(2 * t.rank * s.mc));
    const float scale = 1.0f / static_cast<float>(s.m.size());  // FFTW transforms are unnormalised
    std::lock_guard<std::mutex> lock(s.mutex);
    for (int j = 0; j < t.rank; ++j) {
        float* out = view.spectra.data() + 2 * j * s.mc;
        const float* in;
        if (t.kernels) {
            std::memcpy(s.real.get(), t.kernels + j * s.m.size(), sizeof(float) * s.m.size());
            fftwf_execute_dft_r2c(s.plans->r2c, s.real.get(), s.spec.get());
            in = reinterpret_cast<const float*>(s.spec.get());
        } else {
            in = reinterpret_cast<const float*>(t.spectra + j * s.mc);
        }
        for (long long i = 0; i < 2 * s.mc; ++i) out[i] = in[i] * scale;
    }
    if (t.coefficients)
        view.coefficients.assign(t.coefficients, t.coefficients + static_cast<long long>(t.rank) * s.n.ny * s.n.nx);
    s.views.put(v, std::move(view));
}

bool CpuFftEngine::has_view(int v) const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->views.contains(v);
}

int CpuFftEngine::rank(int v) const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->views.at(v).rank;
}

void CpuFftEngine::drop_view(int v) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->views.erase(v);
}

void CpuFftEngine::forward(int v, const float* src, float* dst) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    const Impl::View& view = s.views.at(v);
    // r = 1: one R2C, one product (in place), one C2R. r > 1: accumulate sum_j K^_j X^_j in acc.
    fftwf_complex* sum = view.rank == 1 ? s.spec.get() : s.acc.get();
    for (int j = 0; j < view.rank; ++j) {
        pad(src, view.coef(j, s.n), s.real.get(), s.n, s.m, s.threads);
        fftwf_execute_dft_r2c(s.plans->r2c, s.real.get(), s.spec.get());
        spectral_product<false>(view.spectrum(j, s.mc), s.spec.get(), sum, j > 0, s.mc, s.threads);
    }
    fftwf_execute_dft_c2r(s.plans->c2r, sum, s.real.get());
    crop(s.real.get(), nullptr, dst, false, s.n, s.m, s.threads);
}

void CpuFftEngine::adjoint(int v, const float* src, float* dst) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    const Impl::View& view = s.views.at(v);
    pad(src, nullptr, s.real.get(), s.n, s.m, s.threads);
    fftwf_execute_dft_r2c(s.plans->r2c, s.real.get(), s.spec.get());
    // r = 1: the product goes in place (C2R destroys it, Y^ is not needed again). r > 1: Y^ stays
    // in spec and each term's product goes through acc.
    fftwf_complex* prod = view.rank == 1 ? s.spec.get() : s.acc.get();
    for (int j = 0; j < view.rank; ++j) {
        spectral_product<true>(view.spectrum(j, s.mc), s.spec.get(), prod, false, s.mc, s.threads);
        fftwf_execute_dft_c2r(s.plans->c2r, prod, s.real.get());
        crop(s.real.get(), view.coef(j, s.n), dst, j > 0, s.n, s.m, s.threads);
    }
}

const Shape3& CpuFftEngine::image_shape() const { return impl_->n; }
const Shape3& CpuFftEngine::padded_shape() const { return impl_->m; }
int CpuFftEngine::threads() const { return impl_->threads; }

size_t CpuFftEngine::bytes() const {
    const Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    size_t b = sizeof(float) * s.m.size() + 2 * 2 * sizeof(float) * s.mc;
    s.views.for_each([&](const Impl::View& w) { b += sizeof(float) * (w.spectra.size() + w.coefficients.size()); });
    return b;
}

}  // namespace dp::fft
