// GPU FFT convolution engine (cuFFT). See fft_cuda.hpp for the pipeline, fft.hpp for the maths.
#include <cuComplex.h>
#include <cufft.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/cuda_memory.hpp"
#include "../common/errors.hpp"
#include "fft_cuda.hpp"

namespace dp::fft::gpu {
namespace {

// ---- cuFFT error checking -------------------------------------------------------------------------
const char* cufft_error_name(cufftResult r) {
    switch (r) {
        case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
        case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
        case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
        case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
        case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
        case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
        case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
        case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
        case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
        case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
        case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
        case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
        case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
        case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
        default: return "unknown cufftResult";
    }
}

void check_cufft(cufftResult r, const char* what) {
    if (r == CUFFT_SUCCESS) return;
    const std::string msg = std::string("cuFFT error in ") + what + ": " + cufft_error_name(r) +
                            " (code " + std::to_string(static_cast<int>(r)) + ")";
    if (r == CUFFT_ALLOC_FAILED) throw OutOfMemory(msg);
    throw std::runtime_error(msg);
}

#define DP_CUFFT_CHECK(call) check_cufft((call), #call)

// ---- kernels --------------------------------------------------------------------------------------
// The spectral layout is z-first: the half spectrum along z (Kz = Mz/2 + 1 frequencies), full along
// y and x, slot j at spec + j * Q with Q = Kz My Mx. A 3D DFT is the z-DFT of the image's columns
// followed by 2D DFTs of the (My, Mx) planes, and the coefficient maps c_j(y, x) do not depend on z, so
// they commute with the z-DFT: the forward transforms the image along z once and modulates the Kz
// planes by each c_j before the r 2D transforms; the adjoint sums c_j times the r inverse 2D transforms
// before the one inverse z-DFT. The z-DFTs run on the image's ny x nx columns only (the xy padding is
// zero). On an H200 a batch of 5 2D C2C transforms of 53 x 336 x 336 takes 0.35 ms against 0.76 ms for
// the 5 3D R2C transforms of 105 x 336 x 336 it replaces (benchmarks/fft_layouts.py).
//
// Pad / crop kernels use 32 x 8 tiles of (x, y): a warp reads 32 consecutive values of a row, and
// short rows do not leave most of a long 1D block idle.
constexpr int kTileX = 32, kTileY = 8;
constexpr int kFlatThreads = 256;

dim3 tile_grid(int nx, int ny, int nz) {
    return dim3((nx + kTileX - 1) / kTileX, (ny + kTileY - 1) / kTileY, nz);
}

// dst[j](k, y, x) = c_j(y, x) * zs(k, y, x) inside the image's (ny, nx), 0 in the xy padding, for the
// Kz z-frequencies k and `slots` terms (c_j = 1 without coefficients). One launch writes every value
// of every slot, so no memset is needed. grid: tile_grid(Mx, My, Kz * slots).
__global__ void modulate_pad_kernel(const cufftComplex* __restrict__ zs, const float* __restrict__ coef,
                                    cufftComplex* __restrict__ dst, Shape3 n, Shape3 m, int kz) {
    const int x = blockIdx.x * kTileX + threadIdx.x;
    const int y = blockIdx.y * kTileY + threadIdx.y;
    if (x >= m.nx || y >= m.ny) return;
    const int jk = blockIdx.z;  // j * Kz + k
    const int j = jk / kz, k = jk - j * kz;
    cufftComplex v = make_cuFloatComplex(0.0f, 0.0f);
    if (x < n.nx && y < n.ny) {
        v = zs[(static_cast<long long>(k) * n.ny + y) * n.nx + x];
        if (coef) {
            const float c = __ldg(coef + (static_cast<long long>(j) * n.ny + y) * n.nx + x);
            v.x *= c;
            v.y *= c;
        }
    }
    dst[(static_cast<long long>(jk) * m.ny + y) * m.nx + x] = v;
}

// zs(k, y, x) = sum_{j < slots} c_j(y, x) * buf[j](k, y, x) on the image's (ny, nx) (c_j = 1 without
// coefficients): the xy crop, the coefficients and the sum over terms in one pass.
// grid: tile_grid(nx, ny, Kz).
__global__ void crop_sum_kernel(const cufftComplex* __restrict__ buf, const float* __restrict__ coef,
                                cufftComplex* __restrict__ zs, Shape3 n, Shape3 m, int kz, int slots) {
    const int x = blockIdx.x * kTileX + threadIdx.x;
    const int y = blockIdx.y * kTileY + threadIdx.y;
    if (x >= n.nx || y >= n.ny) return;
    const int k = blockIdx.z;
    const long long q = static_cast<long long>(kz) * m.ny * m.nx;
    const long long p = (static_cast<long long>(k) * m.ny + y) * m.nx + x;
    const long long pix = static_cast<long long>(y) * n.nx + x, plane = static_cast<long long>(n.ny) * n.nx;
    cufftComplex acc = make_cuFloatComplex(0.0f, 0.0f);
    for (int j = 0; j < slots; ++j) {
        const cufftComplex v = buf[j * q + p];
        const float c = coef ? __ldg(coef + j * plane + pix) : 1.0f;
        acc.x = fmaf(c, v.x, acc.x);
        acc.y = fmaf(c, v.y, acc.y);
    }
    zs[k * plane + pix] = acc;
}

// Forward: X[0][k] = sum_j K[j][k] X[j][k] (in place; each thread reads its k of every slot first).
__global__ void product_sum_kernel(cufftComplex* __restrict__ X, const cufftComplex* __restrict__ K,
                                   long long q, int rank) {
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < q;
         k += static_cast<long long>(gridDim.x) * blockDim.x) {
        cufftComplex acc = cuCmulf(K[k], X[k]);
        for (int j = 1; j < rank; ++j) acc = cuCaddf(acc, cuCmulf(K[j * q + k], X[j * q + k]));
        X[k] = acc;
    }
}

// Adjoint: Y[j][k] = conj(K[j][k]) Y[0][k] for every j (Y[0][k] read into a register first).
__global__ void conj_product_spread_kernel(cufftComplex* __restrict__ Y, const cufftComplex* __restrict__ K,
                                           long long q, int rank) {
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < q;
         k += static_cast<long long>(gridDim.x) * blockDim.x) {
        const cufftComplex y = Y[k];
        for (int j = rank - 1; j >= 0; --j) Y[j * q + k] = cuCmulf(cuConjf(K[j * q + k]), y);
    }
}

