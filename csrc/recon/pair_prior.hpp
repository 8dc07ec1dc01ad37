// The pairwise priors' per-voxel sums (directpet.recon.priors), written once for the OpenMP and the
// CUDA backends: for voxel j and each neighbour k of its 3 x 3 x 3 neighbourhood inside the image,
//     grad_j += w_jk kappa_j kappa_k df/da (x_j, x_k)
//     hess_j += w_jk kappa_j kappa_k d2f/da2 (x_j, x_k)
//     value_j += w_jk kappa_j kappa_k f (x_j, x_k) / 2     (each unordered pair once over all j)
// with f symmetric, so the gradient of sum_{pairs} w f at j is the sum over j's neighbours of
// df/da (x_j, x_k). The pair functions (d = a - b; p0, p1 the prior's parameters):
//   RDP (Nuyts 2002)   f = d^2 / s,  s = a + b + gamma |d| + eps   (p0 = gamma, p1 = eps)
//                      df/da = d n / s^2,  n = a + 3 b + gamma |d| + 2 eps
//                      d2f/da2 = ((n + d sigma) s - 2 d n sigma) / s^3,  sigma = 1 + gamma sgn d
//   quadratic          f = d^2 / 2,  df/da = d,  d2f/da2 = 1
//   log-cosh           f = delta^2 log cosh(d / delta) (p0 = delta),  df/da = delta tanh(d / delta),
//                      d2f/da2 = 1 / cosh^2(d / delta)
// The NumPy / CuPy vectorised path of priors.py (float64 and strided images) and the float64
// reference (directpet.reference.priors) compute the same sums; tests keep the three equal.
#pragma once

#include <math.h>

#include "../common/hd.hpp"

namespace dp::recon {

enum PairKind : int { PAIR_RDP = 0, PAIR_QUADRATIC = 1, PAIR_LOGCOSH = 2 };
enum PairWant : int { WANT_GRAD = 1, WANT_HESS = 2, WANT_VALUE = 4 };

// The 3 x 3 x 3 table of neighbour weights w[(dz + 1) * 9 + (dy + 1) * 3 + (dx + 1)]: 0 for the
// centre and for the neighbours the neighbourhood leaves out (the 6-neighbourhood's edges and corners).
struct NeighbourWeights {
    float w[27];
};

// The image and the prior's constants: scale = beta * factor multiplies grad and hess.
struct PriorShape {
    int nz, ny, nx;
    float scale, p0, p1;
};

// 1 / s: the GPU's approximate reciprocal (2 ulp; a prior needs no IEEE division), exact on the host.
DP_HD float prior_reciprocal(float s) {
#if defined(__CUDA_ARCH__)
    return __fdividef(1.0f, s);
#else
    return 1.0f / s;
#endif
}

// f, df/da and d2f/da2 at (a, b), only those asked for (want): the RDP's three share one reciprocal.
template <int Kind>
DP_HD void pair_terms(float a, float b, float p0, float p1, int want, float& f, float& df, float& d2f) {
    const float d = a - b;
    if constexpr (Kind == PAIR_RDP) {
        const float ad = fabsf(d), s = a + b + p0 * ad + p1, n = a + 3.0f * b + p0 * ad + 2.0f * p1;
        const float r = prior_reciprocal(s);
        if (want & WANT_VALUE) f = d * d * r;
        if (want & WANT_GRAD) df = d * n * r * r;
        if (want & WANT_HESS) {
            const float sigma = 1.0f + p0 * (d > 0.0f ? 1.0f : (d < 0.0f ? -1.0f : 0.0f));
            d2f = ((n + d + p0 * ad) * s - 2.0f * d * n * sigma) * r * r * r;
        }
    } else if constexpr (Kind == PAIR_QUADRATIC) {
        f = 0.5f * d * d;
        df = d;
        d2f = 1.0f;
    } else {
        const float t = d / p0, at = fabsf(t);
        if (want & WANT_VALUE) {  // log cosh t: log1p(2 sinh^2(t/2)) below |t| = 1 (no cancellation), else |t| + ...
            const float sh = sinhf(0.5f * fminf(at, 1.0f));
            f = p0 * p0 * (at < 1.0f ? log1pf(2.0f * sh * sh) : at + log1pf(expf(-2.0f * at)) - 0.69314718f);
        }
        if (want & WANT_GRAD) df = p0 * tanhf(t);
        if (want & WANT_HESS) {
            const float c = coshf(fminf(at, 40.0f));
            d2f = 1.0f / (c * c);
        }
    }
}

// Voxel (iz, iy, ix): its sums over the neighbours, one output per instance (Want: WANT_GRAD into
// grad, added when accumulate; WANT_HESS into hess; WANT_VALUE into value), so that the compiler
// drops the other terms (the kernel is bound by the pair arithmetic). Index: 64-bit on the host;
// 32-bit on the GPU, whose launch takes images below 2^31 voxels only.
template <int Kind, bool HasKappa, int Want, typename Index = long long>
DP_HD void prior_voxel(const float* __restrict__ x, const float* __restrict__ kappa, const NeighbourWeights& W,
                       const PriorShape& P, int iz, int iy, int ix, float* out, bool accumulate) {
    constexpr int want = Want;
    const Index plane = static_cast<Index>(P.ny) * P.nx;
    const Index j = iz * plane + static_cast<Index>(iy) * P.nx + ix;
    const float a = x[j];
    const float ka = HasKappa ? kappa[j] : 1.0f;
    const bool inz[3] = {iz > 0, true, iz + 1 < P.nz}, iny[3] = {iy > 0, true, iy + 1 < P.ny},
               inx[3] = {ix > 0, true, ix + 1 < P.nx};
    float sum = 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int dz = -1; dz <= 1; ++dz) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int dy = -1; dy <= 1; ++dy) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
            for (int dx = -1; dx <= 1; ++dx) {
                float w = W.w[(dz + 1) * 9 + (dy + 1) * 3 + (dx + 1)];
                if (w == 0.0f || !(inz[dz + 1] && iny[dy + 1] && inx[dx + 1])) continue;
                const Index k = j + dz * plane + static_cast<Index>(dy) * P.nx + dx;
                if (HasKappa) w *= ka * kappa[k];
                float f = 0.0f, df = 0.0f, d2f = 0.0f;
                pair_terms<Kind>(a, x[k], P.p0, P.p1, want, f, df, d2f);
                sum = fmaf(w, want == WANT_GRAD ? df : (want == WANT_HESS ? d2f : f), sum);
            }
        }
    }
    if constexpr (want == WANT_GRAD) out[j] = accumulate ? fmaf(P.scale, sum, out[j]) : P.scale * sum;
    else if constexpr (want == WANT_HESS) out[j] = P.scale * sum;
    else out[j] = 0.5f * sum;
}

