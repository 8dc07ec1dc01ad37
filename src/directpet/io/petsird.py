"""PETSIRD list-mode files, read and written at NumPy speed (the ETSI PET Raw Data standard).

PETSIRD (package ``petsird`` on PyPI, built with yardl) stores a header -- the scanner's detecting
elements as replicated boxes, TOF bin edges, energy windows, detection efficiencies -- followed by a
stream of time blocks whose coincidences are ``(detection_bins[2], tof_idx)`` records. This module
keeps the standard's own code for everything structural (magic bytes, format version, schema,
header, the time-block union) and replaces only the per-event (de)serialisation, which the
``petsird`` package does with one Python object per event (microseconds each, hours for the
10^8 - 10^9 events of a clinical file), by vectorised varint coding of whole event lists.

Conventions of the standard that matter here (petsird 0.12):

* a detection bin is ``energy_idx + (element_idx + module_idx * n_elements) * n_energy_bins``;
* TOF bin edges are in mm and bin ``(t1 - t2) * c / 2``, ``t1`` the arrival time at
  ``detection_bins[0]``: negative means the first detector fired first;
* the events of module types ``(t0, t1)`` (``t1 <= t0``) sit in ``prompt_events[t0][t1]`` with
  ``detection_bins[0]`` of type ``t0``; within one type the bins are ordered
  ``detection_bins[0] >= detection_bins[1]`` (the writer swaps and mirrors the TOF bin to keep this).

Positions: a detecting element is represented by its box's centre (the mean of the 8 corners)
after the element and module transforms, in the gantry coordinate system (mm). Only the binary
encoding is supported (not NDJSON).

Family adapters build on this: :mod:`directpet.direct.petsird` (TOF events to and from
:class:`~directpet.direct.EventBatch`) and :mod:`directpet.dualhead.petsird` (LOR histograms).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Dict, Iterator, Optional, Tuple

import numpy as np

from .._checks import array_module, check_path, integer, to_numpy
from .._core import decode_varints, encode_varints, varint_list_end

#: the PETSIRD release whose schema this module reads and writes
SUPPORTED_VERSION = "0.12"


def _petsird():
    """Import ``petsird`` (optional dependency) or say how to get it."""
    try:
        import petsird
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("PETSIRD support needs the 'petsird' package: pip install 'directpet[io]'") from err
    from petsird.version import __version__ as version
    if not version.startswith(SUPPORTED_VERSION + "."):
        raise ImportError(f"directpet reads PETSIRD {SUPPORTED_VERSION}.x; petsird {version} is "
                          f"installed (pip install 'petsird=={SUPPORTED_VERSION}.*')")
    return petsird


# --- event lists as arrays --------------------------------------------------------------------------

@dataclass
class Coincidences:
    """One PETSIRD list of coincidences as arrays (all ``(n,)`` uint32).

    ``bin0`` / ``bin1`` are ``detection_bins[0]`` / ``[1]`` and ``tof_idx`` the TOF bin, for one pair
    of module types. PETSIRD's writer needs ``bin0 >= bin1`` within one module type
    (:meth:`ordered` makes it so).
    """

    bin0: np.ndarray
    bin1: np.ndarray
    tof_idx: np.ndarray

    def __post_init__(self):
        for name in ("bin0", "bin1", "tof_idx"):
            a = np.asarray(getattr(self, name))
            if a.dtype.kind not in "iu":
                raise TypeError(f"Coincidences: {name} must hold integers, got dtype {a.dtype}")
            if a.size and (int(a.min()) < 0 or int(a.max()) >= 2**32):
                raise ValueError(f"Coincidences: {name} must lie in [0, 2**32), got {int(a.min())}..{int(a.max())}")
        arrays = [np.ascontiguousarray(a, dtype=np.uint32) for a in (self.bin0, self.bin1, self.tof_idx)]
        if any(a.ndim != 1 or a.shape != arrays[0].shape for a in arrays):
            raise ValueError("Coincidences: bin0, bin1 and tof_idx must be 1-D arrays of one length, got "
                             f"{[np.shape(a) for a in (self.bin0, self.bin1, self.tof_idx)]}")
        self.bin0, self.bin1, self.tof_idx = arrays

    def __len__(self) -> int:
        return int(self.bin0.shape[0])

    @classmethod
    def empty(cls) -> "Coincidences":
        """No coincidences (three empty uint32 arrays)."""
        z = np.zeros(0, np.uint32)
        return cls(z, z, z)

    def ordered(self, n_tof_bins: int) -> "Coincidences":
        """The same events with ``bin0 >= bin1`` (swapped pairs get the mirrored TOF bin
        ``n_tof_bins - 1 - tof_idx``). ``n_tof_bins``: the TOF bins of the events' module-type pair
        (1 without TOF), an integer in [1, 2**32] above every ``tof_idx``."""
        n_tof_bins = integer("n_tof_bins", n_tof_bins, lo=1, hi=2**32)
        if len(self) and int(self.tof_idx.max()) >= n_tof_bins:
            raise ValueError(f"n_tof_bins: {n_tof_bins} TOF bins cannot hold the events' tof_idx up to "
                             f"{int(self.tof_idx.max())}")
        swap = self.bin0 < self.bin1
        if not swap.any():
            return self
        return Coincidences(np.where(swap, self.bin1, self.bin0), np.where(swap, self.bin0, self.bin1),
                            np.where(swap, n_tof_bins - 1 - self.tof_idx, self.tof_idx))


def _encode_varints(values) -> np.ndarray:
    """LEB128 (yardl's unsigned varint) bytes of 32-bit ``values``, in order, as uint8 (compiled)."""
    v = np.asarray(values).ravel()
    if v.size and (v.min() < 0 or v.max() >= 2**32):
        raise ValueError("varints: expected values in [0, 2**32)")
    return encode_varints(np.ascontiguousarray(v, dtype=np.uint32))


def _event_bytes(events: Coincidences) -> np.ndarray:
    # A CoincidenceEvent is three varints: detection_bins (a fixed vector of 2) and tof_idx.
    return _encode_varints(np.stack([events.bin0, events.bin1, events.tof_idx], axis=1))


#: The private attributes of petsird's ``CodedInputStream`` (petsird 0.12) that :func:`_bytes_left`
#: reads; tests/test_io_petsird.py checks that the pinned petsird still has them.
STREAM_ATTRIBUTES = ("_stream", "_last_read_count", "_offset")

_size_check_warned = False


def _bytes_left(stream) -> Optional[int]:
    """Bytes of the file not yet consumed by a yardl input stream, or None when it cannot tell
    (then a RuntimeWarning, once per process: the check of announced event counts against the
    file size is off, and a truncated file is found only when its events run out)."""
    try:
        raw = stream._stream                     # the BufferedReader under petsird's CodedInputStream
        buffered = stream._last_read_count - stream._offset
        return os.fstat(raw.fileno()).st_size - raw.tell() + buffered
    except (AttributeError, OSError, ValueError) as err:
        global _size_check_warned
        if not _size_check_warned:
            _size_check_warned = True
            warnings.warn(f"PETSIRD: cannot measure the bytes left in the file ({type(err).__name__}: {err}; "
                          f"directpet reads petsird {SUPPORTED_VERSION}'s private stream attributes "
                          f"{', '.join(STREAM_ATTRIBUTES)}), so event counts are not checked against the file "
                          "size: a truncated file is reported only when its events run out", RuntimeWarning,
                          stacklevel=2)
        return None


def _check_list_size(stream, n: int) -> None:
    """ValueError when a list announces more coincidences than the file's remaining bytes can hold
    (every event takes at least 3 bytes)."""
    left = _bytes_left(stream)
    if left is not None and 3 * n > left:
        raise ValueError(f"event list: {n} coincidences announced but only {left} bytes remain "
                         "(truncated or corrupt file)")


#: The attribute of a yardl input stream holding the list sink of PetsirdReader.stream_lists.
_LIST_SINK = "_directpet_list_sink"


@dataclass(frozen=True)
class EventList:
    """Where one list of coincidences lies in a PETSIRD file, for a reader that decodes it itself
    (:meth:`PetsirdReader.stream_lists`): ``n_events`` records of three varints
    (``detection_bins[0]``, ``detection_bins[1]``, ``tof_idx``) from byte ``offset`` of the open file
    descriptor ``fd``."""

    kind: str              # 'prompts' or 'delayeds'
    pair: Tuple[int, int]  # module types (t0, t1), t1 <= t0
    n_events: int
    fd: int
    offset: int


def list_end(event_list: EventList) -> int:
    """The byte after ``event_list`` in its file (its varints counted, not decoded); EOFError when the
    file ends inside it."""
    end, complete = varint_list_end(event_list.fd, event_list.offset, event_list.n_events, 3)
    if not complete:
        raise EOFError("the file ends inside a list of coincidences")
    return end


def _read_events(stream, n: int) -> Coincidences:
    """Read ``n`` CoincidenceEvent records from a yardl input stream without reading past them.

    Every varint is at least one byte, so reading as many bytes as varints are still open never
    passes the end of the list; the bytes of a varint cut by a read are carried to the next round.
    """
    if n == 0:
        return Coincidences.empty()
    rows = np.empty(3 * n, np.uint32)
    done = 0
    carry = b""
    while done < 3 * n:
        try:
            chunk = stream.read_view(3 * n - done)
        except EOFError as err:
            raise EOFError("the file ends inside a list of coincidences") from err
        # the read buffer itself when nothing is carried (no copy of the event bytes); decoded in place,
        # over all OpenMP threads for a long list
        data = np.frombuffer(chunk, np.uint8) if not carry else np.frombuffer(carry + bytes(chunk), np.uint8)
        values, used = decode_varints(data, 3 * n - done)
        rows[done:done + values.size] = values
        done += values.size
        carry = data[used:].tobytes()
        if len(carry) > 5:
            raise ValueError("event list: a varint longer than 5 bytes (not a 32-bit value; corrupt file)")
    rows = rows.reshape(n, 3)
    return Coincidences(rows[:, 0], rows[:, 1], rows[:, 2])


def _protocol_classes():
    """petsird's binary reader and writer with the event lists replaced by the array codec."""
    petsird = _petsird()
    from petsird import _binary, binary

    class CoincidenceListSerializer(_binary.VectorSerializer):
        def __init__(self):
            super().__init__(binary.CoincidenceEventSerializer())

        def write(self, stream, value):
            if not isinstance(value, Coincidences):
                return super().write(stream, value)
            stream.write_unsigned_varint(len(value))
            if len(value):
                stream.write_bytes(_event_bytes(value).tobytes())

        def read(self, stream):
            n = stream.read_unsigned_varint()
            _check_list_size(stream, n)
            return _read_events(stream, n)

    class EventTimeBlockArraySerializer(binary.EventTimeBlockSerializer):
        # petsird's own record serializer (field order, read/write), its two coincidence fields swapped.
        def __init__(self):
            super().__init__()
            if not isinstance(getattr(self, "_field_serializers", None), list):
                raise ImportError(f"directpet's PETSIRD event codec needs petsird {SUPPORTED_VERSION}'s private "
                                  "EventTimeBlockSerializer._field_serializers, which this petsird does not have "
                                  f"(pip install 'petsird=={SUPPORTED_VERSION}.*')")
            lists = {"prompt_events": PairListsSerializer("prompts"), "delayed_events": PairListsSerializer("delayeds")}
            self._field_serializers = [(name, lists.get(name, ser)) for name, ser in self._field_serializers]

    class PairListsSerializer(_binary.VectorSerializer):
        # The coincidence lists of one kind, per module-type pair (t0, t1), t1 <= t0: a vector of vectors.
        # Read with a list sink installed on the stream (PetsirdReader.stream_lists), each list is handed
        # to the sink instead of being decoded here.
        def __init__(self, kind):
            super().__init__(_binary.VectorSerializer(CoincidenceListSerializer()))
            self.kind = kind

        def read(self, stream):
            sink = getattr(stream, _LIST_SINK, None)
            if sink is None:
                return super().read(stream)
            rows = []
            for t0 in range(stream.read_unsigned_varint()):
                row = []
                for t1 in range(stream.read_unsigned_varint()):
                    n = stream.read_unsigned_varint()
                    _check_list_size(stream, n)
                    row.append(sink(self.kind, (t0, t1), n))
                rows.append(row)
            return rows

    T = petsird.TimeBlock
    union = _binary.UnionSerializer(T, [
        (T.EventTimeBlock, EventTimeBlockArraySerializer()),
        (T.ExternalSignalTimeBlock, binary.ExternalSignalTimeBlockSerializer()),
        (T.BedMovementTimeBlock, binary.BedMovementTimeBlockSerializer()),
        (T.GantryMovementTimeBlock, binary.GantryMovementTimeBlockSerializer()),
        (T.DeadTimeTimeBlock, binary.DeadTimeTimeBlockSerializer()),
        (T.SinglesHistogramTimeBlock, binary.SinglesHistogramTimeBlockSerializer())])
    blocks = _binary.StreamSerializer(union)

    class ArrayReader(petsird.BinaryPETSIRDReader):
        def _read_time_blocks(self):
            return blocks.read(self._stream)

    class ArrayWriter(petsird.BinaryPETSIRDWriter):
        def _write_time_blocks(self, value):
            blocks.write(self._stream, value)

    return ArrayReader, ArrayWriter


_CODEC = None


def _codec():
    """(reader class, writer class): petsird's binary protocol with array event lists (built once)."""
    global _CODEC
    if _CODEC is None:
        _CODEC = _protocol_classes()
    return _CODEC


# --- the scanner a header describes -----------------------------------------------------------------

def _transform(t) -> np.ndarray:
    return np.vstack([np.asarray(t.matrix, np.float64), [0.0, 0.0, 0.0, 1.0]])


class PetsirdScanner:
    """What a PETSIRD header says about detection bins, in arrays.

    Attributes
    ----------
    n_types : number of module types.
    element_centres : per module type, ``(n_modules * n_elements, 3)`` float64 (x, y, z) mm, the box
        centres of its detecting elements in module-major order.
    n_energy_bins : per module type, the event energy bins.
    n_detection_bins : per module type, ``n_modules * n_elements * n_energy_bins``.
    """

    def __init__(self, scanner_information):
        info = scanner_information
        petsird = _petsird()
        if not isinstance(info, petsird.ScannerInformation):
            hint = " (pass header.scanner)" if isinstance(info, petsird.Header) else ""
            raise TypeError(f"scanner_information: expected a petsird.ScannerInformation{hint}, got "
                            f"{type(info).__name__}")
        self.info = info
        modules = info.scanner_geometry.replicated_modules
        self.n_types = len(modules)
        if self.n_types == 0:
            raise ValueError("header: the scanner geometry has no detector modules")
        if len(info.event_energy_bin_edges) != self.n_types:
            raise ValueError(f"header: event_energy_bin_edges has {len(info.event_energy_bin_edges)} entries "
                             f"for {self.n_types} module types")
        self.element_centres, self.n_energy_bins, self.n_elements, self.n_modules = [], [], [], []
        for t, rep in enumerate(modules):
            box = np.array([c.c for c in rep.object.detecting_elements.object.shape.corners], np.float64)
            if box.shape != (8, 3):
                raise ValueError(f"header: module type {t}: a detecting element is not a box of 8 corners")
            centre = np.append(box.mean(axis=0), 1.0)
            el = np.stack([_transform(e) @ centre for e in rep.object.detecting_elements.transforms])
            mods = np.stack([_transform(m) for m in rep.transforms])
            self.element_centres.append(np.einsum("mij,ej->mei", mods, el)[..., :3].reshape(-1, 3))
            self.n_elements.append(len(el))
            self.n_modules.append(len(mods))
            self.n_energy_bins.append(int(info.event_energy_bin_edges[t].number_of_bins()))
        self.n_detection_bins = [c.shape[0] * e for c, e in zip(self.element_centres, self.n_energy_bins)]

    # TOF ------------------------------------------------------------------------------------------
    def tof_edges_mm(self, t0: int, t1: int) -> np.ndarray:
        """TOF bin edges (mm of ``(t1 - t2) c / 2``) of module types ``(t0, t1)`` (either order);
        empty if absent."""
        t0, t1 = self.module_type(t0, "t0"), self.module_type(t1, "t1")
        t0, t1 = max(t0, t1), min(t0, t1)
        table = self.info.tof_bin_edges
        if len(table) <= t0 or len(table[t0]) <= t1:
            return np.zeros(0)
        return np.asarray(table[t0][t1].edges, np.float64)

    def has_tof(self, t0: int, t1: int) -> bool:
        """Whether events of this pair carry position along the LOR (more than one TOF bin)."""
        return self.tof_edges_mm(t0, t1).size > 2

    def tof_resolution_mm(self, t0: int, t1: int) -> float:
        """The TOF resolution (FWHM, mm along the LOR) of module types ``t0`` and ``t1`` from the header."""
        t0, t1 = self.module_type(t0, "t0"), self.module_type(t1, "t1")
        t0, t1 = max(t0, t1), min(t0, t1)
        table = self.info.tof_resolution
        return float(table[t0][t1]) if len(table) > t0 and len(table[t0]) > t1 else float("nan")

    # indices ----------------------------------------------------------------------------------------
    def module_type(self, t, name: str = "module_type") -> int:
        """t as a module-type index in [0, n_types), else an error naming ``name``."""
        return integer(name, t, lo=0, hi=self.n_types - 1)

    def module_pair(self, pair, name: str = "pair") -> Tuple[int, int]:
        """pair as two module-type indices ``(t0, t1)``, else an error naming ``name``."""
        if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise TypeError(f"{name}: expected two module-type indices (t0, t1), got {pair!r}")
        return self.module_type(pair[0], name), self.module_type(pair[1], name)

    def detection_bins(self, bins, module_type: int, name: str = "bins"):
        """bins as int64 detection bins of ``module_type`` (NumPy or CuPy, kept where they live):
        integers in [0, n_detection_bins), else an error naming ``name``."""
        xp = array_module(bins)
        b = xp.asarray(bins) if bins is not None and not isinstance(bins, (str, bytes)) else None
        if b is None or b.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected integer detection bins, got {type(bins).__name__}"
                            f"{'' if b is None else f' (dtype {b.dtype})'}")
        n = self.n_detection_bins[module_type]
        if b.size and (int(b.min()) < 0 or int(b.max()) >= n):
            raise ValueError(f"{name}: expected detection bins in [0, {n}) (module type {module_type}), got "
                             f"{int(b.min())}..{int(b.max())}")
        return b.astype(xp.int64)

    # positions ------------------------------------------------------------------------------------
    def positions(self, module_type: int, bins: np.ndarray) -> np.ndarray:
        """(n, 3) float64 element centres (mm) of detection ``bins`` of ``module_type``."""
        module_type = self.module_type(module_type)
        bins = to_numpy(self.detection_bins(bins, module_type))
        return self.element_centres[module_type][bins // self.n_energy_bins[module_type]]

    def check(self, pair: Tuple[int, int], events: Coincidences, where: str = "events") -> None:
        """Raise ValueError when events name detection bins or TOF bins the scanner does not have."""
        if not isinstance(events, Coincidences):
            raise TypeError(f"events: expected Coincidences, got {type(events).__name__}")
        if len(events):
            self.check_largest(pair, int(events.bin0.max()), int(events.bin1.max()), int(events.tof_idx.max()), where)

    def check_largest(self, pair: Tuple[int, int], bin0: int, bin1: int, tof_idx: int, where: str = "events") -> None:
        """:meth:`check` from the largest ``detection_bins[0]``, ``detection_bins[1]`` and ``tof_idx``
        of some events of module types ``pair``."""
        t0, t1 = self.module_pair(pair)
        for name, largest, t in (("detection_bins[0]", bin0, t0), ("detection_bins[1]", bin1, t1)):
            if largest >= self.n_detection_bins[t]:
                raise ValueError(f"{where}: {name} = {largest} is outside the scanner (module type {t} "
                                 f"has {self.n_detection_bins[t]} detection bins)")
        n_tof = max(self.tof_edges_mm(t0, t1).size - 1, 1)
        if tof_idx >= n_tof:
            raise ValueError(f"{where}: tof_idx = {tof_idx} is outside the {n_tof} TOF bins of module types {pair}")

    # efficiencies ---------------------------------------------------------------------------------
    def pair_efficiency(self, pair: Tuple[int, int], bin0, bin1, *, calibration: bool = True):
        """Coincidence detection efficiencies (float64, shape of the bins) from the header's
        component model: calibration x bin efficiencies x module-pair efficiencies (a missing
        component counts as 1; module pairs with SGID < 0 are not in coincidence: 0). Within one
        module type the bins must be in PETSIRD's order, ``bin0 >= bin1``. Bins may be NumPy or CuPy
        arrays; the result lives with them (the header's tables are copied there once)."""
        xp = array_module(bin0)
        pair = self.module_pair(pair)
        b0, b1 = self.detection_bins(bin0, pair[0], "bin0"), xp.asarray(self.detection_bins(bin1, pair[1], "bin1"))
        factor, per_bin, module_pairs = self.efficiency_tables(pair, xp)
        out = xp.full(xp.broadcast(b0, b1).shape, factor if calibration else 1.0)
        if per_bin is not None:
            out *= per_bin[0][b0] * per_bin[1][b1]
        if module_pairs is not None:
            sgid_table, values, per_module = module_pairs
            sgid = sgid_table[b0 // per_module[0], b1 // per_module[1]]
            out *= xp.where(sgid >= 0, values[xp.maximum(sgid, 0), b0 % per_module[0], b1 % per_module[1]], 0.0)
        return out

    def efficiency_tables(self, pair, xp=np):
        """The header's component model of a module-type pair, as :meth:`pair_efficiency` evaluates it:
        (calibration factor, the per-bin efficiencies of both types (float64 ``xp`` arrays) or None,
        (SGID table, module-pair values, bins per module) or None); built once per pair and namespace."""
        cache = self.__dict__.setdefault("_efficiency_cache", {})
        key = (pair, xp.__name__)
        if key in cache:
            return cache[key]
        t0, t1 = pair
        eff = self.info.detection_efficiencies
        factor, per_bin, module_pairs = 1.0, None, None
        if eff is not None:
            factor = float(eff.calibration_factor)
            if eff.detection_bin_efficiencies:
                per_bin = tuple(xp.asarray(np.asarray(eff.detection_bin_efficiencies[t], np.float64)) for t in (t0, t1))
            vectors = eff.module_pair_efficiencies_vectors
            if vectors:
                table = np.full((self.n_modules[t0], self.n_modules[t1]), -1, np.int64)
                for i, row in enumerate(eff.module_pair_sgidlut[t0][t1]):
                    table[i, :len(row)] = row
                if t0 == t1:                              # lower triangular: sgid[i][j], j <= i
                    table = np.where(np.tril(np.ones_like(table, bool)), table, table.T)
                values = np.stack([np.asarray(v.values, np.float64) for v in vectors[t0][t1]])
                module_pairs = (xp.asarray(table), xp.asarray(values),
                                tuple(self.n_elements[t] * self.n_energy_bins[t] for t in (t0, t1)))
        cache[key] = (factor, per_bin, module_pairs)
        return cache[key]


def single_type_header(model_name: str, crystal_mm, element_offsets_mm, module_rotations, module_offsets_mm, *,
                       tof_edges_mm, tof_fwhm_mm: float, energy_window_kev=(435.0, 650.0),
                       bin_efficiencies=None):
    """A ``petsird.Header`` for a scanner of one module type, as directpet's simulators describe theirs.

    Parameters
    ----------
    model_name : the scanner's name.
    crystal_mm : (3,) box size (mm) of a detecting element along the module's x, y, z (centred on
        its element offset).
    element_offsets_mm : (n_elements, 3) element centres in the module frame (mm).
    module_rotations, module_offsets_mm : (n_modules, 3, 3) and (n_modules, 3): module m maps a
        module-frame point q to ``R_m q + o_m`` in gantry coordinates (mm).
    tof_edges_mm : increasing TOF bin edges in mm of ``(t1 - t2) c / 2``; two edges (one bin) for a
        non-TOF scanner, spanning the coincidence window.
    tof_fwhm_mm : coincidence timing resolution (FWHM) in mm.
    energy_window_kev : the one event energy window (keV).
    bin_efficiencies : optional (n_modules * n_elements,) detection-bin efficiencies (module-major).
    """
    petsird = _petsird()
    half = 0.5 * np.asarray(crystal_mm, np.float64)
    corners = [petsird.Coordinate(c=np.array(c, np.float32))
               for c in np.array(np.meshgrid(*zip(-half, half), indexing="ij")).reshape(3, -1).T]

    def rigid(rotation, offset):
        return petsird.RigidTransformation(matrix=np.hstack([rotation, np.reshape(offset, (3, 1))]).astype(np.float32))

    elements = petsird.ReplicatedBoxSolidVolume(
        object=petsird.BoxSolidVolume(shape=petsird.BoxShape(corners=corners), material_id=0),
        transforms=[rigid(np.eye(3), o) for o in np.asarray(element_offsets_mm, np.float64)])
    modules = petsird.ReplicatedDetectorModule(
        object=petsird.DetectorModule(detecting_elements=elements),
        transforms=[rigid(r, o) for r, o in zip(np.asarray(module_rotations, np.float64),
                                                np.asarray(module_offsets_mm, np.float64))])
    edges = np.asarray(tof_edges_mm, np.float32)
    if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"tof_edges_mm: expected at least two increasing edges, got {tof_edges_mm!r}")
    efficiencies = petsird.DetectionEfficiencies(calibration_factor=1.0)
    if bin_efficiencies is not None:
        eff = np.asarray(bin_efficiencies, np.float64).ravel()
        n_bins = len(modules.transforms) * len(elements.transforms)
        if eff.size != n_bins or not np.all(np.isfinite(eff)) or np.any(eff < 0):
            raise ValueError(f"bin_efficiencies: expected {n_bins} finite values >= 0, got {eff.size}")
        efficiencies.detection_bin_efficiencies = [[float(e) for e in eff]]
    scanner = petsird.ScannerInformation(
        model_name=model_name, scanner_geometry=petsird.ScannerGeometry(replicated_modules=[modules]),
        tof_bin_edges=[[petsird.BinEdges(edges=edges)]], tof_resolution=[[float(tof_fwhm_mm)]],
        event_energy_bin_edges=[petsird.BinEdges(edges=np.asarray(energy_window_kev, np.float32))],
        energy_resolution_at_511=[0.1], collimator_type="NONE",
        prompt_event_policy=petsird.CoincidencePolicy.REJECT_HIGHER_MULTIPLES,
        delayed_event_policy=petsird.CoincidencePolicy.REJECT_HIGHER_MULTIPLES,
        detection_efficiencies=efficiencies)
    return petsird.Header(scanner=scanner)


def nearest_elements(scanner: PetsirdScanner, points, module_type: int = 0, *, max_distance_mm: float) -> np.ndarray:
    """Detection bins (energy bin 0) of the elements whose centres are nearest to ``points`` ((n, 3) mm).

    ``scipy.spatial.cKDTree`` over the element centres; a point farther than ``max_distance_mm``
    from every element raises ValueError (an event outside the scanner).
    """
    from scipy.spatial import cKDTree

    cache = scanner.__dict__.setdefault("_trees", {})
    if module_type not in cache:
        cache[module_type] = cKDTree(scanner.element_centres[module_type])
    dist, idx = cache[module_type].query(np.asarray(points, np.float64), workers=-1)
    if dist.size and float(dist.max()) > max_distance_mm:
        raise ValueError(f"events: a detection point {float(dist.max()):.2f} mm from the nearest detecting element "
                         f"(more than {max_distance_mm} mm): outside the scanner")
    return (idx * scanner.n_energy_bins[module_type]).astype(np.uint32)


# --- reading ------------------------------------------------------------------------------------------

def _bad_file(path, what) -> ValueError:
    """A ValueError naming the file, marked so that time_blocks passes it on unwrapped."""
    err = ValueError(f"path: {os.fspath(path)!r} {what}")
    err.names_the_file = True
    return err


class PetsirdReader:
    """Stream a PETSIRD binary file: the header at once, the coincidences chunk by chunk.

    Use as a context manager::

        with PetsirdReader("scan.petsird") as f:
            scanner = f.scanner                     # PetsirdScanner
            for pair, events in f.coincidences("prompts"):
                ...                                 # Coincidences of module types `pair`

    Bad files raise ``ValueError`` naming the path: not a yardl file, another PETSIRD version
    (schema), a truncated stream (a file must end with the stream's end mark: never a silently
    partial result), events outside the scanner.
    """

    def __init__(self, path):
        self.path = check_path(path, "path")
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"path: no such file {self.path!r}")
        self._file = open(self.path, "rb")
        try:
            # skip_completed_check: stopping early is the caller's choice; truncation is found while reading.
            self._reader = _codec()[0](self._file, skip_completed_check=True)
            self.header = self._reader.read_header()
            self.scanner = PetsirdScanner(self.header.scanner)
        except RuntimeError as err:
            self._file.close()
            text = str(err)
            if "schema" in text:
                raise _bad_file(path, f"is not a PETSIRD {SUPPORTED_VERSION} file (its schema differs: "
                                      "another version of the standard)") from err
            raise _bad_file(path, f"is not a PETSIRD binary file ({text})") from err
        except (EOFError, BufferError, ValueError, IndexError, UnicodeDecodeError) as err:
            self._file.close()
            raise _bad_file(path, f"is not a PETSIRD binary file or has a truncated, corrupt or unusable header "
                                  f"({type(err).__name__}: {err})") from err
        except BaseException:
            self._file.close()
            raise
        self._blocks_read = False

    def __enter__(self) -> "PetsirdReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the stream and the file (the context manager calls it)."""
        self._reader.close()
        self._file.close()

    def time_blocks(self) -> Iterator[object]:
        """Every time block in file order (event blocks carry :class:`Coincidences` lists). Once."""
        if self._blocks_read:
            raise RuntimeError("time_blocks: a PetsirdReader streams its file once; open it again")
        self._blocks_read = True
        stream = self._reader.read_time_blocks()
        try:
            yield from stream
        except (EOFError, BufferError) as err:
            # petsird 0.12 refills its buffer with a one-byte-longer view once the file is exhausted,
            # which raises BufferError instead of EOFError: both mean the file ended early.
            raise _bad_file(self.path, "is truncated: the stream of time blocks ends without its end mark") from err
        except (ValueError, IndexError) as err:
            if getattr(err, "names_the_file", False):       # already says which file and what
                raise
            raise _bad_file(self.path, f"has a corrupt time block ({err})") from err

    def _check_pair(self, kind: str, t0: int, t1: int) -> None:
        if t1 > t0 or t0 >= self.scanner.n_types:
            raise _bad_file(self.path, f"has {kind} of module types ({t0}, {t1}), which the scanner's "
                                       f"{self.scanner.n_types} types do not have")

    def stream_lists(self, consume, *, kinds=("prompts", "delayeds"), progress: bool = False) -> None:
        """Hand every non-empty coincidence list of ``kinds`` to ``consume(EventList) -> end offset``
        (the byte after the list), in file order, without decoding it here: for readers that decode
        the varints themselves (the compiled deposition of :mod:`directpet.direct.petsird`). Lists of
        other kinds are skipped (their varints counted, not decoded). ``consume`` raises EOFError
        when the file ends inside its list. Once per reader, as :meth:`time_blocks`."""
        from tqdm.auto import tqdm

        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        for kind in kinds:
            if kind not in ("prompts", "delayeds"):
                raise ValueError(f"kinds: expected 'prompts' and/or 'delayeds', got {kind!r}")
        stream = self._reader._stream
        raw = stream._stream                        # the BufferedReader under the yardl stream
        fd = raw.fileno()

        def sink(kind, pair, n):
            self._check_pair(kind, *pair)
            if n == 0:
                return Coincidences.empty()
            # the list starts where the yardl stream has read to: the file position less its buffered bytes
            offset = raw.tell() - (stream._last_read_count - stream._offset)
            where = EventList(kind, pair, int(n), fd, int(offset))
            end = consume(where) if kind in kinds else list_end(where)
            raw.seek(end)                           # go on after the list with an empty buffer
            stream._offset = stream._last_read_count = 0
            return Coincidences.empty()

        setattr(stream, _LIST_SINK, sink)
        size = os.path.getsize(self.path)
        try:
            with tqdm(total=size, disable=not progress, unit="B", unit_scale=True,
                      desc=f"reading {' and '.join(kinds)}") as bar:
                for _ in self.time_blocks():
                    bar.n = min(size, raw.tell())
                    bar.refresh()
        finally:
            delattr(stream, _LIST_SINK)

    def coincidences(self, kind: str = "prompts", *, progress: bool = False) -> Iterator[Tuple[Tuple[int, int], Coincidences]]:
        """Yield ``((t0, t1), Coincidences)`` of every event block's prompts or delayeds, checked
        against the scanner. ``progress`` shows a tqdm bar of bytes read."""
        from tqdm.auto import tqdm

        field = {"prompts": "prompt_events", "delayeds": "delayed_events"}.get(kind)
        if field is None:
            raise ValueError(f"kind: expected 'prompts' or 'delayeds', got {kind!r}")
        petsird = _petsird()
        size = os.path.getsize(self.path)
        with tqdm(total=size, disable=not progress, unit="B", unit_scale=True, desc=f"reading {kind}") as bar:
            for block in self.time_blocks():
                if isinstance(block, petsird.TimeBlock.EventTimeBlock):
                    lists = getattr(block.value, field)
                    for t0, row in enumerate(lists):
                        for t1, events in enumerate(row):
                            self._check_pair(kind, t0, t1)
                            if len(events):
                                self.scanner.check((t0, t1), events, where=f"path {self.path!r}")
                                yield (t0, t1), events
                bar.n = min(size, self._file.tell())
                bar.refresh()