// Spectra given in the R2C layout (r, Mz, My, Mx/2+1) into the z-first layout (r, Kz, My, Mx), times s.
// The missing x half follows from the Hermitian symmetry of a real kernel's spectrum:
// S(kz, ky, kx) = conj(S(-kz, -ky, -kx)) with -kx = Mx - kx in the stored half.
__global__ void respread_kernel(const cufftComplex* __restrict__ half, cufftComplex* __restrict__ out, Shape3 m,
                                int kz, int rank, float s) {
    const long long q = static_cast<long long>(kz) * m.ny * m.nx;
    const int hx = m.nx / 2 + 1;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < rank * q;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long j = i / q, r = i - j * q;
        const int x = static_cast<int>(r % m.nx), y = static_cast<int>((r / m.nx) % m.ny);
        const int z = static_cast<int>(r / (static_cast<long long>(m.nx) * m.ny));
        const cufftComplex* h = half + j * static_cast<long long>(m.nz) * m.ny * hx;
        cufftComplex v;
        if (x < hx) {
            v = h[(static_cast<long long>(z) * m.ny + y) * hx + x];
        } else {
            const int zc = (m.nz - z) % m.nz, yc = (m.ny - y) % m.ny, xc = m.nx - x;
            v = cuConjf(h[(static_cast<long long>(zc) * m.ny + yc) * hx + xc]);
        }
        out[i] = make_cuFloatComplex(v.x * s, v.y * s);
    }
}

__global__ void scale_kernel(cufftComplex* __restrict__ a, long long count, float s) {
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < count;
         k += static_cast<long long>(gridDim.x) * blockDim.x) {
        a[k].x *= s;
        a[k].y *= s;
    }
}

