// OpenMP event simulation + deposition (CPU backend): batched loops around events_worker.hpp.
//
// Each of up to kCpuStreams random streams (events.hpp) has a quota of accepted events and its
// own Philox4x32-10 counter space keyed by the seed; OpenMP threads pick streams dynamically.
//
// Decays are processed in batches of kBatch: the first stage of a decay (annihilation point,
// direction, detector hit, water escape) is branch-free in events_worker.hpp, so a batch runs as a
// few SIMD loops, its random bits included (Philox is a function of a counter); only the ~5 % of
// decays that pass go on, one by one, to the blur, the timing and the deposition. Deposits are
// atomic float adds into the shared histo-images: per-thread partial histo-images would cost
// threads x (n_views x voxels) floats (0.5 GB each at the paper's size) and a reduction pass for
// a few adds per microsecond.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "../common/philox.hpp"
#include "events.hpp"

namespace dp::direct::events {

using random::Philox4;
using random::philox4x32_10;
namespace {

// Decays one stream draws per round: 256 streams x 2^17 decays is about a third of a second of
// work per core, so the hook (progress bar, Ctrl-C) is called a few times a second.
constexpr uint64_t kRoundDecaysCpu = 1ull << 17;

constexpr int kBatch = 256;

// The 32-bit draws of a decay's first stage, one row per use.
enum Slot { kComponent, kPos0, kPos1, kPos2, kDir0, kDir1, kEscape, kCold, kNumSlots };

// Random bits of one stream: Philox4x32-10 with key (seed low, seed high) and counters
// (i low, i high, stream, domain), all distinct:
//   domains 0 and 1: the eight first-stage draws of candidate decay i (fill_batch);
//   domain 2:        sequential draws (next_u32) for the blur and timing normals, i counting
//                    blocks of four.
class StreamRng {
public:
    StreamRng(uint64_t seed, uint32_t stream)
        : k0_(static_cast<uint32_t>(seed)), k1_(static_cast<uint32_t>(seed >> 32)), stream_(stream) {}

    // bits[slot][i] for the next kBatch candidate decays. Batches start at multiples of kBatch, so
    // the low counter word cannot carry inside a batch and the loop vectorises.
    void fill_batch(uint32_t (*bits)[kBatch]) {
        const uint32_t lo = static_cast<uint32_t>(candidates_), hi = static_cast<uint32_t>(candidates_ >> 32);
        const uint32_t k0 = k0_, k1 = k1_, s = stream_;
#pragma omp simd
        for (int i = 0; i < kBatch; ++i) {
            const Philox4 a = philox4x32_10(lo + static_cast<uint32_t>(i), hi, s, 0u, k0, k1);
            const Philox4 b = philox4x32_10(lo + static_cast<uint32_t>(i), hi, s, 1u, k0, k1);
            bits[0][i] = a.x;
            bits[1][i] = a.y;
            bits[2][i] = a.z;
            bits[3][i] = a.w;
            bits[4][i] = b.x;
            bits[5][i] = b.y;
            bits[6][i] = b.z;
            bits[7][i] = b.w;
        }
        candidates_ += kBatch;
    }

    uint32_t next_u32() {
        if (pos_ == 4) {
            block_ = philox4x32_10(static_cast<uint32_t>(blocks_), static_cast<uint32_t>(blocks_ >> 32),
                                   stream_, 2u, k0_, k1_);
            ++blocks_;
            pos_ = 0;
        }
        const uint32_t v[4] = {block_.x, block_.y, block_.z, block_.w};
        return v[pos_++];
    }

private:
    uint32_t k0_, k1_, stream_;
    uint64_t candidates_ = 0, blocks_ = 0;
    Philox4 block_{};
    int pos_ = 4;
};

void add(Counters& a, const Counters& b) {
    a.decays += b.decays;
    a.trues += b.trues;
    a.deposited += b.deposited;
    a.outside_views += b.outside_views;
    a.outside_grid += b.outside_grid;
    a.cold_exhausted += b.cold_exhausted;
}

// Deposits wait in a short queue after a prefetch of their cache line: the histo-images (MBs to
// GBs) are hit at random, and an atomic add that waits for its miss was a fifth of the run time.
constexpr int kPending = 32;

struct DepositQueue {
    int64_t index[kPending];
    int n = 0;

