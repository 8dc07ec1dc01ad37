"""PETSIRD list-mode in and out: the array event codec against the ``petsird`` package's own reader,
writer and efficiency helper (independent oracles), DIRECT's round trip simulate -> write -> read ->
deposit, and bad files (truncated, foreign, another version, no TOF, events outside the scanner)."""

from __future__ import annotations

import io

import numpy as np
import pytest

petsird = pytest.importorskip("petsird", reason="petsird not installed (pip install 'directpet[io]')")

from petsird import _binary                                     # noqa: E402
from petsird.helpers import generator, get_detection_efficiency  # noqa: E402

from directpet.direct import CylindricalScanner, EventBatch, ViewSet, deposit, simulate_events, simulate_randoms  # noqa: E402
from directpet.direct import petsird as direct_petsird  # noqa: E402
from directpet.geometry import ImageGrid  # noqa: E402
from directpet import _core  # noqa: E402
from directpet.io.petsird import Coincidences, PetsirdReader, PetsirdScanner, PetsirdWriter, _encode_varints  # noqa: E402
from directpet.sim.phantoms import sphere_phantom  # noqa: E402

SCANNER = CylindricalScanner()
GRID = ImageGrid((12, 40, 40), 9.0)
VIEWS = ViewSet(8, 3)


def demo_header(with_module_pairs: bool = False):
    """petsird's own two-module-type demo scanner (TOF for (0,0) and (1,1), none for (1,0)); its
    module-pair efficiency tables are large, so file tests leave them out."""
    header = generator.get_header()
    header.scanner.delayed_event_policy = petsird.CoincidencePolicy.REJECT_HIGHER_MULTIPLES   # demo: NONE
    if not with_module_pairs:
        header.scanner.detection_efficiencies.module_pair_sgidlut = []
        header.scanner.detection_efficiencies.module_pair_efficiencies_vectors = []
    return header


def random_coincidences(scanner: PetsirdScanner, pair, n, rng) -> Coincidences:
    t0, t1 = pair
    n_tof = max(scanner.tof_edges_mm(t0, t1).size - 1, 1)
    return Coincidences(rng.integers(0, scanner.n_detection_bins[t0], n),
                        rng.integers(0, scanner.n_detection_bins[t1], n), rng.integers(0, n_tof, n))


# --- the codec ------------------------------------------------------------------------------------

def test_varints_match_petsirds_own_encoder(rng):
    values = np.concatenate([[0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**32 - 1],
                             rng.integers(0, 2**32, 500)]).astype(np.uint64)
    buffer = io.BytesIO()
    stream = _binary.CodedOutputStream(buffer)
    for v in values:
        stream.write_unsigned_varint(int(v))
    stream.flush()
    encoded = _encode_varints(values)
    assert encoded.tobytes() == buffer.getvalue()
    decoded, used = _core.decode_varints(encoded, values.size)
    np.testing.assert_array_equal(decoded, values)
    assert used == encoded.size
    # stops after the last complete varint, and at max_values
    part, used = _core.decode_varints(encoded[:-1], values.size)
    assert part.size == values.size - 1 and used < encoded.size - 1
    part, used = _core.decode_varints(encoded, 7)
    np.testing.assert_array_equal(part, values[:7])
    with pytest.raises(ValueError, match="longer than 5 bytes"):
        _core.decode_varints(np.array([0x80] * 6 + [1], np.uint8), 1)
    with pytest.raises(ValueError, match="beyond 32 bits"):
        _core.decode_varints(np.array([0xFF] * 4 + [0x7F], np.uint8), 1)
    with pytest.raises(ValueError, match="varints"):
        _encode_varints(np.array([2**32], np.uint64))


def _decode_or_error(data, max_values, **kw):
    try:
        values, used = _core.decode_varints(data, max_values, **kw)
        return values.tolist(), used
    except ValueError as err:
        return str(err)


