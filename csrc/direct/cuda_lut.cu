// DIRECT projectors on the GPU: one view's LUTs resident on the device (DeviceLut: the raw LUTs, the
// column plan of the slab and columns kernels, the weights factored per column where they allow) and the
// dispatch of a projection to its method: the defaults in cuda_slab.cu, the paper's schemes in
// cuda_paper.cu (cuda.hpp describes them all).
#include <cuda_pipeline.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "../common/cuda_check.cuh"
#include "../common/errors.hpp"
#include "columns.hpp"
#include "cuda.hpp"
#include "cuda_internal.cuh"

namespace dp::direct::gpu {

Method parse_method(const std::string& name) {
    if (name == "tlp") return Method::tlp;
    if (name == "ilp") return Method::ilp;
    if (name == "slab" || name == "default") return Method::slab;
    if (name == "slab_table") return Method::slab_table;
    if (name == "slab_r16") return Method::slab_r16;
    if (name == "columns") return Method::columns;
    throw ValueError("method: expected 'default', 'slab', 'slab_table', 'slab_r16', 'columns', 'tlp' or 'ilp', got '" +
                     name + "'");
}

namespace {

template <typename T>
cuda::DeviceBuffer upload(const T* host, size_t count) {
    cuda::DeviceBuffer b(count * sizeof(T));
    b.upload(host, count * sizeof(T));
    return b;
}

// Factor each group's tap weights W(g, a, k) = h[g * nk + a] * t[w0 + k], W in the table layout of
// DeviceLut (W[w0 * nk + a * padded[g] + k]). The reference tap is the group's largest; the result is
// accepted when it reproduces every weight to 2e-6 of the table's largest value (float rounding of the
// product is ~1e-7 relative).
bool factor_columns(const std::vector<float>& W, const std::vector<int>& groups, const std::vector<int>& taps_per_group,
                    const std::vector<int>& padded, int nk, size_t stride, std::vector<float>& h, std::vector<float>& t) {
    const size_t n_groups = taps_per_group.size();
    h.assign(n_groups * nk, 0.0f);
    t.assign(stride, 0.0f);
    float wmax = 0.0f;
    for (float v : W) wmax = std::max(wmax, std::fabs(v));
    const double tol = 2e-6 * wmax;
    for (size_t g = 0; g < n_groups; ++g) {
        const size_t w0 = groups[4 * g + 3];
        const int n = taps_per_group[g];
        auto weight = [&](int a, int k) { return W[table_index(static_cast<int>(w0), nk, a, padded[g]) + k]; };
        int k_ref = 0, a_ref = 0;
        double best = -1.0;
        for (int k = 0; k < n; ++k)
            for (int a = 0; a < nk; ++a)
                if (weight(a, k) > best) best = weight(a, k), k_ref = k, a_ref = a;
        if (best <= 0.0) continue;  // an all-zero column: h = t = 0 reproduces it
        for (int a = 0; a < nk; ++a) h[g * nk + a] = weight(a, k_ref);
        for (int k = 0; k < n; ++k) t[w0 + k] = static_cast<float>(weight(a_ref, k) / best);
        for (int k = 0; k < n; ++k)
            for (int a = 0; a < nk; ++a)
                if (std::fabs(static_cast<double>(h[g * nk + a]) * t[w0 + k] - weight(a, k)) > tol) return false;
    }
    return true;
}

int span_class(int taps) {
    for (int c = 0; c < kNumSpanClasses; ++c)
        if (taps <= kSpanClasses[c]) return c;
    return -1;
}

}  // namespace

DeviceLut::DeviceLut(const LutRef& h, const Dims& d)
    : dims_(d), n_offsets_(h.n_offsets), n_kernels_(h.n_kernels) {
    lormap_ = upload(h.lormap, static_cast<size_t>(d.ny) * d.nx);
    offsets_ = upload(h.offsets, static_cast<size_t>(h.n_offsets) * 3);
    flip_ = upload(h.flip, static_cast<size_t>(h.n_offsets));
    values_ = upload(h.values, static_cast<size_t>(h.n_offsets) * h.n_kernels);

    // Column plan: split columns longer than the largest span class, bucket them by span class
    // (each group padded with zero weights to padded_span of its class span), order by (dy, class, dx).
    int halo[3];
    const std::vector<KernelColumn> cols = kernel_columns(h, d, halo);
    halo_x_ = halo[2];
    struct Piece {
        int dy, dx, dz_min, cls;
        std::vector<int> taps;
    };
    std::vector<Piece> pieces;
    auto pieces_taps = [](const std::vector<Piece>& ps) {
        std::vector<int> n;
        for (const Piece& p : ps) n.push_back(static_cast<int>(p.taps.size()));
        return n;
    };
    const int max_span = kSpanClasses[kNumSpanClasses - 1];
    for (const KernelColumn& c : cols)
        for (size_t k0 = 0; k0 < c.taps.size(); k0 += max_span) {
            const size_t k1 = std::min(c.taps.size(), k0 + max_span);
            std::vector<int> taps(c.taps.begin() + k0, c.taps.begin() + k1);
            const int cls = span_class(static_cast<int>(taps.size()));
            pieces.push_back({c.dy, c.dx, c.dz_min + static_cast<int>(k0), cls, std::move(taps)});
        }
    std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
        return a.dy != b.dy ? a.dy < b.dy : a.cls != b.cls ? a.cls < b.cls : a.dx < b.dx;
    });
    // Each group's first tap column w0: its (group, kernel) runs of padded_span floats start on a
    // multiple of their vector width (w0 a multiple of 2 or 4, whatever n_kernels).
    std::vector<int> w0s(pieces.size()), padded(pieces.size());
    int wstride = 0;
    for (size_t g = 0; g < pieces.size(); ++g) {
        padded[g] = padded_span(kSpanClasses[pieces[g].cls]);
        max_span_class_ = std::max(max_span_class_, pieces[g].cls);
        const int align = padded_alignment(padded[g]);
        wstride = (wstride + align - 1) / align * align;
        w0s[g] = wstride;
        wstride += padded[g];
    }
    std::vector<int> groups, rows;
    for (size_t g = 0; g < pieces.size(); ++g) {
        const Piece& p = pieces[g];
        if (g == 0 || p.dy != pieces[g - 1].dy) {  // new row
            RowInfo r{p.dy, p.dz_min, 0, {}};
            size_t e = g;
            int z_hi = p.dz_min;
            for (; e < pieces.size() && pieces[e].dy == p.dy; ++e) {
                r.z_lo = std::min(r.z_lo, pieces[e].dz_min);
                z_hi = std::max(z_hi, pieces[e].dz_min + kSpanClasses[pieces[e].cls] - 1);
            }
            r.z_extent = z_hi - r.z_lo + 1;
            for (int c = 0; c <= kNumSpanClasses; ++c) {
                size_t k = g;
                while (k < e && pieces[k].cls < c) ++k;
                r.class_begin[c] = static_cast<int>(k);
            }
            const int tap_end = w0s[e - 1] + padded[e - 1];
            rows.insert(rows.end(), {r.dy, r.z_lo, r.z_extent});
            rows.insert(rows.end(), r.class_begin, r.class_begin + kNumSpanClasses + 1);
            rows.insert(rows.end(), {w0s[g], tap_end});
            max_row_taps_ = std::max(max_row_taps_, tap_end - w0s[g]);
        }
        groups.insert(groups.end(), {p.dy, p.dx, p.dz_min, w0s[g]});
    }
    n_rows_ = static_cast<int>(rows.size() / kRowInts);
    for (int r = 0; r < n_rows_; ++r)
        max_row_groups_ = std::max(max_row_groups_, rows[r * kRowInts + kRowClassBegin + kNumSpanClasses] -
                                                        rows[r * kRowInts + kRowClassBegin]);
    z_lo_ = 0;
    int z_hi = 0;
    for (int r = 0; r < n_rows_; ++r) {
        z_lo_ = std::min(z_lo_, rows[r * kRowInts + 1]);
        z_hi = std::max(z_hi, rows[r * kRowInts + 1] + rows[r * kRowInts + 2] - 1);
    }
    z_span_ = z_hi - z_lo_ + 1;
    // The kernel row where half of the padded taps are done (rows are in dy order).
    {
        long long total = 0, acc = 0;
        for (int r = 0; r < n_rows_; ++r) total += rows[r * kRowInts + kRowTapBegin + 1] - rows[r * kRowInts + kRowTapBegin];
        row_split_ = std::max(1, n_rows_ / 2);
        for (int r = 0; r < n_rows_; ++r) {
            acc += rows[r * kRowInts + kRowTapBegin + 1] - rows[r * kRowInts + kRowTapBegin];
            if (2 * acc >= total) {
                row_split_ = std::min(std::max(r + 1, 1), std::max(n_rows_ - 1, 1));
                break;
            }
        }
    }
    // The kernels index the table with 32-bit unsigned arithmetic (table_index); so do the host loops
    // below. (A table this size, 16 GiB, would not fit a device anyway.)
    if (static_cast<unsigned long long>(n_kernels_) * static_cast<unsigned long long>(wstride) >= (1ull << 32))
        throw ValueError("lut: the per-tap weight table (" + std::to_string(n_kernels_) + " kernels x " +
                         std::to_string(wstride) + " taps) exceeds the 2^32 floats the CUDA kernels index");
    // A group's weights are stored kernel by kernel, each kernel's taps one padded vector: a column
    // loads its weights with one (or a few) vector loads. The lanes of a warp hold neighbouring pixels
    // whose identifiers are close, so the warp's load touches a few cache lines of the group's block.
    std::vector<float> wf(static_cast<size_t>(n_kernels_) * wstride, 0.0f), wb(wf.size(), 0.0f);
    for (size_t g = 0; g < pieces.size(); ++g) {
        const size_t w0 = w0s[g];
        for (size_t k = 0; k < pieces[g].taps.size(); ++k) {
            const int i = pieces[g].taps[k];
            for (int a = 0; a < n_kernels_; ++a) {
                const size_t at = table_index(static_cast<int>(w0), n_kernels_, a, padded[g]) + k;
                wb[at] = h.values[back_weight_index(a, i, n_offsets_)];
                wf[at] = h.values[forward_weight_index(a, h.flip[i], n_offsets_)];
            }
        }
    }
    rows_ = upload(rows.data(), rows.size());
    groups_ = upload(groups.data(), groups.size());
    w_fwd_ = upload(wf.data(), wf.size());
    w_back_ = upload(wb.data(), wb.size());
    std::vector<float> radial, taps;
    const std::vector<int> n_taps = pieces_taps(pieces);
    if ((factored_fwd_ = factor_columns(wf, groups, n_taps, padded, n_kernels_, wstride, radial, taps))) {
        h_fwd_ = upload(radial.data(), radial.size());
        t_fwd_ = upload(taps.data(), taps.size());
    }
    if ((factored_back_ = factor_columns(wb, groups, n_taps, padded, n_kernels_, wstride, radial, taps))) {
        h_back_ = upload(radial.data(), radial.size());
        t_back_ = upload(taps.data(), taps.size());
    }
}

