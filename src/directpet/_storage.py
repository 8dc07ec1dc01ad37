"""Reading directpet's ``.npz`` files: one place that turns a missing, truncated, foreign or
corrupt file into a ``ValueError`` naming ``path`` (never a BadZipFile, KeyError or JSON error)."""

from __future__ import annotations

import json
import zipfile
from typing import Callable, Sequence, TypeVar

import numpy as np

T = TypeVar("T")


def read_npz(path, what: str, required: Sequence[str], parse: Callable[[object], T]) -> T:
    """Open ``path`` (no pickles), check that the ``required`` keys are there and return
    ``parse(npz)``; any failure to read or decode becomes ``ValueError('path: ...')``."""
    try:
        # our own handle: numpy leaves its file open when the zip directory cannot be read
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as f:
            missing = [k for k in required if k not in f.files]
            if missing:
                raise _NotOurs(f"path: {path} is not a {what} file (missing {missing})")
            return parse(f)
    except _NotOurs as e:
        raise ValueError(str(e)) from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, IndexError, TypeError, AttributeError,
            ValueError, json.JSONDecodeError) as e:
        raise ValueError(f"path: {path} is not a readable {what} file ({type(e).__name__}: {e})") from e


def check_format(found, expected: str, version, expected_version: int, path) -> None:
    """The file's format string and version number must be the ones this code writes."""
    if str(found) != expected:
        raise _NotOurs(f"path: {path} holds format {str(found)!r}, expected {expected!r}")
    if int(version) != expected_version:
        raise _NotOurs(f"path: {path} has version {int(version)}, this directpet reads version {expected_version}")


def json_object(text) -> dict:
    """A JSON object (dict) from a stored string; anything else is a decoding error."""
    doc = json.loads(str(text))
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    return doc


class _NotOurs(Exception):
    """A readable file that is not the expected kind (its message is final)."""


__all__ = ["check_format", "json_object", "read_npz"]
