#!/usr/bin/env bash
# One call on a GPU machine does all the GPU work: build with CUDA (Hopper + Ampere + PTX), run the
# whole test suite (gpu-marked tests included), compute-sanitizer memcheck on a small case, and the
# benchmarks. Logs and JSON records go to OUTDIR.
#
#   scripts/gpu_check.sh OUTDIR [quick|full] [tests|projectors|recon|first|dualhead|realdata|multigpu|all]
#
# tests: the whole pytest suite + compute-sanitizer memcheck; projectors: benchmarks/direct_projectors.py;
# recon: benchmarks/direct_recon.py and the [HA] section 6 experiment (scripts/run_experiment.py);
# first: the FIRST family's gpu-marked tests and benchmarks/first_projectors.py; dualhead: the dual-head
# family's gpu-marked tests, the full-size model build, benchmarks/dualhead_projectors.py and its experiment;
# realdata: the PETSIRD / corrections / NIfTI / autograd tests, the real-data notebook at the 'small' size and
# benchmarks/io_petsird.py (petsird and nibabel wheels from .whl/io when missing);
# multigpu (a host with 2+ GPUs, not part of 'all'): the NCCL test, benchmarks/multi_gpu.py and the Dask sweep
# benchmarks/sweep_ha.py on 1 and 2 GPU workers (dask wheels from .whl/dask when distributed is missing).
set -uo pipefail
OUTDIR=${1:?usage: scripts/gpu_check.sh OUTDIR [quick|full] [tests|projectors|recon|first|dualhead|realdata|multigpu|all]}
MODE=${2:-full}
WHAT=${3:-all}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
QUICK=""; [ "$MODE" = quick ] && QUICK=--quick

{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -2
  $PY -c "import sys, numpy, scipy; print(sys.version); print('numpy', numpy.__version__, 'scipy', scipy.__version__)"
  $PY -c "import cupy; print('cupy', cupy.__version__)" || true
  $PY -c "import torch; print('torch', torch.__version__)" || true
  ls /usr/include/fftw3.h /usr/lib/x86_64-linux-gnu/libfftw3f_threads* 2>&1
} > "$OUTDIR/build.log" 2>&1

echo "== build" | tee -a "$OUTDIR/build.log"
# Hopper only here (sm_90 machine code + PTX): the device build need not wait for other targets.
if ! $PY -m pip install --no-build-isolation --no-deps -v -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" . >> "$OUTDIR/build.log" 2>&1; then
  tail -60 "$OUTDIR/build.log"; exit 1
fi
grep -E "Compiling entry|registers|spill" "$OUTDIR/build.log" | grep -B1 -A1 "sm_90" | grep -E "registers|spill" | sort | uniq -c | head -20
$PY -c "import directpet as d; print('has_cuda', d.has_cuda(), 'devices', d.cuda_device_count())"

if [ "$WHAT" = all ] || [ "$WHAT" = tests ]; then
  echo "== tests"
  $PY -m pytest tests -q -rs -p no:cacheprovider > "$OUTDIR/tests.log" 2>&1
  tail -15 "$OUTDIR/tests.log"
  echo "== compute-sanitizer memcheck"
  { command -v compute-sanitizer && compute-sanitizer --tool memcheck --leak-check full $PY scripts/sanitizer_case.py; } > "$OUTDIR/sanitizer.log" 2>&1
  tail -4 "$OUTDIR/sanitizer.log"
fi

if [ "$WHAT" = all ] || [ "$WHAT" = projectors ]; then
  echo "== projector benchmark"
  $PY benchmarks/direct_projectors.py $QUICK --out "$OUTDIR/direct_projectors.json" > "$OUTDIR/bench_projectors.log" 2>&1
  tail -70 "$OUTDIR/bench_projectors.log"
fi

if [ "$WHAT" = all ] || [ "$WHAT" = recon ]; then
  echo "== reconstruction benchmark"
  $PY benchmarks/direct_recon.py $QUICK --out "$OUTDIR/direct_recon.json" > "$OUTDIR/bench_recon.log" 2>&1
  tail -14 "$OUTDIR/bench_recon.log"
  echo "== [HA] section 6 experiment"
  if [ "$MODE" = quick ]; then EXP="--size small --iterations 10"; else EXP="--size paper --iterations 40"; fi
  $PY scripts/run_experiment.py "$OUTDIR/experiment" $EXP > "$OUTDIR/experiment.log" 2>&1
  tail -16 "$OUTDIR/experiment.log"
fi

if [ "$WHAT" = all ] || [ "$WHAT" = first ]; then
  if [ "$WHAT" = first ]; then
    echo "== FIRST gpu tests"
    $PY -m pytest tests/test_first_*.py -q -rs -m gpu -p no:cacheprovider > "$OUTDIR/tests_first.log" 2>&1
    tail -8 "$OUTDIR/tests_first.log"
  fi
  echo "== FIRST projector benchmark"
  $PY benchmarks/first_projectors.py $QUICK --out "$OUTDIR/first_projectors.json" > "$OUTDIR/bench_first.log" 2>&1
  tail -32 "$OUTDIR/bench_first.log"
  echo "== FIRST Monte Carlo benchmark"
  $PY benchmarks/first_monte_carlo.py $QUICK --out "$OUTDIR/first_monte_carlo.json" > "$OUTDIR/bench_first_mc.log" 2>&1
  tail -12 "$OUTDIR/bench_first_mc.log"
  echo "== FIRST experiment (Derenzo + point sources, Monte Carlo data, OSEM per method)"
  if [ "$MODE" = quick ]; then FSIZE=small; else FSIZE=full; fi
  $PY -m directpet.cli demo first --size $FSIZE --quiet --out "$OUTDIR/first_experiment" > "$OUTDIR/first_experiment.log" 2>&1
  tail -30 "$OUTDIR/first_experiment.log"
