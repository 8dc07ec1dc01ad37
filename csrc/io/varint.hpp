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
// one. Throws dp::ValueError on a varint longer than 5 bytes or a value beyond 32 bits (the first one in
// the list, as a one-pass reader would meet it).
//
// Multi-threaded (OpenMP; threads <= 0: all) once the input holds at least two chunks of
// min_chunk_bytes: each thread counts the terminating bytes (top bit clear) of its chunk, a prefix
// sum over the chunks gives every chunk the index of its first value, and each thread then decodes
// the values that end in its chunk, starting after the terminator before its chunk. The result, the
// bytes consumed and the error thrown are those of the one-pass decoder.
VarintDecode decode_varints(const uint8_t* bytes, size_t length, size_t max_values, uint32_t* out, int threads = 0,
                            size_t min_chunk_bytes = size_t(1) << 16);

// Terminating bytes (top bit clear: the last byte of each varint) in bytes[0, n), eight at a time: the
// number of varints that end there.
size_t count_terminators(const uint8_t* bytes, size_t n);

// Number of bytes encode_varints writes for values[0, n).
size_t varint_bytes(const uint32_t* values, size_t n);

// Encode values[0, n) into out (varint_bytes(values, n) bytes).
void encode_varints(const uint32_t* values, size_t n, uint8_t* out);

}  // namespace dp::io
