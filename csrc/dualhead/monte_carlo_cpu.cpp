// Dual-head event Monte Carlo, CPU backend: an OpenMP loop around monte_carlo.hpp.
//
// Compiled with -ffp-contract=off (CMakeLists.txt): the decays must round exactly as on the GPU
// (common/portable_math.hpp). Threads take blocks of kBlockDecays consecutive decays dynamically (a
// decay's cost varies with its fate); a true is an atomic float add into the shared histogram
// (per-thread histograms would cost threads x n_lors floats, 224 MB each at full size, for at most
// one add per decay).
#include <omp.h>

#include <algorithm>

#include "../common/errors.hpp"
#include "monte_carlo_api.hpp"

namespace dp::dualhead::mc {
namespace {

constexpr int64_t kBlockDecays = 4096;

McParams host_params(const Plan& plan, uint64_t seed) {
    McParams p = plan.params;
    p.src.alias_accept = plan.alias_accept.data();
    p.src.alias_other = plan.alias_other.data();
    set_seed(p, seed);
    return p;
}

}  // namespace

Counters simulate_cpu(const Plan& plan, uint64_t seed, uint64_t first, uint64_t count, float weight, float* counts,
                      int threads) {
    require(count > 0, "count: expected a positive number of decays");
    require(first + count >= first, "first: the decay range overflows 2^64");
    const McParams P = host_params(plan, seed);
    const int nt = threads > 0 ? threads : omp_get_max_threads();
    const int64_t n_blocks = static_cast<int64_t>((count + kBlockDecays - 1) / kBlockDecays);
    uint64_t in_band = 0, crossed = 0, trues = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(+ : in_band, crossed, trues)
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
        const uint64_t begin = first + static_cast<uint64_t>(blk) * kBlockDecays;
        const uint64_t end = std::min(begin + kBlockDecays, first + count);
        for (uint64_t d = begin; d < end; ++d) {
            int64_t lor;
            const int outcome = simulate_decay<false>(P, d, &lor, nullptr);
            count_outcome(outcome, in_band, crossed, trues);
            if (outcome == kTrue && counts != nullptr) {
#pragma omp atomic update
                counts[lor] += weight;
            }
        }
    }
    Counters c;
    c.decays = count;
    c.in_band = in_band;
    c.crossed = crossed;
    c.trues = trues;
    return c;
}

std::vector<DecayRecord> trace_cpu(const Plan& plan, uint64_t seed, uint64_t first, uint64_t count) {
    require(first + count >= first, "first: the decay range overflows 2^64");
    const McParams P = host_params(plan, seed);
    std::vector<DecayRecord> out(count);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
        int64_t lor;
        simulate_decay<true>(P, first + static_cast<uint64_t>(i), &lor, &out[static_cast<size_t>(i)]);
    }
    return out;
}

}  // namespace dp::dualhead::mc