fi

if [ "$WHAT" = all ] || [ "$WHAT" = dualhead ]; then
  if [ "$WHAT" = dualhead ]; then
    echo "== dual-head gpu tests"
    $PY -m pytest tests/test_dualhead_*.py -q -rs -m gpu -p no:cacheprovider > "$OUTDIR/tests_dualhead.log" 2>&1
    tail -8 "$OUTDIR/tests_dualhead.log"
  fi
  if [ "$MODE" = quick ]; then DSIZE=small; else DSIZE=full; fi
  echo "== dual-head model build ($DSIZE)"
  $PY scripts/build_dualhead_model.py /tmp/dualhead_model_$DSIZE.npz --size $DSIZE --backend cuda --json "$OUTDIR/dualhead_model.json" > "$OUTDIR/dualhead_model.log" 2>&1
  tail -20 "$OUTDIR/dualhead_model.log"
  echo "== dual-head projector benchmark"
  $PY benchmarks/dualhead_projectors.py --model /tmp/dualhead_model_$DSIZE.npz --json "$OUTDIR/dualhead_projectors.json" > "$OUTDIR/bench_dualhead.log" 2>&1
  tail -30 "$OUTDIR/bench_dualhead.log"
  echo "== dual-head Monte Carlo benchmark"
  $PY benchmarks/dualhead_monte_carlo.py $QUICK --out "$OUTDIR/dualhead_monte_carlo.json" > "$OUTDIR/bench_dualhead_mc.log" 2>&1
  tail -12 "$OUTDIR/bench_dualhead_mc.log"
  echo "== dual-head experiment (Derenzo + point sources, Monte Carlo data, OSEM)"
  $PY -m directpet.cli demo dualhead --size $DSIZE --quiet --out "$OUTDIR/dualhead_experiment" > "$OUTDIR/dualhead_experiment.log" 2>&1
  tail -30 "$OUTDIR/dualhead_experiment.log"
fi

if [ "$WHAT" = all ] || [ "$WHAT" = realdata ]; then
  # petsird / nibabel wheels from .whl/io when the machine has no network
  $PY -c "import petsird, nibabel" 2>/dev/null || $PY -m pip install -q --no-index --find-links .whl/io petsird nibabel > "$OUTDIR/io_install.log" 2>&1
  echo "== real-data tests (PETSIRD, corrections, NIfTI, autograd)"
  $PY -m pytest tests/test_io_petsird.py tests/test_direct_corrections.py tests/test_io_nifti.py tests/test_autograd.py \
    tests/test_direct_deposition.py tests/test_direct_simulation.py tests/test_direct_views.py -q -rs -p no:cacheprovider > "$OUTDIR/tests_realdata.log" 2>&1
  tail -8 "$OUTDIR/tests_realdata.log"
  echo "== real-data notebook at the 'small' size (cells run as a script)"
  DIRECTPET_NOTEBOOK_SIZE=small DIRECTPET_NOTEBOOK_OUT="$OUTDIR/realdata_notebook" MPLBACKEND=Agg $PY - > "$OUTDIR/realdata_notebook.log" 2>&1 <<'PYEOF'
import json, time
t0 = time.perf_counter()
cells = [c for c in json.load(open("notebooks/real_data_workflow.ipynb"))["cells"] if c["cell_type"] == "code"]
scope = {}
for c in cells:
    t = time.perf_counter()
    exec("".join(c["source"]), scope)
    print(f"[cell {time.perf_counter() - t:.1f} s]")
print(f"notebook total {time.perf_counter() - t0:.1f} s")
PYEOF
  tail -25 "$OUTDIR/realdata_notebook.log"
  echo "== PETSIRD throughput and normalisation benchmark"
  $PY benchmarks/io_petsird.py --json "$OUTDIR/io_petsird.json" > "$OUTDIR/bench_io.log" 2>&1
  tail -12 "$OUTDIR/bench_io.log"
fi

if [ "$WHAT" = multigpu ]; then
  export NCCL_NVLS_ENABLE=0          # NVLink multicast stays off on the lent machines
  $PY -c "import distributed" 2>/dev/null || $PY -m pip install -q --no-index --find-links .whl/dask distributed > "$OUTDIR/dask_install.log" 2>&1
  $PY -c "import cupy.cuda.nccl as n; print('cupy nccl available', n.available)" || true
  echo "== multi-GPU tests"
  $PY -m pytest tests/test_parallel.py tests/test_sweep.py -q -rs -p no:cacheprovider > "$OUTDIR/tests_multigpu.log" 2>&1
  tail -6 "$OUTDIR/tests_multigpu.log"
  echo "== multi-GPU OSEM benchmark"
  $PY benchmarks/multi_gpu.py --json "$OUTDIR/multi_gpu.json" > "$OUTDIR/bench_multi_gpu.log" 2>&1
  tail -12 "$OUTDIR/bench_multi_gpu.log"
  echo "== Dask sweep ([HA] section 6, 5 kernels x 20 noise realisations) on 1 and 2 GPU workers"
  if [ "$MODE" = quick ]; then SWEEP="--quick"; else SWEEP=""; fi
  $PY benchmarks/sweep_ha.py $SWEEP --gpus 1,2 --out "$OUTDIR/sweep" --json "$OUTDIR/multi_gpu.json" > "$OUTDIR/sweep.log" 2>&1
  tail -20 "$OUTDIR/sweep.log"
fi
