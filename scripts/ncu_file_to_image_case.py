"""The compiled kernels of the file-to-image path at the paper's size for Nsight Compute: ``listmode``
(default) deposits a file of 2e7 random coincidences (csrc/direct/listmode_cuda.cu: its first chunk's
decode_tiles and deposit_events are the launches to profile), ``corrections`` computes the normalisation
and acceptance histo-images of 120 views on 144 x 144 x 48 (csrc/direct/corrections_cuda.cu):

    ncu --set full --kernel-name regex:"decode_tiles|deposit_events" --launch-count 2 \\
        python scripts/ncu_file_to_image_case.py listmode
    ncu --set full --kernel-name regex:"normalisation_kernel|acceptance_kernel" --launch-count 2 \\
        python scripts/ncu_file_to_image_case.py corrections
"""

import os
import sys
import tempfile

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from io_petsird import random_coincidences  # noqa: E402

from directpet.direct import CylindricalScanner, normalisation_histo_images, sensitivity_attenuation  # noqa: E402
from directpet.direct import petsird as direct_petsird  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.io.petsird import PetsirdScanner, PetsirdWriter  # noqa: E402

scanner = CylindricalScanner()
grid, views = ImageGrid((48, 144, 144), 4.0), scanner.viewset(40, 3)
rng = np.random.default_rng(5)
eps = rng.normal(1.0, 0.05, direct_petsird.ring_shape(direct_petsird.scanner_header(scanner))).clip(0.8, 1.2)
header = direct_petsird.scanner_header(scanner, crystal_efficiencies=eps)
n_per_ring, n_rings = direct_petsird.ring_shape(header)
n_tof = PetsirdScanner(header.scanner).tof_edges_mm(0, 0).size - 1
part = sys.argv[1] if len(sys.argv) > 1 else "listmode"
if part == "listmode":
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scan.petsird")
        with PetsirdWriter(path, header) as w:                 # one list of 2e7 events (130 MB, 32 MiB chunks)
            w.write_block({(0, 0): random_coincidences(20_000_000, n_per_ring, n_rings, n_tof, rng)})
        direct_petsird.deposit_file(path, grid, views, xp=cp, progress=False)
else:
    normalisation_histo_images(header, grid, views, xp=cp)
    sensitivity_attenuation(grid, views, scanner=scanner, xp=cp)
cp.cuda.Device().synchronize()
