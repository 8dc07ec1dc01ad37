// Reading one varint-coded event list (a PETSIRD coincidence list) straight from a file descriptor, in
// chunks that end on a record boundary, so that a decoder -- the CPU's (varint.hpp) or the GPU's -- gets
// whole records and the file is read once, in bounded memory, whatever the list's length.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dp::io {

struct ListChunk {
    size_t bytes = 0;   // bytes of the chunk in the buffer (whole varints of whole records)
    size_t values = 0;  // varints in them (a multiple of the record length)
};

class VarintListReader {
public:
    // The list: n_records records of record_values varints each, starting at byte `offset` of `fd`.
    VarintListReader(int fd, int64_t offset, uint64_t n_records, unsigned record_values);

    // Reads the next chunk into buffer[0, capacity) with `threads` OpenMP threads (<= 0: all): the file
    // is read (pread) and its terminating bytes (top bit clear) counted in parallel pieces, and the
    // chunk ends after the last whole record that fits (or the list's last). Returns an empty chunk
    // when the list is done or the file ends (then done() is false: a truncated list). Throws
    // dp::ValueError when capacity holds no whole record although the file goes on (a varint longer
    // than 5 bytes: a corrupt list), std::runtime_error on a read error.
    ListChunk next(uint8_t* buffer, size_t capacity, int threads = 0);

    bool done() const { return values_left_ == 0; }
    uint64_t values_left() const { return values_left_; }
    int64_t offset() const { return offset_; }  // the byte after what next() has returned so far

    // The smallest capacity next() accepts: one record of varints of at most 5 bytes.
    size_t min_capacity() const { return 5u * record_values_; }

private:
    int fd_;
    int64_t offset_;
    uint64_t values_left_;
    unsigned record_values_;
};

}  // namespace dp::io
