#!/usr/bin/env bash
# Developer build: compile directpet._core in build/dev and drop it into src/directpet so that
# `PYTHONPATH=src python ...` uses the working tree without reinstalling. Extra args go to CMake
# (e.g. -DDIRECTPET_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
cmake -S . -B build/dev -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$($PY -c 'import sys; print(sys.executable)')" \
  -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" "$@" >/dev/null
cmake --build build/dev -j "$(nproc)"
cp build/dev/_core*.so src/directpet/
echo "built $(ls src/directpet/_core*.so)"
