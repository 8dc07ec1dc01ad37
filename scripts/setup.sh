#!/usr/bin/env bash
# Set up directpet on a fresh Debian/Ubuntu machine: system packages where missing (compiler,
# Python headers and venv, FFTW3), a virtual environment in .venv, and the package with its test
# extras. Idempotent: a second run only reinstalls the package.
#
#   bash scripts/setup.sh            # then .venv/bin/directpet ... or .venv/bin/python -m pytest
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need=()
command -v g++ >/dev/null || need+=(g++)
command -v python3 >/dev/null || need+=(python3)
[ -f /usr/include/fftw3.h ] && ls /usr/lib/*/libfftw3f_threads.so >/dev/null 2>&1 || need+=(libfftw3-dev)
python3 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
python3 - <<'PY' 2>/dev/null || need+=(python3-dev)
import os, sysconfig
raise SystemExit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The build tools live in the venv and the build is not isolated: the build directory
# (build/{wheel_tag}, pyproject.toml) then sees the same paths every run, so a second run recompiles
# only what changed. CMake and Ninja come from PyPI (Debian 12's CMake is older than the 3.26 needed).
# The CUDA backend is compiled in when nvcc is found (a module of its own, loaded on first use).
.venv/bin/python -m pip install -q "scikit-build-core>=0.10" "pybind11>=2.12" "setuptools-scm>=8" "cmake>=3.26" ninja
.venv/bin/python -m pip install -q --no-build-isolation ".[test]"
.venv/bin/python -c "import directpet as d; print('directpet', d.__version__, '|', d._backend.device_summary())"