unsigned flat_blocks(long long count) {
    const long long b = (count + kFlatThreads - 1) / kFlatThreads;
    return static_cast<unsigned>(b < (1 << 20) ? (b > 0 ? b : 1) : (1 << 20));  // grid-stride beyond
}

// ---- plans and per-stream scratch -------------------------------------------------------------------
// The transforms of the z-first layout: the z-DFTs (R2C, C2R) of `columns` columns of length Mz
// stored plane after plane (stride = columns, consecutive columns adjacent), and batched 2D C2C
// DFTs of contiguous (My, Mx) planes (both directions from one plan).
enum class PlanKind { z_r2c, z_c2r, xy_c2c };

class CufftPlan {
public:
    // The plan's work area is not allocated by cuFFT (auto-allocation off): the stream context gives
    // all its plans one shared area (work_bytes() says what this plan needs).
    CufftPlan(PlanKind kind, const Shape3& m, long long columns, int batch, cudaStream_t stream) {
        DP_CUFFT_CHECK(cufftCreate(&handle_));
        try {
            DP_CUFFT_CHECK(cufftSetAutoAllocation(handle_, 0));
            if (kind == PlanKind::xy_c2c) {
                int dims[2] = {m.ny, m.nx};
                DP_CUFFT_CHECK(cufftMakePlanMany(handle_, 2, dims, nullptr, 1, 0, nullptr, 1, 0, CUFFT_C2C, batch,
                                                 &work_bytes_));
            } else {
                require(columns <= 2147483647LL,
                        "image: ny * nx (My * Mx for the kernels) must fit in an int for cuFFT's z-DFT");
                int len[1] = {m.nz}, real_embed[1] = {m.nz}, half_embed[1] = {m.nz / 2 + 1};
                const int stride = static_cast<int>(columns);
                if (kind == PlanKind::z_r2c)
                    DP_CUFFT_CHECK(cufftMakePlanMany(handle_, 1, len, real_embed, stride, 1, half_embed, stride, 1,
                                                     CUFFT_R2C, stride, &work_bytes_));
                else
                    DP_CUFFT_CHECK(cufftMakePlanMany(handle_, 1, len, half_embed, stride, 1, real_embed, stride, 1,
                                                     CUFFT_C2R, stride, &work_bytes_));
            }
            DP_CUFFT_CHECK(cufftSetStream(handle_, stream));
        } catch (...) {
            cufftDestroy(handle_);
            throw;
        }
    }
    ~CufftPlan() { cufftDestroy(handle_); }  // no throw from a destructor
    CufftPlan(const CufftPlan&) = delete;
    CufftPlan& operator=(const CufftPlan&) = delete;
    cufftHandle get() const { return handle_; }
    size_t work_bytes() const { return work_bytes_; }

private:
    cufftHandle handle_{};
    size_t work_bytes_ = 0;
};

struct StreamContext {
    cudaStream_t stream = nullptr;
    int capacity = 0;                      // number of spectral slots the scratch holds
    cuda::DeviceBuffer columns, zs, spec;  // (Mz, ny, nx) float, (Kz, ny, nx) complex, (slots, Q) complex
    // One cuFFT work area for all the plans below: their transforms run one after another on this
    // stream, so they can share it (a plan per rank of the low-rank views would otherwise each hold
    // its own).
    cuda::DeviceBuffer work;
    std::map<std::tuple<int, long long, int>, std::unique_ptr<CufftPlan>> plans;  // (kind, columns, batch)

    void reserve(int slots, const Shape3& n, const Shape3& m, long long q) {
        const size_t plane = static_cast<size_t>(n.ny) * n.nx;
        if (!columns.bytes()) {
            columns = cuda::DeviceBuffer(sizeof(float) * static_cast<size_t>(m.nz) * plane);
            zs = cuda::DeviceBuffer(sizeof(cufftComplex) * static_cast<size_t>(m.nz / 2 + 1) * plane);
        }
        if (slots <= capacity) return;
        // Free before allocating the larger buffer (cudaFree waits for pending work using it).
        spec = cuda::DeviceBuffer();
        spec = cuda::DeviceBuffer(sizeof(cufftComplex) * static_cast<size_t>(slots) * q);
        capacity = slots;
    }

