// A varint-coded event list read from a file in record-aligned chunks (varint_file.hpp).
#include "varint_file.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/errors.hpp"
#include "varint.hpp"

namespace dp::io {

namespace {

// The file is read in pieces of about this size, each counted right after it is read (while it is in
// the cache of the thread that read it).
constexpr size_t kPieceBytes = size_t(1) << 20;

// pread until `length` bytes are read or the file ends; returns the bytes read, -errno on an error.
int64_t read_fully(int fd, uint8_t* out, size_t length, int64_t offset) {
    size_t got = 0;
    while (got < length) {
        const ssize_t r = ::pread(fd, out + got, length - got, static_cast<off_t>(offset + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -static_cast<int64_t>(errno);
        }
        if (r == 0) break;  // end of file
        got += static_cast<size_t>(r);
    }
    return static_cast<int64_t>(got);
}

}  // namespace

VarintListReader::VarintListReader(int fd, int64_t offset, uint64_t n_records, unsigned record_values)
    : fd_(fd), offset_(offset), values_left_(n_records * record_values), record_values_(record_values) {
    require(fd >= 0, "fd: expected an open file descriptor");
    require(offset >= 0, "offset: expected a byte offset >= 0");
    require(record_values >= 1, "record_values: expected at least one varint per record");
}

ListChunk VarintListReader::next(uint8_t* buffer, size_t capacity, int threads) {
    if (values_left_ == 0) return {};
    require(capacity >= min_capacity(), "capacity: a chunk buffer must hold at least one record");
    // No more bytes than the rest of the list can occupy (5 per varint): never far past its end.
    const uint64_t most = values_left_ > capacity / 5 ? capacity : values_left_ * 5;
    const size_t length = static_cast<size_t>(most);
    const int want = threads > 0 ? threads : omp_get_max_threads();
    const size_t n_pieces = std::max<size_t>(1, length / kPieceBytes);
    std::vector<size_t> begin(n_pieces + 1), count(n_pieces, 0);
    std::vector<int64_t> got(n_pieces, 0);
    for (size_t p = 0; p <= n_pieces; ++p) begin[p] = length / n_pieces * p + std::min(p, length % n_pieces);
    // a thread reads a piece and counts its terminators while the bytes are in its cache
    const int team = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(want, 1)), n_pieces));
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
    for (size_t p = 0; p < n_pieces; ++p) {
        got[p] = read_fully(fd_, buffer + begin[p], begin[p + 1] - begin[p], offset_ + static_cast<int64_t>(begin[p]));
        if (got[p] > 0) count[p] = count_terminators(buffer + begin[p], static_cast<size_t>(got[p]));
    }
    // the bytes read are contiguous up to the first short piece (the end of the file)
    size_t valid_pieces = 0, terminators = 0;
    bool at_end = false;
    for (size_t p = 0; p < n_pieces; ++p) {
        if (got[p] < 0)
            throw std::runtime_error("reading the event list failed: " + std::string(std::strerror(-got[p])));
        terminators += count[p];
        ++valid_pieces;
        if (static_cast<size_t>(got[p]) < begin[p + 1] - begin[p]) {
            at_end = true;
            break;
        }
    }
    const uint64_t whole = terminators / record_values_ * record_values_;
    const uint64_t take = std::min<uint64_t>(values_left_, whole);
    if (take == 0) {
        if (at_end) return {};  // the file ends inside the list: the caller reports a truncated file
        throw ValueError("event list: a varint longer than 5 bytes (not a 32-bit value; corrupt file)");
    }
    // the byte ending value number `take`: whole pieces, then eight bytes at a time, then bytewise
    size_t seen = 0, p = 0;
    while (p + 1 < valid_pieces && seen + count[p] < take) seen += count[p++];
    size_t pos = begin[p];
    const size_t piece_end = begin[p] + static_cast<size_t>(got[p]);
    for (; pos + 8 <= piece_end; pos += 8) {
        const size_t c = count_terminators(buffer + pos, 8);
        if (seen + c >= take) break;
        seen += c;
    }
    for (;; ++pos) {
        if (buffer[pos] < 0x80 && ++seen == take) break;
    }
    const ListChunk chunk{pos + 1, static_cast<size_t>(take)};
    offset_ += static_cast<int64_t>(chunk.bytes);
    values_left_ -= take;
    return chunk;
}

}  // namespace dp::io
