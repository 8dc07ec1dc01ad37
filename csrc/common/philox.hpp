// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
// generator behind curand's Philox and Random123): a counter-based generator, 4 x 32 random bits
// per (counter, key). The CPU simulation uses it because it is a pure function of the counter:
// a batch of decays draws its bits in one SIMD loop, which std::mt19937_64's sequential state
// cannot do (it was half of the CPU time once the rest was vectorised). Checked against the
// Random123 known-answer vectors in tests/test_sim_random.py.
#pragma once

#include <cstdint>

#include "hd.hpp"

namespace dp::random {

struct Philox4 {
    uint32_t x, y, z, w;  // named, not an array: array members kept the batch loop from vectorising
};

DP_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
    const uint64_t p = static_cast<uint64_t>(a) * b;
    *hi = static_cast<uint32_t>(p >> 32);
    return static_cast<uint32_t>(p);
}

// Ten rounds with the key bumped by the Weyl constants between rounds.
DP_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; ++r) {
        uint32_t hi0, hi1;
        const uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
        const uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
        const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return {c0, c1, c2, c3};
}

}  // namespace dp::random
