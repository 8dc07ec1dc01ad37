"""The compiled list-mode deposition of PETSIRD files (csrc/direct/listmode.hpp, issue 18): event lists read
from the file in chunks, decoded and deposited without EventBatch, against the reference path (the
reader's decoder -> coincidences_to_events -> deposit) event for event (bit for bit on the GPU; on the
CPU up to the last bit of atan2 / asin at a view edge), in one pass for prompts and
delayeds, across chunk boundaries, for scanners of several module types, and with bad files and bad
lists named as the reader names them. The GPU decoder is checked value for value against the CPU's
and petsird's own reader."""

from __future__ import annotations

import os

import numpy as np
import pytest

petsird = pytest.importorskip("petsird", reason="petsird not installed (pip install 'directpet[io]')")

from petsird.helpers import generator  # noqa: E402

from directpet import _core  # noqa: E402
from directpet.direct import CylindricalScanner, ViewSet, simulate_events, simulate_randoms  # noqa: E402
from directpet.direct import petsird as direct_petsird  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet.io.petsird import (Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter, _encode_varints,  # noqa: E402
                                  list_end)
from directpet.sim.phantoms import sphere_phantom  # noqa: E402

SCANNER = CylindricalScanner()
GRID = ImageGrid((10, 36, 36), 10.0)
VIEWS = ViewSet(8, 3)


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    """Prompts of a sphere phantom (with randoms) and delayeds, in blocks of uneven sizes."""
    _, info = sphere_phantom(GRID, sphere_diameter_mm=60.0)
    rng = np.random.default_rng(31)
    header = direct_petsird.scanner_header(SCANNER)
    path = tmp_path_factory.mktemp("listmode") / "scan.petsird"
    prompts = list(simulate_events(SCANNER, info, 60_000, randoms_fraction=0.2, seed=32, chunk_size=17_000,
                                   progress=False))
    delayeds = [simulate_randoms(SCANNER, int(rng.integers(1_000, 5_000)), seed=rng) for _ in prompts]
    direct_petsird.write_events(path, header, prompts=prompts, delayeds=delayeds)
    return path


def reference(path, kind, grid=GRID, viewset=VIEWS, xp=np):
    return direct_petsird.deposit_file(path, grid, viewset, kind=kind, xp=xp, progress=False, return_stats=True,
                                       engine="python")


def assert_same_deposits(got, want, n_events):
    """The CPU path's histo-images: equal to the reference except for events whose direction lies
    within an ulp of a view edge, where the C library's atan2 / asin and NumPy's (SIMD code on
    AVX-512 machines) may round apart: at most 1e-4 of the events moved (none moves on the machines
    we test on; the GPU is compared bit for bit)."""
    moved = float(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)).sum()) / 2
    assert moved <= max(1.0, 1e-4 * n_events), moved


def same_stats(a, b, n_moved=0):
    """Equal counts, up to n_moved events changing between 'deposited', 'outside the views' and
    'outside the grid' (an event on a view edge; see assert_same_deposits)."""
    counts = [(x.n_deposited, x.n_outside_views, x.n_outside_grid) for x in (a, b)]
    return a.n_events == b.n_events and sum(abs(p - q) for p, q in zip(*counts)) <= 2 * n_moved


@pytest.mark.parametrize("grid, viewset", [(GRID, VIEWS), (ImageGrid((7, 33, 40), (6.0, 7.5, 9.0)), ViewSet(5, 4, 8.0)),
                                           (ImageGrid((9, 24, 24), 12.0), ViewSet(3, 1, 0.0))])
def test_compiled_deposition_is_the_reference_event_for_event(scan, grid, viewset):
    """Same histo-images bit for bit and the same counts, on even and odd lattices, anisotropic
    voxels, tilted views and a single tilt bin."""
    for kind in ("prompts", "delayeds"):
        want, want_stats = reference(scan, kind, grid, viewset)
        got, stats = direct_petsird.deposit_file(scan, grid, viewset, kind=kind, xp=np, progress=False,
                                                 return_stats=True)
        assert_same_deposits(got, want, stats.n_events)
        assert same_stats(stats, want_stats, 1e-4 * stats.n_events) and want.sum() > 0.05 * stats.n_events


def test_prompts_and_delayeds_in_one_pass_across_chunk_boundaries(scan):
    """One pass gives both kinds; chunks of 4 KiB (hundreds per list, cut anywhere in the stream of
    varints) give the same result as 32 MiB ones: memory is bounded by the chunk, not the file."""
    both = direct_petsird.deposit_prompts_and_delayeds(scan, GRID, VIEWS, xp=np, progress=False)
    small = direct_petsird.deposit_prompts_and_delayeds(scan, GRID, VIEWS, xp=np, progress=False, chunk_bytes=4096)
    assert os.path.getsize(scan) > 100 * 4096
    for kind, got, stats in (("prompts", both.prompts, both.prompt_stats), ("delayeds", both.delayeds, both.delayed_stats)):
        want, want_stats = reference(scan, kind)
        assert_same_deposits(got, want, stats.n_events)
        np.testing.assert_array_equal(getattr(small, kind), got)       # the chunking changes nothing
        assert same_stats(stats, want_stats, 1e-4 * stats.n_events)
    assert both.prompt_stats.n_events == 60_000 and both.delayed_stats.n_events > 1_000


