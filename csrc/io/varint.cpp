// LEB128 varint coding of PETSIRD event lists: one pass over the bytes (NumPy needed about ten), split
// over threads for long lists.
#include "varint.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "../common/errors.hpp"

namespace dp::io {

namespace {

constexpr const char* kTooLong = "event list: a varint longer than 5 bytes (not a 32-bit value; corrupt file)";
constexpr const char* kTooWide = "event list: a detection bin or TOF index beyond 32 bits (corrupt file)";

VarintDecode decode_one_pass(const uint8_t* bytes, size_t length, size_t max_values, uint32_t* out) {
    size_t n = 0, pos = 0;
    while (n < max_values && pos < length) {
        uint64_t value = 0;
        size_t k = 0;
        bool complete = false;
        while (pos + k < length) {
            const uint8_t b = bytes[pos + k];
            if (k == 5) throw ValueError(kTooLong);
            value |= static_cast<uint64_t>(b & 0x7F) << (7 * k);
            ++k;
            if (b < 0x80) { complete = true; break; }
        }
        if (!complete) break;  // the rest is an unfinished varint: the caller reads more bytes
        if (value >> 32) throw ValueError(kTooWide);
        out[n++] = static_cast<uint32_t>(value);
        pos += k;
    }
    return {n, pos};
}

}  // namespace

VarintDecode decode_varints(const uint8_t* bytes, size_t length, size_t max_values, uint32_t* out, int threads,
                            size_t min_chunk_bytes) {
    const size_t want = static_cast<size_t>(threads > 0 ? threads : omp_get_max_threads());
    const size_t chunks = std::min(want, length / std::max<size_t>(min_chunk_bytes, 1));
    if (chunks < 2 || max_values == 0) return decode_one_pass(bytes, length, max_values, out);

    // 1. terminating bytes (top bit clear: the last byte of a varint) per chunk
    std::vector<size_t> begin(chunks + 1), first(chunks + 1, 0);
    for (size_t c = 0; c <= chunks; ++c) begin[c] = length / chunks * c + std::min(c, length % chunks);
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
    for (size_t c = 0; c < chunks; ++c) {
        first[c + 1] = count_terminators(bytes + begin[c], begin[c + 1] - begin[c]);
    }
    for (size_t c = 0; c < chunks; ++c) first[c + 1] += first[c];  // first[c]: index of chunk c's first value
    const size_t total = first[chunks], n = std::min(max_values, total);

    // 2. each chunk decodes the values that end in it (below n); the first fault per chunk is kept
    constexpr size_t kNone = std::numeric_limits<size_t>::max();
    std::vector<size_t> fault_at(chunks, kNone), after(chunks, 0);
    std::vector<const char*> fault_what(chunks, nullptr);
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
    for (size_t c = 0; c < chunks; ++c) {
        size_t i = first[c];
        const size_t stop = std::min(first[c + 1], n);
        if (i >= stop) continue;
        size_t s = begin[c];
        while (s > 0 && bytes[s - 1] >= 0x80) --s;  // value i starts after the previous terminator
        for (size_t p = begin[c]; i < stop; ++p) {
            if (bytes[p] >= 0x80) continue;
            const size_t len = p - s + 1;
            if (len > 5) {
                fault_at[c] = i, fault_what[c] = kTooLong;
                break;
            }
            uint64_t value = 0;
            for (size_t k = 0; k < len; ++k) value |= static_cast<uint64_t>(bytes[s + k] & 0x7F) << (7 * k);
            if (value >> 32) {
                fault_at[c] = i, fault_what[c] = kTooWide;
                break;
            }
            out[i++] = static_cast<uint32_t>(value);
            s = p + 1;
        }
        after[c] = s;
    }
    // the first fault in list order is the one a one-pass reader meets
    for (size_t c = 0; c < chunks; ++c)
        if (fault_at[c] != kNone) throw ValueError(fault_what[c]);
    size_t consumed = 0;
    for (size_t c = 0; c < chunks; ++c)
        if (first[c] < n && n <= first[c + 1]) consumed = after[c];
    // every value decoded and max_values not reached: the rest is an unfinished varint, or too long for one
    if (n < max_values && length - consumed > 5) throw ValueError(kTooLong);
    return {n, consumed};
}

size_t count_terminators(const uint8_t* bytes, size_t n) {
    size_t count = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, bytes + i, 8);
        count += static_cast<size_t>(__builtin_popcountll(~w & 0x8080808080808080ull));
    }
    for (; i < n; ++i) count += bytes[i] < 0x80;
    return count;
}

static inline size_t length_of(uint32_t v) {
    return 1 + (v >= (1u << 7)) + (v >= (1u << 14)) + (v >= (1u << 21)) + (v >= (1u << 28));
}

size_t varint_bytes(const uint32_t* values, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += length_of(values[i]);
    return total;
}

void encode_varints(const uint32_t* values, size_t n, uint8_t* out) {
    for (size_t i = 0; i < n; ++i) {
        uint32_t v = values[i];
        while (v >= 0x80) {
            *out++ = static_cast<uint8_t>((v & 0x7F) | 0x80);
            v >>= 7;
        }
        *out++ = static_cast<uint8_t>(v);
    }
}

}  // namespace dp::io
