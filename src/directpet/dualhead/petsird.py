"""Dual-head LOR data through PETSIRD: the two heads as two modules of crystals, histograms as list-mode.

The scanner is one module type with two modules: module 0 the upper head (front-layer centre at
``x = gap/2 + depth/2``), module 1 the lower head (``x = -gap/2 - depth/2``), each ``n_y x n_z``
crystals with element ``c_y * n_z + c_z`` at ``(y, z) = (crystal_y_mm(c_y), crystal_z_mm(c_z))``.
The scanner has no TOF: one TOF bin spanning the coincidence window.

A LOR histogram (the Monte Carlo's output, in the class-major layout of
:mod:`directpet.dualhead.geometry`) is written as one coincidence per count -- the list-mode a
scanner would have recorded, in LOR order -- and reading histograms the coincidences back by LOR.
"""

from __future__ import annotations

import numpy as np

from .._checks import expect_instance, positive_int, require_memory, to_numpy
from ..io.petsird import Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter, single_type_header
from .geometry import DualHeadScanner

#: the coincidence window written as the single TOF bin (ns)
COINCIDENCE_WINDOW_NS = 6.0
_C_MM_PER_NS = 299.792458


def scanner_header(scanner: DualHeadScanner, *, model_name: str = "directpet dual-head"):
    """A ``petsird.Header`` describing the two heads' front-layer crystals (see the module docstring)."""
    expect_instance(scanner, DualHeadScanner, "scanner")
    expect_instance(model_name, str, "model_name")
    cy, cz = np.meshgrid(np.arange(scanner.n_y), np.arange(scanner.n_z), indexing="ij")
    elements = np.stack([np.zeros(cy.size), scanner.crystal_y_mm(cy.ravel()), scanner.crystal_z_mm(cz.ravel())], axis=1)
    x = 0.5 * scanner.gap_mm + 0.5 * scanner.depth_mm
    half_window_mm = 0.5 * COINCIDENCE_WINDOW_NS * _C_MM_PER_NS * 0.5
    return single_type_header(model_name, (scanner.depth_mm, scanner.crystal_mm, scanner.crystal_mm), elements,
                              np.stack([np.eye(3)] * 2), np.array([[x, 0.0, 0.0], [-x, 0.0, 0.0]]),
                              tof_edges_mm=[-half_window_mm, half_window_mm], tof_fwhm_mm=2 * half_window_mm)


def counts_to_coincidences(scanner: DualHeadScanner, counts) -> Coincidences:
    """One coincidence per count of the LOR histogram ``counts`` ((n_lors,) non-negative integers,
    any float or integer dtype; NumPy or CuPy), in LOR order."""
    expect_instance(scanner, DualHeadScanner, "scanner")
    c = np.asarray(to_numpy(counts))
    if c.shape != (scanner.n_lors,):
        raise ValueError(f"counts: expected shape ({scanner.n_lors},), got {c.shape}")
    if c.dtype == object or not (np.issubdtype(c.dtype, np.number)) or np.issubdtype(c.dtype, np.complexfloating):
        raise TypeError(f"counts: expected a real array, got dtype {c.dtype}")
    if not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("counts: expected finite non-negative integer counts per LOR")
    # per coincidence: its LOR (8 B), the four crystal indices (32 B), the two bins and the TOF index (20 B)
    total = float(c.sum(dtype=np.float64))
    require_memory("counts", 64.0 * total, f"{total:.3g} coincidences (one per count)")
    lor = np.repeat(np.arange(scanner.n_lors, dtype=np.int64), c.astype(np.int64))
    uy, uz, ly, lz = (a.astype(np.int64)[lor] for a in scanner.lor_crystals())
    upper = uy * scanner.n_z + uz
    lower = scanner.n_crystals + ly * scanner.n_z + lz
    return Coincidences(lower, upper, np.zeros(lor.size, np.uint32))     # PETSIRD order: bin0 >= bin1


def coincidences_to_counts(scanner: DualHeadScanner, coincidences: Coincidences, out=None) -> np.ndarray:
    """Add coincidences to a float32 LOR histogram ``(n_lors,)`` (new when ``out`` is None).

    A coincidence within one head is not a LOR of the scanner: ValueError.
    """
    expect_instance(scanner, DualHeadScanner, "scanner")
    expect_instance(coincidences, Coincidences, "coincidences")
    if out is not None:
        if not isinstance(out, np.ndarray) or out.dtype != np.float32:
            raise TypeError(f"out: expected a float32 NumPy array, got {type(out).__name__} "
                            f"{getattr(out, 'dtype', '')}")
        if out.shape != (scanner.n_lors,):
            raise ValueError(f"out: expected shape ({scanner.n_lors},), got {out.shape}")
    n = scanner.n_crystals
    b0, b1 = coincidences.bin0.astype(np.int64), coincidences.bin1.astype(np.int64)
    if np.any(b0 >= 2 * n) or np.any(b1 >= 2 * n):
        raise ValueError(f"coincidences: detection bins beyond the {2 * n} crystals of the two heads")
    upper, lower = np.minimum(b0, b1), np.maximum(b0, b1)
    if np.any(upper >= n) or np.any(lower < n):
        raise ValueError("coincidences: both photons in the same head (not a LOR of the dual-head scanner)")
    lower -= n
    idx = scanner.lor_index(upper // scanner.n_z, upper % scanner.n_z, lower // scanner.n_z, lower % scanner.n_z)
    hist = np.bincount(idx, minlength=scanner.n_lors).astype(np.float32)
    if out is None:
        return hist
    out += hist
    return out


def write_counts(path, scanner: DualHeadScanner, counts, *, block_events: int = 1 << 22) -> int:
    """Write a LOR histogram as PETSIRD list-mode prompts (``block_events`` per time block);
    returns the number of coincidences written."""
    block_events = positive_int("block_events", block_events)
    events = counts_to_coincidences(scanner, counts)
    with PetsirdWriter(path, scanner_header(scanner)) as writer:
        for start in range(0, max(len(events), 1), block_events):
            s = slice(start, start + block_events)
            writer.write_block({(0, 0): Coincidences(events.bin0[s], events.bin1[s], events.tof_idx[s])})
        return writer.n_written["prompts"]


def read_counts(path, scanner: DualHeadScanner, *, kind: str = "prompts", progress: bool = False) -> np.ndarray:
    """The float32 LOR histogram ``(n_lors,)`` of a PETSIRD file written for ``scanner``.

    The file's crystals must be this scanner's (same centres within 1 micrometre): ValueError otherwise.
    """
    expect_instance(scanner, DualHeadScanner, "scanner")
    expected = PetsirdScanner(scanner_header(scanner).scanner)
    out = np.zeros(scanner.n_lors, np.float32)
    with PetsirdReader(path) as reader:
        got = reader.scanner
        if got.n_types != 1 or got.element_centres[0].shape != expected.element_centres[0].shape or \
                not np.allclose(got.element_centres[0], expected.element_centres[0], atol=1e-3):
            raise ValueError(f"path: {reader.path!r} describes another scanner than {scanner}")
        for _, coincidences in reader.coincidences(kind, progress=progress):
            coincidences_to_counts(scanner, Coincidences(coincidences.bin0 // got.n_energy_bins[0],
                                                         coincidences.bin1 // got.n_energy_bins[0],
                                                         coincidences.tof_idx), out)
    return out


__all__ = ["coincidences_to_counts", "counts_to_coincidences", "read_counts", "scanner_header", "write_counts"]