# --- writing ------------------------------------------------------------------------------------------

class PetsirdWriter:
    """Write a PETSIRD binary file: a header, then one event time block per :meth:`write_block`.

    ``with PetsirdWriter(path, header) as w: w.write_block({(0, 0): prompts}, delayeds=...)``.
    Blocks get consecutive ``block_ms`` intervals (simulated data have no time structure).
    Closing writes the stream's end mark; a file whose writer was not closed is truncated.
    """

    def __init__(self, path, header, *, block_ms: int = 1):
        petsird = _petsird()
        if not isinstance(header, petsird.Header):
            raise TypeError(f"header: expected a petsird.Header, got {type(header).__name__}")
        if not isinstance(block_ms, (int, np.integer)) or block_ms < 1:
            raise ValueError(f"block_ms: expected an integer >= 1, got {block_ms!r}")
        self.path, self.block_ms, self.header = check_path(path, "path", writing=True), int(block_ms), header
        self.scanner = PetsirdScanner(header.scanner)
        self._writer = _codec()[1](self.path)
        try:
            self._writer.write_header(header)
        except BaseException:
            self._writer._close()
            raise
        self._closed = False
        self._n_blocks = 0
        self.n_written = {"prompts": 0, "delayeds": 0}

    def __enter__(self) -> "PetsirdWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Close without the stream's end mark: what was written reads back as a truncated file
        (an error), never as a complete one."""
        if not self._closed:
            self._closed = True
            self._writer._close()

    def _lists(self, events: Optional[Dict[Tuple[int, int], Coincidences]], kind: str):
        petsird = _petsird()
        policy = getattr(self.header.scanner, "prompt_event_policy" if kind == "prompts" else "delayed_event_policy")
        if policy == petsird.CoincidencePolicy.NONE:     # the standard then wants no lists at all
            if any(len(ev) for ev in (events or {}).values()):
                raise ValueError(f"{kind}: the header's {kind[:-1]}_event_policy is NONE (no {kind} recorded)")
            return []
        n = self.scanner.n_types
        lists = [[Coincidences.empty() for _ in range(t0 + 1)] for t0 in range(n)]
        for (t0, t1), ev in (events or {}).items():
            if not (0 <= t1 <= t0 < n):
                raise ValueError(f"{kind}: module-type pair {(t0, t1)} is not (t0, t1) with t1 <= t0 < {n}")
            if not isinstance(ev, Coincidences):
                raise TypeError(f"{kind}: expected Coincidences for {(t0, t1)}, got {type(ev).__name__}")
            self.scanner.check((t0, t1), ev, where=kind)
            if t0 == t1 and bool(np.any(ev.bin0 < ev.bin1)):
                # PETSIRD orders the bins of one module type; a swap mirrors the TOF bin, which is
                # the mirrored time difference only for edges symmetric about 0.
                edges = self.scanner.tof_edges_mm(t0, t1)
                if edges.size > 2 and not np.allclose(edges, -edges[::-1], rtol=0, atol=1e-4):
                    raise ValueError(f"{kind}: events with detection_bins[0] < detection_bins[1] need TOF "
                                     "bin edges symmetric about 0 to be reordered; order them first")
                ev = ev.ordered(max(edges.size - 1, 1))
            lists[t0][t1] = ev
            self.n_written[kind] += len(ev)
        return lists

    def write_block(self, prompts: Optional[Dict[Tuple[int, int], Coincidences]] = None,
                    delayeds: Optional[Dict[Tuple[int, int], Coincidences]] = None) -> None:
        """One event time block of prompts and/or delayeds, keyed by module-type pair."""
        petsird = _petsird()
        k = self._n_blocks
        block = petsird.EventTimeBlock(
            time_interval=petsird.TimeInterval(start=k * self.block_ms, stop=(k + 1) * self.block_ms),
            prompt_events=self._lists(prompts, "prompts"), delayed_events=self._lists(delayeds, "delayeds"))
        # One item per call: the stream gets a count and the item; close() writes the end mark.
        self._writer.write_time_blocks([petsird.TimeBlock.EventTimeBlock(block)])
        self._n_blocks += 1

    def close(self) -> None:
        """Write the stream's end mark and close (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._n_blocks == 0:                      # a valid file with no events
            self._writer.write_time_blocks([])
        self._writer.close()
