"""cuFFT probe for the low-rank FFT path at 2 mm (issue 17): what the transforms of one projection cost
in the current layout (batched 3D R2C / C2R of the padded grid) against a z-first layout (one R2C along
z of the image's columns, then 2D C2C transforms of the (My, Mx) planes of the Mz/2+1 z-frequencies),
for a few padded z lengths. CuPy's cuFFT plans, CUDA events, median of 7, random inputs (out of place,
so that repeated transforms do not grow the input). The z R2C goes through CuPy along axis 0, which
may copy: an upper bound for the engine's strided plan.

    python benchmarks/fft_layouts.py [--out FILE]
"""

from __future__ import annotations

import argparse
import os

from _common import gpu_name, print_table, stamp, time_device, write_records


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "fft_layouts.json"))
    args = ap.parse_args()
    import cupy
    import cupyx.scipy.fft as cfft

    rng = cupy.random.default_rng(1)
    r, records = 5, []
    for mz, my, mx in ((105, 336, 336), (105, 320, 315), (112, 336, 336), (100, 320, 320), (108, 320, 320)):
        real = rng.random((r, mz, my, mx), dtype=cupy.float32)
        kz = mz // 2 + 1
        planes = (rng.random((r * kz, my, mx), dtype=cupy.float32) + 1j).astype(cupy.complex64)
        col = rng.random((mz, 288, 288), dtype=cupy.float32)
        cases = {
            "3d_r2c_batch5": lambda: cfft.rfftn(real, axes=(1, 2, 3), overwrite_x=False),
            "3d_r2c_batch1": lambda: cfft.rfftn(real[0], overwrite_x=False),
            "2d_c2c_batch5kz": lambda: cfft.fftn(planes, axes=(1, 2), overwrite_x=False),
            "2d_c2c_batch1kz": lambda: cfft.fftn(planes[:kz], axes=(1, 2), overwrite_x=False),
            "1d_r2c_z_of_image": lambda: cfft.rfft(col, axis=0),
        }
        for name, fn in cases.items():
            ms = time_device(lambda k: fn(), repeat=7, warmup=2, inner=3)
            records.append(stamp(dict(case=name, padded=[mz, my, mx], rank=r, ms=ms), device=gpu_name()))
        real = planes = col = cases = None       # free them before the next size
        cupy.get_default_memory_pool().free_all_blocks()
    print_table(records, ["case", "padded", "ms"])
    write_records(records, args.out)


if __name__ == "__main__":
    main()