// Calls f.template operator()<Kind, HasKappa, Want>(out) for the runtime kind and kappa, once per
// output asked for (grad, hess, value: the backends' dispatch onto the compiled instances); false for
// an unknown kind.
template <int Kind, bool HasKappa, typename F>
void dispatch_outputs(F& f, float* grad, float* hess, float* value) {
    if (grad) f.template operator()<Kind, HasKappa, WANT_GRAD>(grad);
    if (hess) f.template operator()<Kind, HasKappa, WANT_HESS>(hess);
    if (value) f.template operator()<Kind, HasKappa, WANT_VALUE>(value);
}

template <typename F>
bool dispatch_prior(int kind, bool has_kappa, F& f, float* grad, float* hess, float* value) {
    switch (kind * 2 + (has_kappa ? 1 : 0)) {
        case 0: dispatch_outputs<PAIR_RDP, false>(f, grad, hess, value); return true;
        case 1: dispatch_outputs<PAIR_RDP, true>(f, grad, hess, value); return true;
        case 2: dispatch_outputs<PAIR_QUADRATIC, false>(f, grad, hess, value); return true;
        case 3: dispatch_outputs<PAIR_QUADRATIC, true>(f, grad, hess, value); return true;
        case 4: dispatch_outputs<PAIR_LOGCOSH, false>(f, grad, hess, value); return true;
        case 5: dispatch_outputs<PAIR_LOGCOSH, true>(f, grad, hess, value); return true;
        default: return false;
    }
}

// The backends (the arrays: x, kappa (null: 1), grad / hess / value (null: not computed), nz*ny*nx floats).
void pair_prior_cpu(int kind, const float* x, const float* kappa, const NeighbourWeights& W, const PriorShape& P,
                    float* grad, bool accumulate, float* hess, float* value, int threads);
#if defined(DIRECTPET_WITH_CUDA)
void pair_prior_cuda(int kind, const float* x, const float* kappa, const NeighbourWeights& W, const PriorShape& P,
                     float* grad, bool accumulate, float* hess, float* value, void* stream);
#endif

}  // namespace dp::recon
