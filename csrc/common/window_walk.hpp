// The flattened walk that a block's threads use to copy a rows x cols window into shared memory: the
// dual-head forward's image window. (The dual-head back projection, a warp per window of a few dozen
// columns, copies row by row with a lane per column instead: cuda_default.cu. The FIRST fast forward
// keeps a copy of the same walk that derives its offsets instead of carrying them: one register fewer,
// which that kernel's register budget needs.)
//
// Thread tid takes the elements tid, tid + kThreads, tid + 2 kThreads, ... of the row-major window,
// and carries its (row, col) and both offsets -- source (row * src_pitch + col) and destination
// (row * dst_pitch + col) -- incrementally from one element to the next: no integer division or
// multiply per element, and every thread busy on every copy. (A row-by-row walk left lanes idle at
// each row end and cost ~40 instructions of address arithmetic per row: half of the dual-head
// forward's instructions in the profile of 29f2428, benchmarks/RESULTS.md section 14c.)
//
// visit(row, col, src_offset, dst_offset) is called once per element; offsets are in elements of the
// caller's unit (floats, float4s). Callers that do not use row or col leave them to the compiler.
#pragma once

#include "hd.hpp"

namespace dp {

template <int kThreads, typename Visit>
DP_HD void for_each_window_cell(int tid, int rows, int cols, int src_pitch, int dst_pitch, Visit&& visit) {
    const int n = rows * cols;
    // one step of kThreads elements moves drow rows and dcol columns (then one more row on a wrap)
    const int drow = kThreads / cols, dcol = kThreads - drow * cols;
    const int src_step = drow * src_pitch + dcol, dst_step = drow * dst_pitch + dcol;
    int row = tid / cols, col = tid - row * cols;
    int src_off = row * src_pitch + col, dst_off = row * dst_pitch + col;
    for (int e = tid; e < n; e += kThreads) {
        visit(row, col, src_off, dst_off);
        row += drow;
        col += dcol;
        src_off += src_step;
        dst_off += dst_step;
        if (col >= cols) {
            col -= cols;
            ++row;
            src_off += src_pitch - cols;
            dst_off += dst_pitch - cols;
        }
    }
}

}  // namespace dp
