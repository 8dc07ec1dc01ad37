"""Run a notebook's code cells as one script and time them: one record with each cell's seconds and
printed output and the total (the cells share one namespace, as in a kernel).

    python benchmarks/notebook_timing.py NOTEBOOK [--set NAME=VALUE ...] [--json FILE]

--set puts NAME=VALUE into the environment before the first cell (the notebooks read their size and
output folder from DIRECTPET_NOTEBOOK_* variables), so that the record's command holds everything
the run depended on. Figures are drawn off screen (MPLBACKEND=Agg unless set). A cell that raises
ends the run: the record is still written (``failed_cell``, ``error``) and the exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import stamp, write_records  # noqa: E402

MAX_OUTPUT = 4000     # characters of a cell's printed output kept in the record


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy."""

    def __init__(self, out):
        self.out, self.copy = out, io.StringIO()

    def write(self, s):
        self.copy.write(s)
        return self.out.write(s)

    def flush(self):
        self.out.flush()


def _python(source: str) -> str:
    """A cell's source without its IPython magics (``%matplotlib inline``): figures go to files here."""
    return "\n".join("" if line.lstrip().startswith("%") else line for line in source.splitlines())


def _display_without_ipython():
    """Where IPython is not installed (a bare GPU machine), a stand-in ``IPython.display`` whose
    ``display(Image(filename=...))`` prints the file's name: the notebooks' display cells only show the
    PNG files the cell before wrote, so every computing cell still runs and is timed."""
    import importlib.util

    if importlib.util.find_spec("IPython") is not None:
        return
    import types

    display_mod = types.ModuleType("IPython.display")

    class Image:
        def __init__(self, filename=None, **kw):
            self.filename = filename

        def __repr__(self):
            return f"<image {self.filename}>"

    display_mod.Image = Image
    display_mod.display = lambda *objs, **kw: print(*objs)
    package = types.ModuleType("IPython")
    package.display = display_mod
    package.version_info = (0, 0)             # what matplotlib asks an imported IPython
    package.get_ipython = lambda: None        # not running inside IPython
    sys.modules.update({"IPython": package, "IPython.display": display_mod})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="environment variable for the cells (repeatable)")
    ap.add_argument("--json", default=None, help="write the record here (a list of one record)")
    args = ap.parse_args()
    env = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name:
            ap.error(f"--set: expected NAME=VALUE, got {item!r}")
        env[name] = value
    os.environ.update(env)
    os.environ.setdefault("MPLBACKEND", "Agg")
    _display_without_ipython()
    with open(args.notebook) as f:
        cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]

    scope = {"__name__": "__main__"}
    rows, error, failed = [], None, None
    t_start = time.perf_counter()
    for i, cell in enumerate(cells):
        tee = _Tee(sys.stdout)
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(tee):
                exec(compile(_python("".join(cell["source"])), f"<{os.path.basename(args.notebook)} cell {i}>", "exec"),
                     scope)
        except Exception:
            error, failed = traceback.format_exc(), i
            print(error, file=sys.stderr)
        seconds = time.perf_counter() - t0
        out = tee.copy.getvalue()
        rows.append({"cell": i, "seconds": seconds, "output": out[-MAX_OUTPUT:]})
        print(f"[cell {i}: {seconds:.1f} s]", flush=True)
        if error:
            break
    total = time.perf_counter() - t_start
    print(f"notebook total {total:.1f} s" + (f" (stopped at cell {failed})" if error else ""))
    rec = stamp({"case": "notebook", "notebook": args.notebook, "env": env, "code_cells": len(cells),
                 "seconds": total, "cells": rows, "failed_cell": failed, "error": error})
    if args.json:
        write_records([rec], args.json)
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
