"""scripts/sass_loops.py, the host-side count of a kernel's loops in its SASS: the parser on a listing
written here in nvdisasm's format (loops, their nesting and counts), and, where nvcc and nvdisasm are
both installed, the whole path on a small kernel compiled here."""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "sass_loops.py"


def _module():
    if "sass_loops" not in sys.modules:   # registered first: its dataclasses look their module up
        spec = importlib.util.spec_from_file_location("sass_loops", SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["sass_loops"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["sass_loops"]


# Two kernels: k1 with an outer loop (labels) holding an inner loop (an absolute branch target) and a
# forward branch that is not a loop; k2 without loops.
LISTING = """
//--------------------- .text._Z2k1Pf --------------------------
	.section	.text._Z2k1Pf,"ax",@progbits
.text._Z2k1Pf:
        .type           _Z2k1Pf,@function
_Z2k1Pf:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   LDGSTS.E [R2+0x100], desc[UR4][R4.64] ;
        /*0020*/              @!PT LDS RZ, [RZ] ;
        /*0030*/                   LDS.128 R8, [R3] ;
        /*0040*/                   FFMA R10, R8, R9, R10 ;
        /*0050*/                   FFMA R11, R8, R9, R11 ;
        /*0060*/                   ISETP.GE.AND P1, PT, R5, R6, PT ;
        /*0070*/              @P1 BRA 0x40 ;
        /*0080*/              @!P0 BRA `(.L_x_1) ;
        /*0090*/                   STS [R3], R10 ;
.L_x_1:
        /*00a0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00b0*/              @P2 BRA `(.L_x_0) ;
        /*00c0*/                   EXIT ;
//--------------------- .text._Z2k2v --------------------------
.text._Z2k2v:
_Z2k2v:
        /*0000*/                   EXIT ;
"""


def test_opcode_drops_predicates_and_modifiers():
    m = _module()
    assert m.opcode("@!P1 LDS.128 R4, [R2]") == "LDS"
    assert m.opcode("FFMA R1, R2, R3, R4") == "FFMA"
    assert m.opcode("@!PT LDS RZ, [RZ]") == "LDS"
    assert m.opcode("") == ""


def test_loops_nesting_and_counts_of_a_listing():
    m = _module()
    kernels = m.parse_sass(LISTING)
    assert list(kernels) == ["_Z2k1Pf", "_Z2k2v"]
    instructions, loops = m.find_loops(kernels["_Z2k1Pf"])
    assert len(instructions) == 13 and instructions[0].startswith("LDC")
    # the outer loop (label .L_x_0 -> index 1, branch at 11) and the inner one (0x40 -> index 4, branch at 7);
    # the forward branch to .L_x_1 is not a loop
    assert [(lp.start, lp.end, lp.depth) for lp in loops] == [(1, 11, 0), (4, 7, 1)]
    outer, inner = loops
    assert outer.length == 11 and inner.length == 4
    assert outer.ops == {"LDGSTS": 1, "LDS": 2, "STS": 1, "LDG": 0, "FFMA": 2, "BAR": 1}
    assert inner.ops["FFMA"] == 2 and inner.ops["LDS"] == 0 and inner.ops["LDGSTS"] == 0
    text = m.report(m.Kernel("_Z2k1Pf", instructions, loops, registers=32), min_length=1)
    assert text.splitlines()[0] == "_Z2k1Pf: 13 instructions, 32 registers"
    assert "  loop 1..11: 11 instructions (LDGSTS 1, LDS 2, STS 1, FFMA 2, BAR 1)" in text
    assert "    loop 4..7: 4 instructions (FFMA 2)" in text          # nested: indented once more
    assert m.find_loops(kernels["_Z2k2v"]) == (["EXIT"], [])


def test_a_missing_source_is_named(capsys):
    m = _module()
    with pytest.raises(SystemExit, match="no such file"):
        m.main(["does/not/exist.cu"])


def _nvdisasm_or_none():
    m = _module()
    try:
        return m.find_nvdisasm()
    except SystemExit:
        return None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed (the tool compiles with it)")
def test_a_kernel_compiled_here_shows_its_loop(tmp_path, capsys):
    nvdisasm = _nvdisasm_or_none()
    if nvdisasm is None:
        pytest.skip("nvdisasm not found (pip install nvidia-cuda-nvdisasm, or a full CUDA toolkit)")
    src = tmp_path / "saxpy_loop.cu"
    src.write_text(
        "__global__ void saxpy_loop(float* y, const float* x, float a, int n) {\n"
        "    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = fmaf(a, x[i], y[i]);\n"
        "}\n")
    m = _module()
    assert m.main([str(src), "--kernel", "saxpy_loop", "--min-length", "1", "--nvdisasm", nvdisasm]) == 0
    out = capsys.readouterr().out
    assert out.startswith("_Z10saxpy_loopPfPKffi: ") and " registers" in out
    assert "loop " in out and "FFMA" in out and "LDG" in out