LutRef DeviceLut::device_ref() const {
    return {lormap_.as<int32_t>(), offsets_.as<int32_t>(), flip_.as<int32_t>(), values_.as<float>(),
            n_offsets_, n_kernels_};
}

size_t DeviceLut::bytes() const {
    return lormap_.bytes() + offsets_.bytes() + flip_.bytes() + values_.bytes() + groups_.bytes() +
           rows_.bytes() + w_fwd_.bytes() + w_back_.bytes() + h_fwd_.bytes() + h_back_.bytes() +
           t_fwd_.bytes() + t_back_.bytes();
}

SlabVariant slab_variant(Method method) {
    switch (method) {
        case Method::slab: return SlabVariant::slab;
        case Method::slab_table: return SlabVariant::table;
        case Method::slab_r16: return SlabVariant::r16;
        default: throw ValueError("method: expected a slab variant ('default', 'slab', 'slab_table', 'slab_r16')");
    }
}

void project(bool forward, Method method, const float* src, float* dst, const DeviceLut& lut, void* stream) {
    if (src == dst) throw ValueError("out: must not alias the input array");
    const auto s = static_cast<cudaStream_t>(stream);
    switch (method) {
        case Method::tlp:
        case Method::ilp: return detail::launch_paper(forward, method, src, dst, lut, s);
        case Method::columns: return detail::launch_columns(forward, src, dst, lut, s);
        case Method::slab:
        case Method::slab_table:
        case Method::slab_r16: return detail::launch_slab(forward, slab_variant(method), src, dst, lut, s);
    }
}

}  // namespace dp::direct::gpu
