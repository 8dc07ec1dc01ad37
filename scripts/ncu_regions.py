"""Where a kernel's executed instructions and stall samples go, by region of its SASS (issue 17).

Reads the source page that ``scripts/kernel_profile.sh`` writes (``NAME_source.csv``: Nsight Compute's
per-SASS-instruction counters of one launch), splits the SASS into basic blocks (a block starts at a
branch target and after a branch or exit) and sums each block's executed warp instructions and stall
samples into one of these regions:

* ``fma``: blocks with at least ``--fma-block`` FFMAs (the inner loops of a stencil or gather kernel);
* ``copy``: blocks that issue asynchronous global-to-shared copies (LDGSTS: staging);
* ``sync``: blocks with a barrier or a wait on copies (BAR, DEPBAR);
* ``other``: the rest (set-up, loop control, prologues and epilogues of the inner loops, stores).

It prints, per region, the share of executed instructions and of stall samples, the FFMAs and the
instructions per FFMA, so that the work outside a kernel's inner loops is a measured number rather than an
estimate. Several CSVs may be given (one launch each).

    python scripts/ncu_regions.py OUT/clinical_fp_source.csv [more.csv ...] [--fma-block 8] [--json FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys


def _column(header, *needles):
    for i, h in enumerate(header):
        if all(n.lower() in h.lower() for n in needles):
            return i
    return None


def read_source_page(path):
    """[(address, sass text, executed, stall samples)] of one source-page CSV."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    start = next(i for i, r in enumerate(rows) if r and _column(r, "Address") is not None and _column(r, "Source") is not None)
    header = rows[start]
    a, s = _column(header, "Address"), _column(header, "Source")
    e = _column(header, "Warp", "Instructions Executed")
    if e is None:
        e = _column(header, "Instructions Executed")
    st = _column(header, "Warp Stall Sampling", "All")
    if e is None or st is None:
        raise SystemExit(f"{path}: no executed-instructions / stall-samples column in {header}")

    def num(x):
        x = x.replace(",", "").strip()
        return float(x) if x else 0.0

    out = []
    for r in rows[start + 1:]:
        if len(r) <= max(a, s, e, st) or not r[a].strip():
            continue
        try:
            addr = int(r[a], 16)
        except ValueError:
            continue
        out.append((addr, r[s].strip(), num(r[e]), num(r[st])))
    return out


def opcode(text):
    t = re.sub(r"^@!?U?P\w+\s+", "", text)
    return t.split()[0].split(".")[0] if t else ""


def regions(instrs, fma_block):
    """Sum the instructions into regions by basic block."""
    targets = set()
    for _, t, _, _ in instrs:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", t)
        if m:
            targets.add(int(m.group(1), 16))
    blocks, cur = [], []
    for ins in instrs:
        if cur and ins[0] in targets:
            blocks.append(cur)
            cur = []
        cur.append(ins)
        if opcode(ins[1]) in ("BRA", "EXIT", "RET", "BRX", "JMP"):
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    sums = {k: {"executed": 0.0, "stalls": 0.0, "ffma": 0.0, "lds": 0.0} for k in ("fma", "copy", "sync", "other")}
    for b in blocks:
        ops = [opcode(t) for _, t, _, _ in b]
        if ops.count("FFMA") >= fma_block:
            kind = "fma"
        elif "LDGSTS" in ops:
            kind = "copy"
        elif "BAR" in ops or "DEPBAR" in ops:
            kind = "sync"
        else:
            kind = "other"
        for (_, t, ex, st), op in zip(b, ops):
            sums[kind]["executed"] += ex
            sums[kind]["stalls"] += st
            if op == "FFMA":
                sums[kind]["ffma"] += ex
            if op == "LDS":
                sums[kind]["lds"] += ex
    return sums


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--fma-block", type=int, default=8, help="FFMAs that make a basic block an inner-loop block")
    ap.add_argument("--json", help="also write the sums here")
    args = ap.parse_args()
    report = {}
    for path in args.csv:
        sums = regions(read_source_page(path), args.fma_block)
        tot_e = sum(v["executed"] for v in sums.values()) or 1.0
        tot_s = sum(v["stalls"] for v in sums.values()) or 1.0
        tot_f = sum(v["ffma"] for v in sums.values()) or 1.0
        print(f"{path}: {tot_e:.4g} warp instructions, {tot_f:.4g} FFMA ({tot_e / tot_f:.2f} per FFMA)")
        print(f"  {'region':<6} {'instr %':>8} {'stalls %':>9} {'FFMA %':>7} {'LDS':>10} {'instr/FFMA':>11}")
        for k, v in sums.items():
            per = v["executed"] / v["ffma"] if v["ffma"] else float("nan")
            print(f"  {k:<6} {100 * v['executed'] / tot_e:8.1f} {100 * v['stalls'] / tot_s:9.1f} "
                  f"{100 * v['ffma'] / tot_f:7.1f} {v['lds']:10.4g} {per:11.2f}")
        report[path] = sums
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