@pytest.mark.parametrize("threads,min_chunk", [(2, 16), (3, 1), (7, 5), (16, 64)])
def test_multithreaded_decode_is_the_one_pass_decode(rng, threads, min_chunk):
    """Split over threads (chunks down to a byte, so that varints and faults straddle every chunk edge),
    the decoder gives the one-pass decoder's values, bytes consumed and first error, for whole lists,
    lists cut inside a varint, max_values limits, and corrupt bytes (a varint of 6+ bytes, a value
    beyond 32 bits) anywhere, before and after max_values."""
    for trial in range(40):
        n = int(rng.integers(1, 400))
        values = (rng.integers(0, 2**32, n, dtype=np.uint64) >> rng.integers(0, 33, n).astype(np.uint64))
        data = _encode_varints(values)
        if trial % 4 == 1:                                    # six continuation bytes somewhere
            at = int(rng.integers(0, data.size))
            data = np.insert(data, at, np.full(6, 0x80, np.uint8))
        elif trial % 4 == 2:                                  # a 5-byte varint beyond 32 bits
            at = int(rng.integers(0, data.size))
            data = np.insert(data, at, np.array([0xFF, 0xFF, 0xFF, 0xFF, 0x1F], np.uint8))
        elif trial % 4 == 3:                                  # a list cut inside its last varint, or trailing junk
            data = np.concatenate([data, np.full(int(rng.integers(1, 9)), 0x80, np.uint8)])
        for cut in (data.size, int(rng.integers(0, data.size + 1))):
            for max_values in (n + 10, n, int(rng.integers(0, n + 1))):
                one_pass = _decode_or_error(data[:cut], max_values, threads=1)
                split = _decode_or_error(data[:cut], max_values, threads=threads, min_chunk_bytes=min_chunk)
                assert split == one_pass, (trial, cut, max_values)


def test_files_we_write_read_back_with_petsirds_own_reader(tmp_path, rng):
    header = demo_header()
    scanner = PetsirdScanner(header.scanner)
    blocks = [{pair: random_coincidences(scanner, pair, n, rng) for pair, n in (((0, 0), 700), ((1, 0), 90), ((1, 1), 300))}
              for _ in range(3)]
    delayed = random_coincidences(scanner, (0, 0), 150, rng)
    path = tmp_path / "ours.petsird"
    with PetsirdWriter(path, header) as w:
        for i, b in enumerate(blocks):
            w.write_block(b, delayeds={(0, 0): delayed} if i == 1 else None)
    with petsird.BinaryPETSIRDReader(str(path)) as r:
        assert r.read_header().scanner.model_name == header.scanner.model_name
        theirs = [tb.value for tb in r.read_time_blocks()]
    assert len(theirs) == 3
    for block, ours in zip(theirs, blocks):
        for (t0, t1), ev in ours.items():
            if t0 == t1:
                ev = ev.ordered(scanner.tof_edges_mm(t0, t1).size - 1)
            got = block.prompt_events[t0][t1]
            assert [e.detection_bins for e in got] == [[int(a), int(b)] for a, b in zip(ev.bin0, ev.bin1)]
            assert [e.tof_idx for e in got] == ev.tof_idx.tolist()
            assert all(e.detection_bins[0] >= e.detection_bins[1] for e in got) or t0 != t1
    assert len(theirs[1].delayed_events[0][0]) == 150 and len(theirs[0].delayed_events[0][0]) == 0


def test_files_petsird_writes_read_back_with_ours(tmp_path):
    header = demo_header()
    full = demo_header(with_module_pairs=True)      # petsird's event generator needs the module pairs
    path = tmp_path / "theirs.petsird"
    written = []
    with petsird.BinaryPETSIRDWriter(str(path)) as w:
        w.write_header(header)
        blocks = []
        for k in range(2):
            prompts = [[list(generator.get_events(full, [t0, t1], 40)) for t1 in range(t0 + 1)] for t0 in range(2)]
            written.append(prompts)
            blocks.append(petsird.TimeBlock.EventTimeBlock(petsird.EventTimeBlock(
                time_interval=petsird.TimeInterval(start=k, stop=k + 1), prompt_events=prompts)))
        w.write_time_blocks(blocks)
    with PetsirdReader(path) as f:
        got = list(f.coincidences("prompts"))
    expected = [((t0, t1), lst) for prompts in written for t0, row in enumerate(prompts) for t1, lst in enumerate(row)]
    assert [pair for pair, _ in got] == [pair for pair, _ in expected]
    for (_, ev), (_, lst) in zip(got, expected):
        assert ev.bin0.tolist() == [e.detection_bins[0] for e in lst]
        assert ev.bin1.tolist() == [e.detection_bins[1] for e in lst]
        assert ev.tof_idx.tolist() == [e.tof_idx for e in lst]