    void flush(float* histos) {
        for (int k = 0; k < n; ++k) {
#pragma omp atomic update
            histos[index[k]] += 1.0f;
        }
        n = 0;
    }
};

// Queues 1 at the event's place (or counts why not).
inline void deposit_one(const SimParams& P, const Event& ev, float* histos, DepositQueue& q,
                        Counters& c) {
    int64_t index = 0;
    switch (locate_event(P.grid, P.views, ev.p1, ev.p2, ev.dt, &index)) {
        case kDeposited:
#if defined(__GNUC__)
            __builtin_prefetch(histos + index, 1);
#endif
            q.index[q.n++] = index;
            if (q.n == kPending) q.flush(histos);
            ++c.deposited;
            break;
        case kOutsideViews: ++c.outside_views; break;
        default: ++c.outside_grid; break;
    }
}

struct Batch {
    alignas(64) uint32_t bits[kNumSlots][kBatch];
    alignas(64) int32_t comp[kBatch];
    alignas(64) float x[kBatch], y[kBatch], z[kBatch], ux[kBatch], uy[kBatch], uz[kBatch];
    alignas(64) float f_pos[kBatch], f_neg[kBatch];
    alignas(64) uint8_t is_decay[kBatch], pass[kBatch];
    DepositQueue queue;
};

// First stage of kBatch candidate decays. is_decay[i] is 0 for a point rejected by a cold insert
// (not a decay, as in AnalyticPhantom.sample); pass[i] says whether decay i reaches the detector
// and escapes the water.
void first_stage(const SimParams& P, StreamRng& rng, Batch& b) {
    const Phantom& ph = P.phantom;
    rng.fill_batch(b.bits);
    if (ph.n_pos == 1) {
        std::fill(b.comp, b.comp + kBatch, 0);
    } else {
        for (int i = 0; i < kBatch; ++i) b.comp[i] = choose_component(ph, uniform01_fine(b.bits[kComponent][i]));
    }
#pragma omp simd
    for (int i = 0; i < kBatch; ++i)
        point_in_component(ph.comp[b.comp[i]], uniform01(b.bits[kPos0][i]), uniform01(b.bits[kPos1][i]),
                           uniform01(b.bits[kPos2][i]), &b.x[i], &b.y[i], &b.z[i]);
    if (ph.has_cold) {
        std::fill(b.f_pos, b.f_pos + kBatch, 0.0f);
        std::fill(b.f_neg, b.f_neg + kBatch, 0.0f);
        for (int j = 0; j < ph.n_all; ++j) {  // components outside, decays inside: the inner loop vectorises
            const Component c = ph.comp[j];
            const bool positive = j < ph.n_pos;
#pragma omp simd
            for (int i = 0; i < kBatch; ++i)
                add_concentration(c, positive, b.x[i], b.y[i], b.z[i], &b.f_pos[i], &b.f_neg[i]);
        }
#pragma omp simd
        for (int i = 0; i < kBatch; ++i)
            b.is_decay[i] = uniform01(b.bits[kCold][i]) < cold_keep_probability(b.f_pos[i], b.f_neg[i]);
    } else {
        std::fill(b.is_decay, b.is_decay + kBatch, uint8_t{1});
    }
    const ScannerParams& s = P.scanner;
#pragma omp simd
    for (int i = 0; i < kBatch; ++i) {
        band_direction(s.sin_theta_max, uniform01(b.bits[kDir0][i]), uniform01(b.bits[kDir1][i]), &b.ux[i],
                       &b.uy[i], &b.uz[i]);
        b.pass[i] = reaches_detector_and_escapes(s, b.x[i], b.y[i], b.z[i], b.ux[i], b.uy[i], b.uz[i],
                                                 uniform01(b.bits[kEscape][i]));
    }
}

// Up to max_decays decays of one stream, stopping when its quota (`left`) is met. The candidates
// of a batch left over at either stop are discarded: which ones does not depend on their outcome,
// so the accepted events stay an unbiased sample.
Counters run_stream(const SimParams& P, StreamRng& rng, uint64_t& left, uint64_t max_decays,
                    float* histos, Batch& b) {
    Counters c;
    Event ev;
    int cold_run = 0;  // cold-insert rejections in a row (kMaxColdRejections: as sample_annihilation)
    while (left > 0 && c.decays < max_decays) {
        first_stage(P, rng, b);
        for (int i = 0; i < kBatch; ++i) {
            if (!b.is_decay[i]) {
                if (++cold_run < kMaxColdRejections) continue;
                ++c.cold_exhausted;  // the cold inserts cancel the activity: stop with an error
                b.queue.flush(histos);
                return c;
            }
            cold_run = 0;
            ++c.decays;
            if (b.pass[i] && finish_decay(P.scanner, b.x[i], b.y[i], b.z[i], b.ux[i], b.uy[i], b.uz[i], rng, ev)) {
                --left;
                ++c.trues;
                deposit_one(P, ev, histos, b.queue, c);
                if (left == 0) break;
            }
            if (c.decays == max_decays) break;
        }
    }
    b.queue.flush(histos);
    return c;
}

// The GPU's structure on the CPU: simulate_decay decay by decay, every bit from next_u32. Slower
// than run_stream; kept so that the CPU tests exercise the code path the CUDA kernel runs.
Counters run_stream_per_decay(const SimParams& P, StreamRng& rng, uint64_t& left, uint64_t max_decays,
                              float* histos, Batch& b) {
    Counters c;
    Event ev;
    while (left > 0 && c.decays < max_decays) {
        const int r = simulate_decay(P, rng, ev);
        if (r == kColdExhausted) {
            ++c.cold_exhausted;
            break;
        }
        ++c.decays;
        if (r != kAccepted) continue;
        --left;
        ++c.trues;
        deposit_one(P, ev, histos, b.queue, c);
    }
    b.queue.flush(histos);
    return c;
}

int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

}  // namespace

void check_acceptance(const Counters& c) {
    if (c.cold_exhausted > 0)
        throw std::runtime_error("simulate_deposit: the cold (negative) sources rejected " +
                                 std::to_string(kMaxColdRejections) + " annihilation points in a row; "
                                 "do they cancel the phantom's activity?");
    if (c.trues == 0 && c.decays >= kNoAcceptanceLimit)
        throw std::runtime_error("simulate_deposit: none of " + std::to_string(c.decays) +
                                 " decays gave an accepted coincidence; is the activity inside the "
                                 "detector cylinder?");
}

Counters simulate_deposit_cpu(const SimParams& P, uint64_t n_events, uint64_t seed, float* histos,
                              int threads, const RoundHook& hook, bool batched) {
    require(n_events > 0, "n_events: expected a positive integer");
    const uint32_t ns = stream_count(n_events, kCpuStreams);
    const int nt = thread_count(threads);
    std::vector<StreamRng> rngs;
    rngs.reserve(ns);
    std::vector<uint64_t> left(ns);
    for (uint32_t s = 0; s < ns; ++s) {
        rngs.emplace_back(seed, s);
        left[s] = stream_quota(n_events, ns, s);
    }
    Counters total;
    std::vector<Counters> round(ns);
    while (total.trues < n_events) {
#pragma omp parallel num_threads(nt)
        {
            std::unique_ptr<Batch> batch(new Batch);  // ~14 KB per thread
#pragma omp for schedule(dynamic, 1)
            for (int s = 0; s < static_cast<int>(ns); ++s)
                round[s] = !left[s] ? Counters{}
                           : batched ? run_stream(P, rngs[s], left[s], kRoundDecaysCpu, histos, *batch)
                                     : run_stream_per_decay(P, rngs[s], left[s], kRoundDecaysCpu, histos, *batch);
        }
        for (const Counters& c : round) add(total, c);
        if (hook) hook(total);
        check_acceptance(total);
    }
    return total;
}

Counters deposit_events_cpu(const GridParams& grid, const ViewParams& views, const float* p1,
                            const float* p2, const float* dt, int64_t n, float* histos, int threads) {
    SimParams P{};
    P.grid = grid;
    P.views = views;
    uint64_t deposited = 0, outside_views = 0, outside_grid = 0;
#pragma omp parallel for schedule(static) num_threads(thread_count(threads)) \
    reduction(+ : deposited, outside_views, outside_grid)
    for (int64_t i = 0; i < n; ++i) {
        Event ev;
        for (int a = 0; a < 3; ++a) {
            ev.p1[a] = p1[3 * i + a];
            ev.p2[a] = p2[3 * i + a];
        }
        ev.dt = dt[i];
        Counters c;
        DepositQueue q;
        deposit_one(P, ev, histos, q, c);
        q.flush(histos);
        deposited += c.deposited;
        outside_views += c.outside_views;
        outside_grid += c.outside_grid;
    }
    Counters out;
    out.trues = static_cast<uint64_t>(n);
    out.deposited = deposited;
    out.outside_views = outside_views;
    out.outside_grid = outside_grid;
    return out;
}

}  // namespace dp::direct::events
