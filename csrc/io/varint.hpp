// LEB128 unsigned varints (yardl's binary encoding, used by PETSIRD's event lists), 32-bit values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dp::io {

struct VarintDecode {
    size_t values;  // complete varints decoded
    size_t bytes;   // bytes they occupy (the rest of the input is an unfinished varint)
};

// Decode at most max_values varints from bytes[0, length) into out, stopping after the last complete
// one. Throws dp::ValueError on a varint longer than 5 bytes or a value beyond 32 bits.
VarintDecode decode_varints(const uint8_t* bytes, size_t length, size_t max_values, uint32_t* out);

// Number of bytes encode_varints writes for values[0, n).
size_t varint_bytes(const uint32_t* values, size_t n);

// Encode values[0, n) into out (varint_bytes(values, n) bytes).
void encode_varints(const uint32_t* values, size_t n, uint8_t* out);

}  // namespace dp::io