def test_pair_efficiencies_match_petsirds_helper(rng):
    header = demo_header(with_module_pairs=True)
    info = header.scanner
    for t in range(2):        # make the per-bin efficiencies non-trivial
        info.detection_efficiencies.detection_bin_efficiencies[t] = list(rng.uniform(0.5, 1.5, PetsirdScanner(info).n_detection_bins[t]))
    scanner = PetsirdScanner(info)
    for pair in ((0, 0), (1, 0), (1, 1)):
        ev = random_coincidences(scanner, pair, 200, rng)
        if pair[0] == pair[1]:
            ev = ev.ordered(scanner.tof_edges_mm(*pair).size - 1)
        ours = scanner.pair_efficiency(pair, ev.bin0, ev.bin1)
        theirs = [get_detection_efficiency(info, list(pair), int(a), int(b)) for a, b in zip(ev.bin0, ev.bin1)]
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
        assert np.any(ours == 0) or pair != (0, 0)    # same-angle module pairs are not in coincidence


def test_element_centres_follow_the_transforms():
    """Our DIRECT ring header: element (module k, ring r) sits at angle 2 pi k / n on the detector
    radius, at the ring's z (an independent statement of the layout)."""
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=6.0)
    n_per_ring, n_rings = direct_petsird.ring_shape(header)
    centres = PetsirdScanner(header.scanner).element_centres[0].reshape(n_per_ring, n_rings, 3)
    angle = 2 * np.pi * np.arange(n_per_ring) / n_per_ring
    np.testing.assert_allclose(centres[:, 0, 0], SCANNER.radius_mm * np.cos(angle), atol=1e-3)
    np.testing.assert_allclose(centres[:, 0, 1], SCANNER.radius_mm * np.sin(angle), atol=1e-3)
    ring = SCANNER.axial_length_mm / n_rings
    np.testing.assert_allclose(centres[3, :, 2], (np.arange(n_rings) - (n_rings - 1) / 2) * ring, atol=1e-4)


# --- DIRECT round trip ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def simulated():
    _, info = sphere_phantom(GRID, sphere_diameter_mm=30.0)
    prompts = list(simulate_events(SCANNER, info, 30_000, randoms_fraction=0.2, seed=5, chunk_size=20_000, progress=False))
    delayeds = simulate_randoms(SCANNER, 6_000, seed=6)
    return prompts, delayeds


def test_direct_round_trip_gives_the_histo_images_of_the_stored_events(tmp_path, simulated):
    prompts, delayeds = simulated
    header = direct_petsird.scanner_header(SCANNER)
    path = tmp_path / "sim.petsird"
    counts = direct_petsird.write_events(path, header, prompts=prompts, delayeds=delayeds)
    assert counts == {"prompts": sum(len(b) for b in prompts), "delayeds": len(delayeds)}
    scanner = PetsirdScanner(header.scanner)
    for kind, batches in (("prompts", prompts), ("delayeds", [delayeds])):
        from_file = direct_petsird.deposit_file(path, GRID, VIEWS, kind=kind, xp=np, progress=False)
        direct = deposit([direct_petsird.quantised(b, scanner) for b in batches], GRID, VIEWS)
        np.testing.assert_array_equal(from_file, direct)
        assert from_file.sum() > 0.1 * sum(len(b) for b in batches)     # most randoms fall outside the grid


