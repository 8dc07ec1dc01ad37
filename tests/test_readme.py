"""Every code block of README.md runs as written, so that a snippet cannot drift from the code.

The Python blocks run in the order they appear, in one namespace (later blocks use what earlier
ones made, as a reader pasting them into one session would), in a fresh interpreter whose working
directory is a temporary folder. The blocks choose their own sizes: the paper's on a GPU, a reduced
one on a CPU, as the README says. A block can carry a marker on the line before it, an HTML comment
that the rendered README does not show:

``<!-- readme-test: script -->``     run alone as a script file (``python file.py``), e.g. a block
                                       that starts worker processes behind an ``if __name__ == "__main__"``
                                       guard;
``<!-- readme-test: gpus=N -->``      needs N CUDA devices: skipped, with that reason, on fewer; run as a
                                       script after the unmarked blocks (its workers import it);
``<!-- readme-test: needs=MODULE -->`` needs an optional library (PyTorch): skipped, with that reason,
                                       where it is missing, else run after the unmarked blocks;
Several may be combined (``script needs=distributed``).
``<!-- readme-test: skip: REASON -->`` not run here (only for a block that needs outside
                                       infrastructure, e.g. a batch-queue cluster); REASON is required.

The quick-start shell block must hold the two documented commands; `.ci/run` runs the second one,
and the first one's job (`directpet demo`) runs here at its CPU size. Any other shell block names
the test that runs it: ``<!-- readme-test: covered: tests/test_x.py -->``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")


def blocks():
    """The fenced code blocks of README.md: dicts with language, code, line (1-based) and marker."""
    found, lines = [], README.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        assert j < len(lines), f"README.md:{start + 1}: a code block is not closed"
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.fullmatch(lines[k].strip()) if k >= 0 else None
        found.append({"lang": lang, "code": "\n".join(lines[start + 1:j]) + "\n", "line": start + 1,
                      "marker": marker.group(1) if marker else ""})
        i = j + 1
    return found


PYTHON = [b for b in blocks() if b["lang"] == "python"]
SESSION = [b for b in PYTHON if not b["marker"]]
MARKED = [b for b in PYTHON if b["marker"]]

# exec each block in one namespace; a failure names the block's README line
RUNNER = """
import json, sys, time, traceback
ns = {"__name__": "__main__"}
for b in json.load(open(sys.argv[1])):
    t0 = time.perf_counter()
    try:
        exec(compile(b["code"], f"README.md:{b['line']}", "exec"), ns)
    except BaseException:
        traceback.print_exc()
        print(f"README block at line {b['line']} failed", flush=True)
        sys.exit(1)
    print(f"README block at line {b['line']}: {time.perf_counter() - t0:.1f} s", flush=True)
"""


def _env():
    """The environment of the subprocesses: the directpet that pytest imported (a source tree with its
    built extension, or the installed package) comes first on their path."""
    import directpet

    here = str(Path(directpet.__file__).resolve().parents[1])
    return dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH", "")) if p))


def _run(args, cwd, timeout):
    proc = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


def test_readme_has_python_blocks_and_every_marker_is_known():
    assert len(PYTHON) >= 5, "README.md lost its Python examples"
    for b in MARKED:
        m = b["marker"]
        assert re.fullmatch(r"skip: \S.*", m) or all(re.fullmatch(r"script|gpus=\d+|needs=\w+", t) for t in m.split()), \
            f"README.md:{b['line']}: unknown marker {m!r} (script, gpus=N, needs=MODULE or 'skip: REASON')"
    skipped = [b for b in MARKED if b["marker"].startswith("skip")]
    assert len(skipped) <= 1, f"only a block that needs outside infrastructure may be skipped: {skipped}"


@pytest.mark.slow
def test_readme_python_blocks_run_in_order(tmp_path):
    """The unmarked blocks, in README order, in one fresh interpreter (CPU sizes without a GPU)."""
    (tmp_path / "blocks.json").write_text(json.dumps(SESSION))
    (tmp_path / "runner.py").write_text(RUNNER)
    out = _run([sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "blocks.json")], tmp_path, 900)
    print(out[-4000:])
    assert out.count("README block at line") == len(SESSION)


@pytest.mark.slow
@pytest.mark.parametrize("block", MARKED, ids=lambda b: f"line{b['line']}")
def test_readme_marked_block(block, tmp_path):
    marker = block["marker"]
    if marker.startswith("skip: "):
        pytest.skip(f"README.md:{block['line']}: {marker[6:]}")
    tokens = dict(t.partition("=")[::2] for t in marker.split())
    if "needs" in tokens:
        pytest.importorskip(tokens["needs"], reason=f"README.md:{block['line']} needs {tokens['needs']} (optional)")
    if "gpus" in tokens:
        import directpet

        if directpet.cuda_device_count() < int(tokens["gpus"]):
            pytest.skip(f"README.md:{block['line']} needs {tokens['gpus']} CUDA devices, "
                        f"this machine has {directpet.cuda_device_count()}")
    if "script" not in tokens and "gpus" not in tokens:        # after the unmarked blocks, in one session
        (tmp_path / "blocks.json").write_text(json.dumps(SESSION + [block]))
        (tmp_path / "runner.py").write_text(RUNNER)
        print(_run([sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "blocks.json")], tmp_path, 900)[-3000:])
        return
    # a script: alone, or (gpus=N: its workers import it) after the unmarked blocks
    code = ("".join(b["code"] for b in SESSION) if "gpus" in tokens else "") + block["code"]
    script = tmp_path / "readme_block.py"
    script.write_text(code)
    print(_run([sys.executable, str(script)], tmp_path, 900)[-3000:])


def test_other_shell_blocks_name_the_test_that_runs_them():
    for b in [b for b in blocks() if b["lang"] == "bash"][1:]:
        m = re.fullmatch(r"covered: (tests/\S+\.py)", b["marker"])
        assert m and (ROOT / m.group(1)).exists(), f"README.md:{b['line']}: a shell block without a test that runs it"


def test_quick_start_holds_the_two_commands_and_ci_runs_the_second():
    quick = [b for b in blocks() if b["lang"] == "bash"][0]
    commands = [line.split("#")[0].strip() for line in quick["code"].splitlines() if line.strip()]
    assert commands == ["bash scripts/setup.sh && .venv/bin/directpet demo",
                        "bash scripts/setup.sh && .venv/bin/python -m pytest -q -n 2"], commands
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in [line.strip() for line in ci], ".ci/run must run the README's test command verbatim"


@pytest.mark.slow
def test_quick_start_demo_runs(tmp_path):
    """The first quick-start command's job: `directpet demo` end to end (the CPU size without a GPU),
    printing the CRC / noise table and writing its figures."""
    out = _run([sys.executable, "-m", "directpet.cli", "demo", "--out", str(tmp_path / "demo")], tmp_path, 1200)
    print(out[-3000:])
    assert "CRC" in out and "noise" in out
    assert sorted(p.suffix for p in (tmp_path / "demo").iterdir() if p.suffix == ".png"), "no figures written"