    cufftHandle plan(PlanKind kind, const Shape3& m, long long cols, int batch) {
        const auto key = std::make_tuple(static_cast<int>(kind), cols, batch);
        auto found = plans.find(key);
        if (found != plans.end()) return found->second->get();
        std::unique_ptr<CufftPlan> p(new CufftPlan(kind, m, cols, batch, stream));
        if (p->work_bytes() > work.bytes()) {
            // a larger area for every plan (cudaFree waits for pending work using the old one); the
            // plans keep pointing at the old area until the new one exists
            cuda::DeviceBuffer larger(p->work_bytes());
            for (auto& kv : plans) DP_CUFFT_CHECK(cufftSetWorkArea(kv.second->get(), larger.as<void>()));
            work = std::move(larger);
        }
        DP_CUFFT_CHECK(cufftSetWorkArea(p->get(), work.as<void>()));
        return plans.emplace(key, std::move(p)).first->second->get();
    }

    size_t bytes() const { return columns.bytes() + zs.bytes() + spec.bytes() + work.bytes(); }
};

}  // namespace

// ---- the engine -------------------------------------------------------------------------------------
struct CudaFftEngine::Impl {
    struct View {
        int rank = 1;
        cuda::DeviceBuffer spectra;       // (rank, Q) cufftComplex, z-first layout, scaled by 1/(Mz My Mx)
        cuda::DeviceBuffer coefficients;  // (rank, ny, nx) float, or empty (c_1 = 1)
        const cufftComplex* K() const { return spectra.as<cufftComplex>(); }
        const float* coef() const { return coefficients.bytes() ? coefficients.as<float>() : nullptr; }
    };

    Shape3 n, m;
    int kz = 1;          // z-frequencies of the half spectrum: Mz / 2 + 1
    long long q = 0;     // complex values per spectral slot: Kz My Mx
    int device = 0;
    ViewTable<View> views;
    std::map<void*, std::unique_ptr<StreamContext>> contexts;
    mutable std::mutex mutex;  // serialises enqueueing (scratch reuse) and the view table

    StreamContext& context(void* stream) {
        auto& c = contexts[stream];
        if (!c) {
            c.reset(new StreamContext);
            c->stream = static_cast<cudaStream_t>(stream);
        }
        return *c;
    }

    // The stream's context with scratch for a rank-r projection, on the engine's device.
    StreamContext& prepare(int r, void* stream) {
        check_device();
        StreamContext& ctx = context(stream);
        ctx.reserve(r, n, m, q);
        return ctx;
    }

    void check_device() const {
        int d = -1;
        DP_CUDA_CHECK(cudaGetDevice(&d));
        if (d != device)
            throw ValueError("device: this FFT engine lives on CUDA device " + std::to_string(device) +
                             " but device " + std::to_string(d) + " is current");
    }

    long long plane() const { return static_cast<long long>(n.ny) * n.nx; }

    // columns <- src zero-padded along z to Mz; zs <- its z-DFT.
    void z_forward(StreamContext& ctx, const float* src) {
        const size_t image = sizeof(float) * static_cast<size_t>(n.nz) * plane();
        DP_CUDA_CHECK(cudaMemcpyAsync(ctx.columns.as<float>(), src, image, cudaMemcpyDeviceToDevice, ctx.stream));
        if (m.nz > n.nz)
            DP_CUDA_CHECK(cudaMemsetAsync(ctx.columns.as<char>() + image, 0,
                                          sizeof(float) * static_cast<size_t>(m.nz - n.nz) * plane(), ctx.stream));
        DP_CUFFT_CHECK(cufftExecR2C(ctx.plan(PlanKind::z_r2c, m, plane(), 1), ctx.columns.as<cufftReal>(),
                                    ctx.zs.as<cufftComplex>()));
    }

    // dst <- the first nz planes of the inverse z-DFT of zs (cuFFT's C2R may overwrite zs).
    void z_inverse(StreamContext& ctx, float* dst) {
        DP_CUFFT_CHECK(cufftExecC2R(ctx.plan(PlanKind::z_c2r, m, plane(), 1), ctx.zs.as<cufftComplex>(),
                                    ctx.columns.as<cufftReal>()));
        DP_CUDA_CHECK(cudaMemcpyAsync(dst, ctx.columns.as<float>(), sizeof(float) * static_cast<size_t>(n.nz) * plane(),
                                      cudaMemcpyDeviceToDevice, ctx.stream));
    }

