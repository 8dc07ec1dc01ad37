// Wave quantisation of kernel launches (host arithmetic, no CUDA): a grid of B blocks on a GPU that
// holds S of them at once runs in ceil(B / S) waves, and a partly filled last wave costs about as long
// as a full one. Used to size launches: the DIRECT slab kernel's row split (direct/cuda_slab.cu) and
// the FIRST kernels' angles per launch (first/cuda_fast.cu, first/cuda_internal.cuh).
#pragma once

#include <algorithm>
#include <limits>

namespace dp::waves {

// Waves of a grid of `blocks` blocks with `slots` resident blocks (at least 1).
inline long long count(long long blocks, long long slots) {
    slots = std::max(1LL, slots);
    return (blocks + slots - 1) / slots;
}

// Fraction of the resident block slots a grid of `blocks` keeps busy over its waves.
inline double efficiency(long long blocks, long long slots) {
    slots = std::max(1LL, slots);
    return static_cast<double>(blocks) / static_cast<double>(count(blocks, slots) * slots);
}

// Number of launches of an even split (sizes differ by at most one) of n items, at most `max_size` a launch.
inline int even_launches(int n, int max_size) { return (n + max_size - 1) / max_size; }

// Size of launch l (0-based) of the even split of n items over `launches` launches.
inline int even_launch_size(int n, int launches, int l) { return n / launches + (l < n % launches ? 1 : 0); }

// The most items per launch (at most max_size) for n items of a kernel of blocks_per_item blocks each,
// chosen so that the even split's launches take the fewest waves in all (ties: fewer launches). E.g. the
// FIRST fast forward, 27 blocks per angle on 396 slots, 130 angles: 32 a launch gives 5 launches of
// 26 angles (2 waves each, 10 in all); 44 gives 3 launches of 44, 43, 43 (3 waves each, 9 in all).
// Only launch counts that an even split by max size reproduces are considered (even_launches of the
// returned size gives the count chosen).
inline int wave_balanced_launch_size(int n, int max_size, long long blocks_per_item, long long slots) {
    if (n <= 0 || max_size <= 0) return std::max(1, max_size);
    long long best_waves = std::numeric_limits<long long>::max();
    int best_size = std::min(n, max_size);
    for (int launches = even_launches(n, max_size); launches <= n; ++launches) {
        if (launches >= best_waves) break;   // every launch takes at least one wave
        const int size = (n + launches - 1) / launches;
        if (even_launches(n, size) != launches) continue;
        long long waves = 0;
        for (int l = 0; l < launches && waves < best_waves; ++l)
            waves += count(static_cast<long long>(even_launch_size(n, launches, l)) * blocks_per_item, slots);
        if (waves < best_waves) best_waves = waves, best_size = size;
    }
    return best_size;
}

}  // namespace dp::waves
