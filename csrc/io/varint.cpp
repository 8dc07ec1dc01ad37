// LEB128 varint coding of PETSIRD event lists: one pass over the bytes (NumPy needed about ten).
#include "varint.hpp"

#include "../common/errors.hpp"

namespace dp::io {

VarintDecode decode_varints(const uint8_t* bytes, size_t length, size_t max_values, uint32_t* out) {
    size_t n = 0, pos = 0;
    while (n < max_values && pos < length) {
        uint64_t value = 0;
        size_t k = 0;
        bool complete = false;
        while (pos + k < length) {
            const uint8_t b = bytes[pos + k];
            if (k == 5) throw ValueError("event list: a varint longer than 5 bytes (not a 32-bit value; corrupt file)");
            value |= static_cast<uint64_t>(b & 0x7F) << (7 * k);
            ++k;
            if (b < 0x80) { complete = true; break; }
        }
        if (!complete) break;  // the rest is an unfinished varint: the caller reads more bytes
        if (value >> 32) throw ValueError("event list: a detection bin or TOF index beyond 32 bits (corrupt file)");
        out[n++] = static_cast<uint32_t>(value);
        pos += k;
    }
    return {n, pos};
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