    // `slots` spectral slots transformed in place by 2D DFTs of their Kz planes.
    void xy(StreamContext& ctx, cufftComplex* data, int slots, int direction) {
        DP_CUFFT_CHECK(cufftExecC2C(ctx.plan(PlanKind::xy_c2c, m, 0, slots * kz), data, data, direction));
    }
};

CudaFftEngine::CudaFftEngine(const Shape3& image, const Shape3& padded) : impl_(new Impl) {
    check_shapes(image, padded);
    // Grid limit of the pad/crop launches: gridDim.z (Kz, times the rank for the modulation) <= 65535.
    require(padded.nz / 2 + 1 <= 65535, "padded: Mz / 2 + 1 must be <= 65535 on the GPU");
    impl_->n = image;
    impl_->m = padded;
    impl_->kz = padded.nz / 2 + 1;
    impl_->q = static_cast<long long>(impl_->kz) * padded.ny * padded.nx;
    DP_CUDA_CHECK(cudaGetDevice(&impl_->device));
}

CudaFftEngine::~CudaFftEngine() = default;

void CudaFftEngine::set_view(int v, const ViewTerms& t) {
    Impl& s = *impl_;
    check_view_terms(t);
    require(static_cast<long long>(t.rank) * s.kz <= 65535,
            "rank: rank * (Mz / 2 + 1) must be <= 65535 on the GPU (modulation kernel grid)");
    std::lock_guard<std::mutex> lock(s.mutex);
    s.check_device();
    Impl::View view;
    view.rank = t.rank;
    const long long count = t.rank * s.q;
    const float scale = 1.0f / static_cast<float>(s.m.size());  // cuFFT is unnormalised: 1/(Mz My Mx) once
    view.spectra = cuda::DeviceBuffer(sizeof(cufftComplex) * static_cast<size_t>(count));
    StreamContext& ctx = s.context(nullptr);  // legacy default stream, synchronised below
    if (t.spectra) {
        // given in the R2C layout: staged, then spread into the z-first layout
        const long long half = t.rank * half_spectrum_size(s.m);
        cuda::DeviceBuffer staged(sizeof(cufftComplex) * static_cast<size_t>(half));
        staged.upload(t.spectra, sizeof(cufftComplex) * static_cast<size_t>(half));
        respread_kernel<<<flat_blocks(count), kFlatThreads>>>(staged.as<cufftComplex>(), view.spectra.as<cufftComplex>(),
                                                              s.m, s.kz, t.rank, scale);
        DP_CUDA_CHECK_LAUNCH("fft respread_kernel");
        DP_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // before `staged` is freed
    } else {
        // the kernels' z-DFT over the whole padded plane, term by term (each staged at the start of
        // one buffer: cuFFT rejects a real input that is not 8-byte aligned, which term j of an odd-sized
        // grid would be), then the 2D DFTs of all terms
        const long long padded_plane = static_cast<long long>(s.m.ny) * s.m.nx;
        const size_t term_bytes = sizeof(float) * static_cast<size_t>(s.m.size());
        cuda::DeviceBuffer term(term_bytes);
        const cufftHandle z = ctx.plan(PlanKind::z_r2c, s.m, padded_plane, 1);
        for (int j = 0; j < t.rank; ++j) {
            term.upload(t.kernels + j * s.m.size(), term_bytes);  // synchronous: the previous term is done
            DP_CUFFT_CHECK(cufftExecR2C(z, term.as<cufftReal>(), view.spectra.as<cufftComplex>() + j * s.q));
        }
        s.xy(ctx, view.spectra.as<cufftComplex>(), t.rank, CUFFT_FORWARD);
        scale_kernel<<<flat_blocks(count), kFlatThreads>>>(view.spectra.as<cufftComplex>(), count, scale);
        DP_CUDA_CHECK_LAUNCH("fft scale_kernel");
        DP_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // before `term` is freed
    }
    if (t.coefficients) {
        const size_t cb = sizeof(float) * static_cast<size_t>(t.rank) * s.n.ny * s.n.nx;
        view.coefficients = cuda::DeviceBuffer(cb);
        view.coefficients.upload(t.coefficients, cb);
    }
    DP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    s.views.put(v, std::move(view));
}

