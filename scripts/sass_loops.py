"""The loops of a CUDA kernel's SASS, counted on the host: no GPU needed (issue 17's kernel work).

Compiles a CUDA source to a cubin for one architecture with the extension's flags (``-O3 -lineinfo``,
C++17, ``-Icsrc``), disassembles it with ``nvdisasm`` and prints, for every kernel whose mangled name
matches a pattern, its registers (ptxas), its length and each loop (a backward branch and the
instructions from its target to it): the loop's length, its nesting depth and how many of its
instructions are global-to-shared copies, shared loads and stores, global loads and FMAs. A loop's
length is the instructions one trip through it can issue at most; where its body branches, the
printed lines name the inner loops and the counts let one read the hot path off the listing
(``--listing``).

    python scripts/sass_loops.py csrc/dualhead/cuda_default.cu --kernel fwd_default_kernelILb1
    python scripts/sass_loops.py build/x.cubin --kernel back_default --listing 1631:1820

Nsight Compute (scripts/kernel_profile.sh on the device) says how often each instruction runs and where
the warps stall; this tool says what one trip through a loop costs before a device call, so a change
to a kernel's inner loops can be judged from its SASS on a machine without a GPU. The SASS is that of
this machine's nvcc, which may differ from the device's when their CUDA versions differ.

nvdisasm is taken from --nvdisasm, $NVDISASM, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, or NVIDIA's
``nvidia-cuda-nvdisasm`` wheel (``pip install nvidia-cuda-nvdisasm``), in that order.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the operations counted per loop (the opcode before its first '.')
COUNTED = ("LDGSTS", "LDS", "STS", "LDG", "FFMA", "BAR")

_FUNCTION = re.compile(r"^\s*\.text\.(\S+):\s*$")
_LABEL = re.compile(r"^\s*(\.L_\w+):")
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\b(?:BRA|BRX)\b(?:\.\w+)*\s+(?:`\((\.L_\w+)\)|(0x[0-9a-f]+))")


@dataclass
class Loop:
    start: int                        # index of the branch target (the loop's first instruction)
    end: int                          # index of the backward branch
    ops: Dict[str, int] = field(default_factory=dict)
    depth: int = 0                    # loops that enclose this one

    @property
    def length(self) -> int:
        return self.end - self.start + 1


@dataclass
class Kernel:
    name: str
    instructions: List[str]
    loops: List[Loop]
    registers: Optional[int] = None


def opcode(instruction: str) -> str:
    """The opcode of one SASS instruction without its predicate and modifiers ('@!P1 LDS.128 R4, [R2]' -> 'LDS')."""
    words = instruction.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def parse_sass(text: str) -> Dict[str, list]:
    """nvdisasm's listing -> {mangled kernel name: its lines in order}: a label as its name (``.L_x_3``),
    an instruction as (address, text)."""
    kernels: Dict[str, list] = {}
    name = None
    for line in text.splitlines():
        m = _FUNCTION.match(line)
        if m:
            name = m.group(1)
            kernels[name] = []
            continue
        if name is None:
            continue
        m = _LABEL.match(line)
        if m:
            kernels[name].append(m.group(1))
            continue
        m = _INSTRUCTION.search(line)
        if m:
            kernels[name].append((int(m.group(1), 16), m.group(2)))
    return kernels


def find_loops(lines: list) -> tuple:
    """(instructions, loops) of one kernel's parsed lines: a loop per backward branch, from the target
    to the branch (indices into the instruction list), with its nesting depth and counted operations.
    A label names the index of the instruction after it."""
    instructions, label_at, address_at = [], {}, {}
    for line in lines:
        if isinstance(line, str):
            label_at[line] = len(instructions)
            continue
        address_at[line[0]] = len(instructions)
        instructions.append(line[1])
    loops = []
    for i, ins in enumerate(instructions):
        m = _BRANCH.search(ins)
        if not m:
            continue
        target = label_at.get(m.group(1)) if m.group(1) else address_at.get(int(m.group(2), 16))
        if target is not None and target <= i:
            counts = collections.Counter(opcode(x) for x in instructions[target:i + 1])
            loops.append(Loop(target, i, {op: counts.get(op, 0) for op in COUNTED}))
    for loop in loops:
        loop.depth = sum(1 for o in loops if o is not loop and o.start <= loop.start and loop.end <= o.end
                         and (o.start, o.end) != (loop.start, loop.end))
    return instructions, sorted(loops, key=lambda lp: (lp.start, -lp.end))


def find_nvdisasm(explicit: Optional[str] = None) -> str:
    candidates = [explicit, os.environ.get("NVDISASM"), shutil.which("nvdisasm")]
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "nvdisasm"))
    try:   # NVIDIA's wheel puts it under the namespace package nvidia/cu*/bin
        import nvidia
        for base in nvidia.__path__:
            candidates += sorted(glob.glob(os.path.join(base, "cu*", "bin", "nvdisasm")), reverse=True)
            candidates.append(os.path.join(base, "cuda_nvdisasm", "bin", "nvdisasm"))
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise SystemExit("sass_loops: nvdisasm not found (pass --nvdisasm, set NVDISASM, or "
                     "pip install nvidia-cuda-nvdisasm)")


def compile_cubin(source: str, arch: str, out: str) -> Dict[str, int]:
    """nvcc source -> out (a cubin); returns ptxas's register count per mangled kernel name."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    cmd = [nvcc, "-std=c++17", "-O3", "-lineinfo", f"-arch={arch}", "-cubin", "-I", os.path.join(ROOT, "csrc"),
           "-Xptxas", "-v", source, "-o", out]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"sass_loops: nvcc failed:\n{run.stderr}")
    registers, current = {}, None
    for line in run.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            registers[current] = int(m.group(1))
    return registers