def test_quantisation_is_within_a_crystal_and_a_tof_bin(simulated):
    prompts, _ = simulated
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=4.0, tof_bin_ps=25.0)
    scanner = PetsirdScanner(header.scanner)
    batch = prompts[0]
    q = direct_petsird.quantised(batch, scanner)
    n_per_ring, n_rings = direct_petsird.ring_shape(header)
    half_arc = np.pi * SCANNER.radius_mm / n_per_ring
    half_ring = 0.5 * SCANNER.axial_length_mm / n_rings
    for p, pq in ((batch.p1, q.p1), (batch.p2, q.p2)):
        assert np.all(np.abs(p[:, 2] - pq[:, 2]) <= half_ring + 1e-3)
        assert np.all(np.hypot(p[:, 0] - pq[:, 0], p[:, 1] - pq[:, 1]) <= half_arc + 1e-3)
    assert np.all(np.abs(q.dt_ps - batch.dt_ps) <= 12.5 + 1e-3)
    # The quantised histo-images keep the counts and, at 9 mm voxels, nearly all events' views.
    a, b = deposit(batch, GRID, VIEWS), deposit(q, GRID, VIEWS)
    assert abs(a.sum() - b.sum()) <= 0.01 * a.sum()
    np.testing.assert_allclose(a.sum(axis=(1, 2, 3)), b.sum(axis=(1, 2, 3)), rtol=0.1, atol=30)


def test_events_are_read_in_chunks_on_request(tmp_path, simulated):
    prompts, _ = simulated
    path = tmp_path / "sim.petsird"
    direct_petsird.write_events(path, direct_petsird.scanner_header(SCANNER), prompts=prompts)
    chunks = list(direct_petsird.read_events(path))
    assert [len(c) for c in chunks] == [len(b) for b in prompts]
    assert chunks[0].p1.dtype == np.float32 and chunks[0].dt_ps.shape == (len(prompts[0]),)


@pytest.mark.gpu
def test_deposit_file_on_the_gpu_matches_the_cpu(tmp_path, simulated):
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    prompts, _ = simulated
    path = tmp_path / "sim.petsird"
    direct_petsird.write_events(path, direct_petsird.scanner_header(SCANNER), prompts=prompts)
    cpu = direct_petsird.deposit_file(path, GRID, VIEWS, xp=np, progress=False)
    gpu = direct_petsird.deposit_file(path, GRID, VIEWS, progress=False)     # auto: the GPU
    assert isinstance(gpu, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(gpu), cpu)


# --- bad files and bad events -------------------------------------------------------------------------

@pytest.fixture()
def small_file(tmp_path, rng):
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    scanner = PetsirdScanner(header.scanner)
    path = tmp_path / "small.petsird"
    with PetsirdWriter(path, header) as w:
        for _ in range(2):
            w.write_block({(0, 0): random_coincidences(scanner, (0, 0), 500, rng)})
    return path


def read_all(path):
    with PetsirdReader(path) as f:
        return sum(len(ev) for _, ev in f.coincidences("prompts"))


def test_a_complete_file_reads_whole(small_file):
    assert read_all(small_file) == 1000


@pytest.mark.parametrize("keep", [0.999, 0.9, 0.5, 0.2, 0.02])
def test_truncated_files_raise(tmp_path, small_file, keep):
    data = small_file.read_bytes()
    cut = tmp_path / "cut.petsird"
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ValueError, match="truncated|corrupt|not a PETSIRD"):
        read_all(cut)


def test_a_file_without_its_end_mark_is_truncated(tmp_path, small_file):
    cut = tmp_path / "no_end.petsird"
    cut.write_bytes(small_file.read_bytes()[:-1])         # the stream's final 0
    with pytest.raises(ValueError, match="truncated"):
        read_all(cut)


def test_foreign_and_other_version_files_raise(tmp_path, small_file, rng):
    foreign = tmp_path / "foreign.bin"
    foreign.write_bytes(rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match="not a PETSIRD binary file"):
        PetsirdReader(foreign)
    data = small_file.read_bytes()
    i = data.index(b'"name":"PETSIRD"')
    other = tmp_path / "other.petsird"
    other.write_bytes(data[:i] + b'"name":"PETSIRX"' + data[i + 16:])
    with pytest.raises(ValueError, match="another version"):
        PetsirdReader(other)
    with pytest.raises(FileNotFoundError, match="path"):
        PetsirdReader(tmp_path / "missing.petsird")