def test_several_module_types_use_their_own_tables(tmp_path):
    """petsird's demo scanner (two module types, several energy bins): lists of (0, 0) and (1, 1)
    with their own crystals, energy bins and TOF bins, deposited as the reference deposits them."""
    header = generator.get_header()
    header.scanner.delayed_event_policy = petsird.CoincidencePolicy.REJECT_HIGHER_MULTIPLES
    header.scanner.detection_efficiencies.module_pair_sgidlut = []
    header.scanner.detection_efficiencies.module_pair_efficiencies_vectors = []
    scanner = PetsirdScanner(header.scanner)
    assert scanner.n_types == 2 and scanner.has_tof(0, 0) and scanner.has_tof(1, 1)
    rng = np.random.default_rng(5)

    def events(pair, n):
        n_tof = scanner.tof_edges_mm(*pair).size - 1
        return Coincidences(rng.integers(0, scanner.n_detection_bins[pair[0]], n),
                            rng.integers(0, scanner.n_detection_bins[pair[1]], n), rng.integers(0, n_tof, n))

    path = tmp_path / "demo.petsird"
    with PetsirdWriter(path, header) as w:
        for n in (3_000, 5_000):
            w.write_block({(0, 0): events((0, 0), n), (1, 1): events((1, 1), n // 2)},
                          delayeds={(1, 1): events((1, 1), n // 3)})
    grid, views = ImageGrid((16, 32, 32), 4.0), ViewSet(6, 3, 30.0)
    for kind in ("prompts", "delayeds"):
        want, want_stats = reference(path, kind, grid, views)
        got, stats = direct_petsird.deposit_file(path, grid, views, kind=kind, xp=np, progress=False, return_stats=True)
        assert_same_deposits(got, want, stats.n_events)
        assert same_stats(stats, want_stats, 1e-4 * stats.n_events) and want.sum() > 0


# --- bad files and bad lists ------------------------------------------------------------------------------

def test_truncated_and_corrupt_files_raise_as_the_reader_raises(tmp_path, scan):
    data = scan.read_bytes()
    for keep in (0.999, 0.9, 0.5, 0.2, 0.02):
        cut = tmp_path / f"cut_{keep}.petsird"
        cut.write_bytes(data[: int(len(data) * keep)])
        with pytest.raises(ValueError, match="truncated|corrupt|not a PETSIRD"):
            direct_petsird.deposit_prompts_and_delayeds(cut, GRID, VIEWS, xp=np, progress=False)
    cut = tmp_path / "no_end.petsird"
    cut.write_bytes(data[:-1])
    with pytest.raises(ValueError, match="truncated"):
        direct_petsird.deposit_prompts_and_delayeds(cut, GRID, VIEWS, xp=np, progress=False)
    # a list announcing more events than bytes remain: refused before it is read
    lists = []

    def where(event_list):
        lists.append(event_list)
        return list_end(event_list)

    with PetsirdReader(scan) as reader:
        reader.stream_lists(where)
    last = [e for e in lists if e.kind == "prompts"][-1]
    count = _encode_varints(np.array([last.n_events], np.uint64)).tobytes()
    i = last.offset - len(count)
    assert data[i:last.offset] == count
    bad = tmp_path / "huge_count.petsird"
    bad.write_bytes(data[:i] + _encode_varints(np.array([2**31], np.uint64)).tobytes() + data[last.offset:])
    with pytest.raises(ValueError, match="announced but only"):
        direct_petsird.deposit_file(bad, GRID, VIEWS, xp=np, progress=False)


def test_events_outside_the_scanner_are_named(tmp_path):
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    scanner = PetsirdScanner(header.scanner)
    n_bins, n_tof = scanner.n_detection_bins[0], scanner.tof_edges_mm(0, 0).size - 1
    for bins, tof, what in (([n_bins + 3, 1], 0, r"detection_bins\[0\]"), ([7, n_bins], 0, r"detection_bins\[1\]"),
                            ([7, 1], n_tof, "tof_idx")):
        path = tmp_path / "outside.petsird"
        with petsird.BinaryPETSIRDWriter(str(path)) as w:       # petsird's writer does not check
            w.write_header(header)
            w.write_time_blocks([petsird.TimeBlock.EventTimeBlock(petsird.EventTimeBlock(
                prompt_events=[[[petsird.CoincidenceEvent(detection_bins=bins, tof_idx=tof)]]]))])
        with pytest.raises(ValueError, match=f"path .*{what} = .* outside"):
            direct_petsird.deposit_file(path, GRID, VIEWS, xp=np, progress=False)


def raw_list(tmp_path, values, extra=b""):
    """A file holding the varints of ``values`` (then ``extra``): (path, fd) of an event list."""
    path = tmp_path / "list.bin"
    path.write_bytes(_encode_varints(np.asarray(values, np.uint32)).tobytes() + extra)
    return path


def cpu_engine(chunk_bytes=1 << 16):
    return _core.DirectListDeposit(list(GRID.shape), list(GRID.voxel_size), VIEWS.n_phi, VIEWS.n_theta,
                                   float(VIEWS.theta_max), chunk_bytes)


def tables(n_elements=40, n_tof=9, n_energy=1):
    rng = np.random.default_rng(2)
    angles = rng.uniform(0, 2 * np.pi, n_elements)
    centres = np.stack([465 * np.cos(angles), 465 * np.sin(angles), rng.uniform(-100, 100, n_elements)], axis=1)
    return (centres.astype(np.float32), centres.astype(np.float32),
            np.linspace(-400, 400, n_tof).astype(np.float32), n_energy, n_energy)


def test_the_list_reader_finds_the_end_and_counts_what_is_outside(tmp_path, rng):
    values = np.stack([rng.integers(0, 50, 1000), rng.integers(0, 40, 1000), rng.integers(0, 9, 1000)], axis=1)
    values[::97, 0] = 2**31 + 7                    # long varints, and detection bins beyond the 40 elements
    path = raw_list(tmp_path, values.ravel(), extra=b"\x05\x06")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        assert _core.varint_list_end(f.fileno(), 0, 1000, 3, chunk_bytes=64) == (size - 2, True)
        assert _core.varint_list_end(f.fileno(), 0, 1001, 3) == (size - 2, False)   # the file ends inside it
        engine = cpu_engine(chunk_bytes=4096)
        handle = engine.add_pair(*tables())
        out = np.zeros((len(VIEWS),) + GRID.shape, np.float32)
        end, records, complete = engine.deposit(handle, f.fileno(), 0, 1000, out)
        assert (end, records, complete) == (size - 2, 1000, True)
    t = engine.finish()["pairs"][0]
    outside = int((values[:, 0] >= 40).sum())      # the only index out of range (bin1 < 40, tof < 9)
    assert t["n_events"] == 1000 and t["n_outside_scanner"] == outside
    assert t["n_deposited"] + t["n_outside_views"] + t["n_outside_grid"] + outside == 1000
    assert (t["max_bin0"], t["max_bin1"], t["max_tof"]) == tuple(int(v) for v in values.max(axis=0))
    assert out.sum() == t["n_deposited"]


def test_corrupt_varints_in_a_list_are_errors_on_the_cpu(tmp_path):
    engine = cpu_engine()
    handle = engine.add_pair(*tables())
    out = np.zeros((len(VIEWS),) + GRID.shape, np.float32)
    for body in (b"\x01\x02" + b"\x80" * 6 + b"\x01" + b"\x03" * 30,          # a varint of 7 bytes
                 b"\x01\x02" + b"\xff\xff\xff\xff\x7f" + b"\x03" * 30):      # 5 bytes beyond 32 bits
        path = tmp_path / "bad.bin"
        path.write_bytes(body)
        with open(path, "rb") as f, pytest.raises(ValueError, match="corrupt file"):
            engine.deposit(handle, f.fileno(), 0, 3, out)


# --- the GPU ----------------------------------------------------------------------------------------------------

@pytest.fixture()
def cp():
    return pytest.importorskip("cupy", reason="CuPy not installed")


@pytest.mark.gpu
def test_gpu_deposition_is_the_reference_and_the_cpu(scan, cp):
    """The GPU path (pinned chunks, two streams, decode and deposit kernels) against the reference on
    the GPU (CuPy) bit for bit, and against the compiled CPU path, in large and in 4 KiB chunks."""
    both = direct_petsird.deposit_prompts_and_delayeds(scan, GRID, VIEWS, xp=cp, progress=False)
    small = direct_petsird.deposit_prompts_and_delayeds(scan, GRID, VIEWS, xp=cp, progress=False, chunk_bytes=4096)
    cpu = direct_petsird.deposit_prompts_and_delayeds(scan, GRID, VIEWS, xp=np, progress=False)
    for kind, stats in (("prompts", both.prompt_stats), ("delayeds", both.delayed_stats)):
        want, want_stats = reference(scan, kind, xp=cp)
        got = getattr(both, kind)
        assert isinstance(got, cp.ndarray)
        cp.testing.assert_array_equal(got, want)
        cp.testing.assert_array_equal(getattr(small, kind), want)
        assert same_stats(stats, want_stats)
        # the CPU's atan2 / asin (glibc) and CUDA's may differ in the last bit for an LOR on a view edge
        assert_same_deposits(cp.asnumpy(got), getattr(cpu, kind), stats.n_events)


def gpu_engine(chunk_bytes=1 << 16):
    from directpet._backend import cuda_module

    return cuda_module().DirectListDepositCuda(list(GRID.shape), list(GRID.voxel_size), VIEWS.n_phi, VIEWS.n_theta,
                                               float(VIEWS.theta_max), chunk_bytes)


@pytest.mark.gpu
@pytest.mark.parametrize("chunk_bytes", [4096, 1 << 20])
def test_gpu_decoder_is_the_cpu_decoder_and_petsirds(tmp_path, rng, chunk_bytes):
    """Values of every length (1 to 5 bytes, up to 2**32 - 1) decoded on the GPU equal the CPU
    decoder's; a PETSIRD file's lists decoded on the GPU equal petsird's own reader's events."""
    n = 200_000
    values = (rng.integers(0, 2**32, 3 * n, dtype=np.uint64) >> rng.integers(0, 32, 3 * n).astype(np.uint64)).astype(np.uint32)
    path = raw_list(tmp_path, values)
    engine = gpu_engine(chunk_bytes)
    with open(path, "rb") as f:
        got, (end, records, complete) = engine.decode(f.fileno(), 0, n)
    np.testing.assert_array_equal(got, values)
    assert (end, records, complete) == (os.path.getsize(path), n, True)
    cpu_values, _ = _core.decode_varints(np.fromfile(path, np.uint8), 3 * n)
    np.testing.assert_array_equal(got, cpu_values)

    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    scanner = PetsirdScanner(header.scanner)
    file = tmp_path / "file.petsird"
    n_tof = scanner.tof_edges_mm(0, 0).size - 1
    with PetsirdWriter(file, header) as w:
        for k in (7_000, 1, 12_345):
            w.write_block({(0, 0): Coincidences(rng.integers(0, scanner.n_detection_bins[0], k),
                                                rng.integers(0, scanner.n_detection_bins[0], k),
                                                rng.integers(0, n_tof, k))})
    theirs = []
    with petsird.BinaryPETSIRDReader(str(file)) as r:
        r.read_header()
        for block in r.read_time_blocks():
            theirs += [(e.detection_bins[0], e.detection_bins[1], e.tof_idx) for e in block.value.prompt_events[0][0]]
    ours = []

    def decode(where):
        values, (end, _, done) = engine.decode(where.fd, where.offset, where.n_events)
        assert done
        ours.append(values.reshape(-1, 3))
        return end

    with PetsirdReader(file) as reader:
        reader.stream_lists(decode, kinds="prompts")
    np.testing.assert_array_equal(np.concatenate(ours), np.array(theirs, np.uint32))


@pytest.mark.gpu
def test_gpu_faults_are_found_and_named(tmp_path, scan, cp):
    """Corrupt varints are counted on the GPU and reported by finish(); events outside the scanner are
    skipped there and named by the Python layer; a truncated file raises as on the CPU."""
    for body, key in ((b"\x01\x02" + b"\x80" * 6 + b"\x01" + b"\x03" * 30, "varint_too_long"),
                      (b"\x01\x02" + b"\xff\xff\xff\xff\x7f" + b"\x03" * 30, "value_too_wide")):
        path = tmp_path / "bad.bin"
        path.write_bytes(body)
        engine = gpu_engine()
        handle = engine.add_pair(*tables())
        out = cp.zeros((len(VIEWS),) + GRID.shape, cp.float32)
        with open(path, "rb") as f:
            engine.deposit(handle, f.fileno(), 0, 3, out.data.ptr)
        assert engine.finish()[key]
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    n_bins = PetsirdScanner(header.scanner).n_detection_bins[0]
    path = tmp_path / "outside.petsird"
    with petsird.BinaryPETSIRDWriter(str(path)) as w:
        w.write_header(header)
        w.write_time_blocks([petsird.TimeBlock.EventTimeBlock(petsird.EventTimeBlock(
            prompt_events=[[[petsird.CoincidenceEvent(detection_bins=[n_bins + 3, 1], tof_idx=0)]]]))])
    with pytest.raises(ValueError, match=r"detection_bins\[0\] = .* outside"):
        direct_petsird.deposit_file(path, GRID, VIEWS, xp=cp, progress=False)
    cut = tmp_path / "cut.petsird"
    cut.write_bytes(scan.read_bytes()[: int(os.path.getsize(scan) * 0.6)])
    with pytest.raises(ValueError, match="truncated|corrupt"):
        direct_petsird.deposit_prompts_and_delayeds(cut, GRID, VIEWS, xp=cp, progress=False)
