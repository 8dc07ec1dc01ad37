"""Whether two directpet builds compute bitwise the same DIRECT CUDA projections (for kernel changes
that should move no arithmetic, e.g. a different staging of the same sums; issue 17).

    PYTHONPATH=BUILD_A python scripts/direct_builds_bitwise.py save A.npz
    PYTHONPATH=BUILD_B python scripts/direct_builds_bitwise.py save B.npz
    python scripts/direct_builds_bitwise.py cmp A.npz B.npz        # exit status 1 when any array differs

``save`` runs the clinical and stress kernels at the benchmark size (144 x 144 x 48, 4 mm) and the clinical
kernel on an odd 37 x 40 x 48 grid (split kernel rows), three views each, with the methods default,
slab_table and slab_r16, forward and adjoint, on random inputs from a fixed seed; it prints the launch
each method chose (``slab_launch``), when the build reports it. The LUTs come from the CPU backend.
"""

import sys

import numpy as np

CASES = (("clinical", (48, 144, 144)), ("stress", (48, 144, 144)), ("clinical_odd", (37, 40, 48)))
VIEWS_DEG = ((31.5, 6.67), (0.0, 0.0), (97.0, -10.0))
METHODS = ("default", "slab_table", "slab_r16")


def compare(a_path: str, b_path: str) -> int:
    a, b = np.load(a_path), np.load(b_path)
    if sorted(a.files) != sorted(b.files):
        print("the files hold different arrays:", sorted(set(a.files) ^ set(b.files)))
        return 1
    differ = 0
    for key in sorted(a.files):
        same = np.array_equal(a[key], b[key])
        rel = float(np.max(np.abs(a[key] - b[key])) / max(float(np.max(np.abs(a[key]))), 1e-30))
        print(f"{key:28s} bitwise={same} max_rel={rel:.2e}")
        differ += not same
    print(f"{differ} of {len(a.files)} arrays differ")
    return 1 if differ else 0


def save(path: str) -> None:
    import directpet as dp
    from directpet.direct import HistoImageProjector, SRKernel, View

    print("directpet", dp.__version__, dp.__file__)
    rng = np.random.default_rng(7)
    arrays = {}
    for name, shape in CASES:
        grid = dp.ImageGrid(shape, 4.0)
        kernel = SRKernel.stress() if name == "stress" else SRKernel.clinical()
        views = [View.from_degrees(a, b) for a, b in VIEWS_DEG]
        cpu = HistoImageProjector(grid, views, kernel, backend="cpu")
        luts = {v: cpu.lut(v) for v in range(len(views))}
        x = rng.random(grid.shape, dtype=np.float32)
        for method in METHODS:
            op = HistoImageProjector(grid, views, kernel, backend="cuda", method=method, luts=luts)
            y = np.asarray(op.forward(x))
            arrays[f"{name}/{method}/fp"] = y
            arrays[f"{name}/{method}/bp"] = np.asarray(op.adjoint(y + np.float32(0.5)))
            lut = op._engine.device_lut(0)
            if hasattr(lut, "slab_launch"):
                print(name, method, "fp", lut.slab_launch(True, method), "bp", lut.slab_launch(False, method))
    np.savez(path, **arrays)
    print("saved", len(arrays), "arrays to", path)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "cmp":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "save":
        save(sys.argv[2])
    else:
        sys.exit(__doc__)