def test_a_file_without_tof_cannot_become_histo_images(tmp_path, simulated):
    header = direct_petsird.scanner_header(SCANNER)
    edges = header.scanner.tof_bin_edges[0][0].edges
    header.scanner.tof_bin_edges[0][0] = petsird.BinEdges(edges=np.array([edges[0], edges[-1]], np.float32))
    scanner = PetsirdScanner(header.scanner)
    path = tmp_path / "nontof.petsird"
    with PetsirdWriter(path, header) as w:
        w.write_block({(0, 0): Coincidences(np.array([5, 9]), np.array([1, 2]), np.array([0, 0]))})
    assert not scanner.has_tof(0, 0)
    with pytest.raises(ValueError, match="no TOF information"):
        direct_petsird.deposit_file(path, GRID, VIEWS, xp=np, progress=False)
    with pytest.raises(ValueError, match="no TOF information"):
        direct_petsird.events_to_coincidences(simulated[0][0], scanner)


def test_events_outside_the_scanner_raise(tmp_path):
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    scanner = PetsirdScanner(header.scanner)
    n_bins = scanner.n_detection_bins[0]
    n_tof = scanner.tof_edges_mm(0, 0).size - 1
    # written by petsird's own writer, which does not check: a bin and a TOF index beyond the scanner
    for bins, tof, what in (([n_bins + 3, 1], 0, "detection_bins"), ([7, 1], n_tof, "tof_idx")):
        path = tmp_path / f"outside_{what}.petsird"
        with petsird.BinaryPETSIRDWriter(str(path)) as w:
            w.write_header(header)
            w.write_time_blocks([petsird.TimeBlock.EventTimeBlock(petsird.EventTimeBlock(
                prompt_events=[[[petsird.CoincidenceEvent(detection_bins=bins, tof_idx=tof)]]]))])
        with pytest.raises(ValueError, match=f"{what}.*outside"):
            read_all(path)
    with PetsirdWriter(tmp_path / "w.petsird", header) as w, pytest.raises(ValueError, match="outside the scanner"):
        w.write_block({(0, 0): Coincidences(np.array([n_bins]), np.array([0]), np.array([0]))})
    far = EventBatch(np.array([[0.0, 0.0, 0.0]], np.float32), np.array([[SCANNER.radius_mm, 0, 0]], np.float32),
                     np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="outside the scanner"):
        direct_petsird.events_to_coincidences(far, scanner)
    late = EventBatch(far.p2, -far.p2, np.array([1e5], np.float32))
    with pytest.raises(ValueError, match="outside the TOF bins"):
        direct_petsird.events_to_coincidences(late, scanner)


def test_bad_arguments_name_themselves(tmp_path):
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    with pytest.raises(TypeError, match="header"):
        PetsirdWriter(tmp_path / "x.petsird", "not a header")
    with pytest.raises(ValueError, match="crystal_mm"):
        direct_petsird.scanner_header(SCANNER, crystal_mm=-1.0)
    with pytest.raises(ValueError, match="crystal_efficiencies"):
        direct_petsird.scanner_header(SCANNER, crystal_efficiencies=np.ones((3, 3)))
    with PetsirdWriter(tmp_path / "x.petsird", header) as w:
        with pytest.raises(ValueError, match="prompts: module-type pair"):
            w.write_block({(0, 1): Coincidences.empty()})
    with pytest.raises(ValueError, match="kind"):
        with PetsirdReader(tmp_path / "x.petsird") as f:
            list(f.coincidences("singles"))
    with pytest.raises(ValueError, match="Coincidences"):
        Coincidences(np.arange(3), np.arange(4), np.arange(3))


# --- dual-head LOR histograms -------------------------------------------------------------------------