bool CudaFftEngine::has_view(int v) const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->views.contains(v);
}

int CudaFftEngine::rank(int v) const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->views.at(v).rank;
}

void CudaFftEngine::drop_view(int v) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->views.erase(v);
}

void CudaFftEngine::forward(int v, const float* src, float* dst, void* stream) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    const Impl::View& view = s.views.at(v);
    const int r = view.rank;
    StreamContext& ctx = s.prepare(r, stream);
    const cudaStream_t st = ctx.stream;
    cufftComplex* spec = ctx.spec.as<cufftComplex>();

    s.z_forward(ctx, src);
    const dim3 tile(kTileX, kTileY);
    modulate_pad_kernel<<<tile_grid(s.m.nx, s.m.ny, s.kz * r), tile, 0, st>>>(ctx.zs.as<cufftComplex>(), view.coef(),
                                                                             spec, s.n, s.m, s.kz);
    DP_CUDA_CHECK_LAUNCH("fft modulate_pad_kernel (forward)");
    s.xy(ctx, spec, r, CUFFT_FORWARD);
    product_sum_kernel<<<flat_blocks(s.q), kFlatThreads, 0, st>>>(spec, view.K(), s.q, r);
    DP_CUDA_CHECK_LAUNCH("fft product_sum_kernel");
    s.xy(ctx, spec, 1, CUFFT_INVERSE);
    crop_sum_kernel<<<tile_grid(s.n.nx, s.n.ny, s.kz), tile, 0, st>>>(spec, nullptr, ctx.zs.as<cufftComplex>(), s.n,
                                                                     s.m, s.kz, 1);
    DP_CUDA_CHECK_LAUNCH("fft crop_sum_kernel (forward)");
    s.z_inverse(ctx, dst);
}

void CudaFftEngine::adjoint(int v, const float* src, float* dst, void* stream) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    const Impl::View& view = s.views.at(v);
    const int r = view.rank;
    StreamContext& ctx = s.prepare(r, stream);
    const cudaStream_t st = ctx.stream;
    cufftComplex* spec = ctx.spec.as<cufftComplex>();

    s.z_forward(ctx, src);
    const dim3 tile(kTileX, kTileY);
    modulate_pad_kernel<<<tile_grid(s.m.nx, s.m.ny, s.kz), tile, 0, st>>>(ctx.zs.as<cufftComplex>(), nullptr, spec,
                                                                         s.n, s.m, s.kz);
    DP_CUDA_CHECK_LAUNCH("fft modulate_pad_kernel (adjoint)");
    s.xy(ctx, spec, 1, CUFFT_FORWARD);
    conj_product_spread_kernel<<<flat_blocks(s.q), kFlatThreads, 0, st>>>(spec, view.K(), s.q, r);
    DP_CUDA_CHECK_LAUNCH("fft conj_product_spread_kernel");
    s.xy(ctx, spec, r, CUFFT_INVERSE);
    crop_sum_kernel<<<tile_grid(s.n.nx, s.n.ny, s.kz), tile, 0, st>>>(spec, view.coef(), ctx.zs.as<cufftComplex>(),
                                                                     s.n, s.m, s.kz, r);
    DP_CUDA_CHECK_LAUNCH("fft crop_sum_kernel (adjoint)");
    s.z_inverse(ctx, dst);
}

const Shape3& CudaFftEngine::image_shape() const { return impl_->n; }
const Shape3& CudaFftEngine::padded_shape() const { return impl_->m; }
int CudaFftEngine::device() const { return impl_->device; }

size_t CudaFftEngine::bytes() const {
    const Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    size_t b = 0;
    s.views.for_each([&](const Impl::View& w) { b += w.spectra.bytes() + w.coefficients.bytes(); });
    for (const auto& kv : s.contexts) b += kv.second->bytes();
    return b;
}

}  // namespace dp::fft::gpu