def kernels_of(path: str, arch: str, nvdisasm: str) -> List[Kernel]:
    with tempfile.TemporaryDirectory() as tmp:
        registers = {}
        cubin = path
        if not path.endswith(".cubin"):
            cubin = os.path.join(tmp, "kernels.cubin")
            registers = compile_cubin(path, arch, cubin)
        run = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"sass_loops: nvdisasm failed:\n{run.stderr}")
    out = []
    for name, lines in parse_sass(run.stdout).items():
        instructions, loops = find_loops(lines)
        out.append(Kernel(name, instructions, loops, registers.get(name)))
    return out


def report(kernel: Kernel, min_length: int = 1) -> str:
    rows = [f"{kernel.name}: {len(kernel.instructions)} instructions"
            + (f", {kernel.registers} registers" if kernel.registers is not None else "")]
    for lp in kernel.loops:
        if lp.length < min_length:
            continue
        ops = ", ".join(f"{op} {n}" for op, n in lp.ops.items() if n)
        rows.append(f"  {'  ' * lp.depth}loop {lp.start}..{lp.end}: {lp.length} instructions" + (f" ({ops})" if ops else ""))
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a CUDA source (compiled here) or a .cubin")
    ap.add_argument("--kernel", default="", help="a regular expression on the mangled kernel names (default: all)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvdisasm", default=None)
    ap.add_argument("--min-length", type=int, default=8, help="leave out loops shorter than this (default 8)")
    ap.add_argument("--listing", default=None, metavar="A:B", help="also print instructions A..B of each kernel")
    args = ap.parse_args(argv)
    if not os.path.exists(args.path):
        raise SystemExit(f"sass_loops: path: no such file: {args.path}")
    nvdisasm = find_nvdisasm(args.nvdisasm)
    pattern = re.compile(args.kernel)
    for kernel in kernels_of(args.path, args.arch, nvdisasm):
        if not pattern.search(kernel.name):
            continue
        print(report(kernel, args.min_length))
        if args.listing:
            a, b = (int(v) for v in args.listing.split(":"))
            for i in range(max(a, 0), min(b, len(kernel.instructions) - 1) + 1):
                print(f"    {i:5d}  {kernel.instructions[i]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