def test_dualhead_histogram_round_trip(tmp_path):
    from directpet.dualhead import DualHeadScanner
    from directpet.dualhead import petsird as dualhead_petsird
    from directpet.dualhead.monte_carlo import simulate as dualhead_simulate

    scanner = DualHeadScanner.small()
    activity = np.ones(scanner.grid.shape, np.float32)
    counts, stats = dualhead_simulate(scanner, activity, n_trues=3000, seed=3, backend="cpu")
    path = tmp_path / "dualhead.petsird"
    assert dualhead_petsird.write_counts(path, scanner, counts, block_events=1000) == int(counts.sum())
    np.testing.assert_array_equal(dualhead_petsird.read_counts(path, scanner), counts)
    # petsird's own reader sees the crystals at the heads' front-layer centres, one per count
    with petsird.BinaryPETSIRDReader(str(path)) as r:
        header = r.read_header()
        events = [e for tb in r.read_time_blocks() for e in tb.value.prompt_events[0][0]]
    assert len(events) == int(counts.sum())
    centres = PetsirdScanner(header.scanner).element_centres[0]
    n = scanner.n_crystals
    x = 0.5 * scanner.gap_mm + 0.5 * scanner.depth_mm
    np.testing.assert_allclose(centres[:n, 0], x, atol=1e-4)
    np.testing.assert_allclose(centres[n:, 0], -x, atol=1e-4)
    np.testing.assert_allclose(centres[:n, 1], np.repeat(scanner.crystal_y_mm(np.arange(scanner.n_y)), scanner.n_z), atol=1e-4)
    np.testing.assert_allclose(centres[:n, 2], np.tile(scanner.crystal_z_mm(np.arange(scanner.n_z)), scanner.n_y), atol=1e-4)
    assert all(e.detection_bins[0] >= n > e.detection_bins[1] for e in events)
    with pytest.raises(ValueError, match="another scanner"):
        dualhead_petsird.read_counts(path, DualHeadScanner.small(n_y=10))
    with pytest.raises(ValueError, match="counts"):
        dualhead_petsird.counts_to_coincidences(scanner, counts[:-1])
    with pytest.raises(ValueError, match="same head"):
        dualhead_petsird.coincidences_to_counts(scanner, Coincidences(np.array([3]), np.array([1]), np.array([0])))


# --- a background given per LOR (external scatter sinogram) ------------------------------------------

def _ring_scanner(tof=True):
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    if not tof:
        edges = header.scanner.tof_bin_edges[0][0].edges
        header.scanner.tof_bin_edges[0][0] = petsird.BinEdges(edges=np.array([edges[0], edges[-1]], np.float32))
    n_per_ring, n_rings = direct_petsird.ring_shape(header)
    return PetsirdScanner(header.scanner), n_per_ring, n_rings


def test_non_tof_lor_values_spread_evenly_over_the_fov_segment():
    scanner, n_per_ring, n_rings = _ring_scanner(tof=False)
    grid = ImageGrid((4, 60, 60), 8.0)
    ring = n_rings // 2
    # crystals at azimuth 0 and pi in one ring: the LOR is the x axis at that ring's z
    a, b = ring, (n_per_ring // 2) * n_rings + ring
    lors = Coincidences(np.array([b]), np.array([a]), np.array([0]))
    h = direct_petsird.lor_background(scanner, lors, [12.0], grid, VIEWS, fov_radius_mm=200.0)
    assert h.sum() == pytest.approx(12.0, rel=1e-5)
    profile = h.sum(axis=(0, 1, 2))                            # along x
    x = grid.centres(2)
    inside = np.abs(x) < 200.0 - 8.0
    assert np.all(profile[np.abs(x) > 200.0 + 8.0] == 0)
    np.testing.assert_allclose(profile[inside], 12.0 * 8.0 / 400.0, rtol=0.02)


def test_tof_lor_values_sit_at_their_tof_bins_most_likely_point():
    scanner, n_per_ring, n_rings = _ring_scanner(tof=True)
    grid = ImageGrid((4, 60, 60), 8.0)
    ring = n_rings // 2
    edges = scanner.tof_edges_mm(0, 0)
    centres = 0.5 * (edges[:-1] + edges[1:])
    k = int(np.argmin(np.abs(centres - 80.0)))                  # a bin about 80 mm from the middle
    p_a, p_b = ring, (n_per_ring // 2) * n_rings + ring       # x = +R and x = -R
    lors = Coincidences(np.array([p_b]), np.array([p_a]), np.array([k]))
    h = direct_petsird.lor_background(scanner, lors, [3.0], grid, VIEWS, fov_radius_mm=200.0)
    v, iz, iy, ix = np.unravel_index(np.argmax(h), h.shape)
    assert h.sum() == pytest.approx(3.0) and h.max() == pytest.approx(3.0)
    # photon 1 at x = -R arrives later for tof > 0: the point lies toward x = +R, tof mm from the middle
    assert abs(grid.centres(2)[ix] - centres[k]) <= 4.0 + 1e-3


def test_lor_values_are_conserved_for_lors_crossing_the_fov(rng):
    scanner, n_per_ring, n_rings = _ring_scanner(tof=False)
    grid = ImageGrid((34, 60, 60), 8.0)                     # covers the FOV and the detector length
    k1, k2 = rng.integers(0, n_per_ring, 300), rng.integers(0, n_per_ring, 300)
    ring = rng.integers(0, n_rings, 300)
    lors = Coincidences(k1 * n_rings + ring, k2 * n_rings + ring, np.zeros(300, np.uint32))
    values = rng.uniform(0.5, 2.0, 300)
    fov = 200.0
    h = direct_petsird.lor_background(scanner, lors, values, grid, VIEWS, fov_radius_mm=fov)
    # a chord between azimuths phi1, phi2 passes the axis at R |cos((phi1 - phi2) / 2)|
    distance = SCANNER.radius_mm * np.abs(np.cos(np.pi * (k1 - k2) / n_per_ring))
    crossing = (distance < fov) & (k1 != k2)
    assert h.sum() == pytest.approx(values[crossing].sum(), rel=1e-4)
    with pytest.raises(ValueError, match="values"):
        direct_petsird.lor_background(scanner, lors, values[:-1], grid, VIEWS, fov_radius_mm=fov)
    with pytest.raises(ValueError, match="fov_radius_mm"):
        direct_petsird.lor_background(scanner, lors, values, grid, VIEWS, fov_radius_mm=-1.0)


def test_a_writer_left_by_an_exception_leaves_a_truncated_file(tmp_path, rng):
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    scanner = PetsirdScanner(header.scanner)
    path = tmp_path / "aborted.petsird"
    with pytest.raises(RuntimeError, match="simulated failure"):
        with PetsirdWriter(path, header) as w:
            w.write_block({(0, 0): random_coincidences(scanner, (0, 0), 100, rng)})
            raise RuntimeError("simulated failure")
    with pytest.raises(ValueError, match="truncated"):
        read_all(path)
    w = PetsirdWriter(tmp_path / "twice.petsird", header)
    w.close()
    w.close()                                              # a second close does nothing
    assert read_all(tmp_path / "twice.petsird") == 0


def test_coincidences_refuse_what_a_uint32_cannot_hold():
    with pytest.raises(TypeError, match="bin0 must hold integers"):
        Coincidences(np.array([1.5]), np.array([1]), np.array([0]))
    with pytest.raises(ValueError, match="tof_idx must lie in"):
        Coincidences(np.array([1]), np.array([1]), np.array([-1]))
    with pytest.raises(ValueError, match="bin1 must lie in"):
        Coincidences(np.array([1]), np.array([2**32 + 5]), np.array([0]))


def test_an_impossible_event_count_is_a_corrupt_file(tmp_path, small_file):
    """A list that announces more coincidences than bytes remain is refused before any allocation."""
    data = bytearray(small_file.read_bytes())
    ours = _encode_varints(np.array([500], np.uint64)).tobytes()
    huge = _encode_varints(np.array([2**31], np.uint64)).tobytes()
    i = data.rindex(ours)                     # the second block's count of 500 events
    bad = tmp_path / "huge_count.petsird"
    bad.write_bytes(bytes(data[:i]) + huge + bytes(data[i + len(ours):]))
    with pytest.raises(ValueError, match="announced but only"):
        read_all(bad)


def test_other_bad_arguments(tmp_path, rng):
    scanner, n_per_ring, n_rings = _ring_scanner(tof=False)
    grid = ImageGrid((4, 20, 20), 8.0)
    with pytest.raises(ValueError, match="coincidences: detection_bins"):
        direct_petsird.lor_background(scanner, Coincidences(np.array([10**6]), np.array([0]), np.array([0])), [1.0],
                                      grid, VIEWS, fov_radius_mm=100.0)
    ok = Coincidences(np.array([5]), np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="chunk"):
        direct_petsird.lor_background(scanner, ok, [1.0], grid, VIEWS, fov_radius_mm=100.0, chunk=0)
    with pytest.raises(ValueError, match="crystal_efficiencies"):
        direct_petsird.scanner_header(SCANNER, crystal_mm=8.0, crystal_efficiencies=-np.ones((n_per_ring, n_rings)))
    from directpet.dualhead import DualHeadScanner
    from directpet.dualhead import petsird as dualhead_petsird
    small = DualHeadScanner.small()
    with pytest.raises(ValueError, match="block_events"):
        dualhead_petsird.write_counts(tmp_path / "d.petsird", small, np.zeros(small.n_lors, np.float32), block_events=0)
    header = direct_petsird.scanner_header(SCANNER, crystal_mm=8.0)
    header.scanner.delayed_event_policy = petsird.CoincidencePolicy.NONE
    with PetsirdWriter(tmp_path / "nodelayed.petsird", header) as w, pytest.raises(ValueError, match="policy is NONE"):
        w.write_block(delayeds={(0, 0): ok})
    with petsird.BinaryPETSIRDReader(str(tmp_path / "nodelayed.petsird")) as r:   # the standard's shape: no lists
        r.read_header()
        assert all(tb.value.delayed_events == [] for tb in r.read_time_blocks())


# --- petsird's private API that the codec relies on ---------------------------------------------------

def test_the_private_petsird_attributes_the_codec_reads_exist(small_file):
    """The pinned petsird (>=0.12,<0.13) has the private attributes io/petsird.py reads: the input
    stream's buffer state (for the truncated-file check) and the event block's field serializers
    (replaced by the array codec). If an update removes them, this test says so first."""
    from petsird import binary

    from directpet.io.petsird import STREAM_ATTRIBUTES, _bytes_left

    assert isinstance(binary.EventTimeBlockSerializer()._field_serializers, list)
    size = small_file.stat().st_size
    with open(small_file, "rb") as f:
        stream = _binary.CodedInputStream(f)
        assert all(hasattr(stream, name) for name in STREAM_ATTRIBUTES)
        assert _bytes_left(stream) == size
        stream.read_byte()                                    # fills the buffer; one byte consumed
        assert _bytes_left(stream) == size - 1


def test_a_size_check_that_cannot_run_warns_once(monkeypatch, small_file):
    """Without those attributes the truncated-file check cannot run: a RuntimeWarning (once per
    process) instead of switching itself off silently, and the file is still read whole."""
    from directpet.io import petsird as io_petsird

    monkeypatch.setattr(io_petsird, "_size_check_warned", False)

    class BareStream:                                          # what a petsird without them would hand over
        pass

    with pytest.warns(RuntimeWarning, match="truncated file"):
        assert io_petsird._bytes_left(BareStream()) is None
    assert io_petsird._bytes_left(BareStream()) is None        # once: warnings are errors in this suite
    monkeypatch.setattr(io_petsird, "_size_check_warned", False)
    real = io_petsird._bytes_left
    monkeypatch.setattr(io_petsird, "_bytes_left", lambda stream: real(BareStream()))
    with pytest.warns(RuntimeWarning, match="not checked against the file size"):
        assert read_all(small_file) == 1000
