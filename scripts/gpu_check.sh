#!/usr/bin/env bash
# One call on a GPU machine does all the GPU work: build with CUDA (Hopper + Ampere + PTX), run the
# whole test suite (gpu-marked tests included), compute-sanitizer memcheck on a small case, and the
# benchmarks. Logs and JSON records go to OUTDIR.
#
#   scripts/gpu_check.sh OUTDIR [quick|full] [tests|projectors|recon|fine|penalised|first|dualhead|realdata|timetoimage|wheel|notebooks|demo|multigpu|all]
#
# The third argument may list several stages, comma-separated (e.g. tests,first,demo).
# tests: the whole pytest suite + compute-sanitizer memcheck; projectors: benchmarks/direct_projectors.py;
# recon: benchmarks/direct_recon.py and the [HA] section 6 experiment (scripts/run_experiment.py);
# fine: benchmarks/direct_fine_voxels.py (2 mm voxels: select_projector's choice against the exact projector);
# penalised: the prior / penalised-reconstruction / multi-process tests, benchmarks/recon_priors.py, Nsight
# Compute of the RDP kernel (scripts/ncu_prior_case.py) and the FIRST and dual-head penalised arms
# (benchmarks/penalised_sweeps.py; PENALISED_FAMILIES=first or dualhead runs one of them);
# first: the FIRST family's gpu-marked tests (when run alone), benchmarks/first_projectors.py, benchmarks/first_staging.py,
# compute-sanitizer racecheck of scripts/sanitizer_case.py first,
# benchmarks/first_invariants.py (per-angle totals, sensitivity smoothness) and the experiment; dualhead: the dual-head
# family's gpu-marked tests, the model build (full size; quick: the benchmark's --small scanner),
# benchmarks/dualhead_projectors.py and its experiment;
# realdata: the PETSIRD / corrections / NIfTI / autograd / workflow tests, the real-data notebook at the 'small'
# size (REALDATA_NOTEBOOK=0 leaves it out), benchmarks/io_petsird.py (petsird and nibabel wheels from .whl/io
# when missing) and Nsight Compute of the file-to-image kernels (scripts/ncu_file_to_image_case.py; REALDATA_NCU=0
# leaves it out); timetoimage: benchmarks/direct_attenuation.py and benchmarks/time_to_image.py (a 4.3e8-event
# file through reconstruct_petsird; TIME_TO_IMAGE=0 leaves it out);
# wheel: the repaired wheel built from this call's build directory, installed into a venv, its gpu-marked tests
# and benchmarks/wheel_vs_source.py (the GPU benchmarks under the wheel and the source build, alternating;
# WHEEL_BENCH=0 leaves them out);
# notebooks: every notebook (or those NOTEBOOKS names) at its GPU default size, timed (benchmarks/notebook_timing.py);
# demo: `python -m directpet.cli demo` end to end as the README runs it, twice (benchmarks/demo_timing.py: the
# first run with an empty CuPy kernel cache, the second with the kernels it compiled);
# multigpu (a host with 2+ GPUs, not part of 'all'): the NCCL test, benchmarks/multi_gpu.py and the Dask sweep
# benchmarks/sweep_ha.py on 1 and 2 GPU workers (dask wheels from .whl/dask when distributed is missing).
#
# Every stage runs even when an earlier one failed, so that one call leaves every log; the script
# remembers each failing stage (a non-zero exit of pytest, a benchmark, an experiment, a wheel install,
# compute-sanitizer, or memory errors in its log) and exits 1 at the end with a line naming them.
# A failed build ends the script at once (nothing after it could run).
#
# Records carry the commit of the tree (benchmarks/_common.py stamp). On a machine that got a copy of the
# working tree without .git, pass it in: DIRECTPET_COMMIT=<git rev-parse HEAD of the source>[+dirty].
set -uo pipefail
OUTDIR=${1:?usage: scripts/gpu_check.sh OUTDIR [quick|full] [tests|projectors|recon|penalised|first|dualhead|realdata|notebooks|demo|multigpu|all]}
MODE=${2:-full}
WHAT=${3:-all}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
QUICK=""; [ "$MODE" = quick ] && QUICK=--quick

FAILED=()
# stage NAME LOG COMMAND...: run COMMAND with stdout and stderr in LOG; a non-zero exit status is
# remembered under NAME (and returned). The caller tails LOG afterwards, so no pipe hides the status.
stage() {
  local name=$1 log=$2 rc
  shift 2
  "$@" > "$log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    FAILED+=("$name (exit $rc)")
    echo "!! $name failed: exit status $rc (log: $log)"
  fi
  return "$rc"
}
# the lines of LOG (default 20) after a stage
show() { tail -"${2:-20}" "$1"; }
finish() {
  if [ "${#FAILED[@]}" -gt 0 ]; then
    local f line=""
    for f in "${FAILED[@]}"; do line+="${line:+; }$f"; done
    echo "== FAILED stages (${#FAILED[@]}): $line"
    exit 1
  fi
  echo "== all stages passed"
  exit 0
}
runs() { [ "$WHAT" = all ] || [[ ",$WHAT," == *",$1,"* ]]; }

{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -2
  $PY -c "import sys, numpy, scipy; print(sys.version); print('numpy', numpy.__version__, 'scipy', scipy.__version__)"
  $PY -c "import cupy; print('cupy', cupy.__version__)" || true
  $PY -c "import torch; print('torch', torch.__version__)" || true
  ls /usr/include/fftw3.h /usr/lib/x86_64-linux-gnu/libfftw3f_threads* 2>&1
} > "$OUTDIR/build.log" 2>&1

echo "== build" | tee -a "$OUTDIR/build.log"
# the version comes from setuptools-scm (pyproject.toml): from the wheels carried in .whl/build where the
# machine has none
if ! $PY -c "import setuptools_scm" 2>/dev/null; then
  $PY -m pip install -q --no-index --find-links .whl/build setuptools-scm >> "$OUTDIR/build.log" 2>&1 || \
    { FAILED+=("build tools (setuptools-scm from .whl/build)"); finish; }
fi
# the version the caller passes (DIRECTPET_VERSION: the copy of the tree here may carry no .git, or a stale
# one); else git's, else 0+unknown
if [ -n "${DIRECTPET_VERSION:-}" ]; then export SETUPTOOLS_SCM_PRETEND_VERSION=$DIRECTPET_VERSION
elif [ ! -d .git ]; then export SETUPTOOLS_SCM_PRETEND_VERSION=0+unknown; fi
BUILD_OPTS=(-C cmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -C cmake.define.DIRECTPET_PTXAS_VERBOSE=ON)
# Hopper only here (sm_90 machine code + PTX): the device build need not wait for other targets.
# DIRECTPET_PTXAS_VERBOSE: the register and spill report of every kernel in the build log (read below)
if ! $PY -m pip install --no-build-isolation --no-deps -v "${BUILD_OPTS[@]}" . >> "$OUTDIR/build.log" 2>&1; then
  tail -60 "$OUTDIR/build.log"
  FAILED+=("build (pip install; log: $OUTDIR/build.log)")
  finish
fi
grep -E "Compiling entry|registers|spill" "$OUTDIR/build.log" | grep -B1 -A1 "sm_90" | grep -E "registers|spill" | sort | uniq -c | head -20
$PY -c "import directpet as d; print('has_cuda', d.has_cuda(), 'devices', d.cuda_device_count())" || FAILED+=("import directpet")
# the machine as a record (GPU, driver, clocks, nvcc, Python and library versions) and the commit every
# record of this call carries
stage environment "$OUTDIR/environment.log" $PY benchmarks/stage_records.py environment --json "$OUTDIR/environment.json"
show "$OUTDIR/environment.log" 3
grep -q '"commit": "unknown"' "$OUTDIR/environment.json" 2>/dev/null && \
  echo "!! records will say commit 'unknown': no git here; set DIRECTPET_COMMIT (see the top of this script)"

if runs tests; then
  # the README's PETSIRD / NIfTI blocks and the io tests need petsird and nibabel (the io extra): from
  # the wheels carried in .whl/io where the machine has no network
  if ! $PY -c "import petsird, nibabel" 2>/dev/null && ls .whl/io/*.whl >/dev/null 2>&1; then
    stage io_install "$OUTDIR/io_install.log" $PY -m pip install -q --no-index --find-links .whl/io petsird nibabel
  fi
  echo "== tests"
  stage tests "$OUTDIR/tests.log" $PY -m pytest tests -q -rs -p no:cacheprovider
  rc=$?
  show "$OUTDIR/tests.log" 15
  $PY benchmarks/stage_records.py pytest "$OUTDIR/tests.log" --status $rc --json "$OUTDIR/tests.json" \
    --command "python -m pytest tests -q -rs -p no:cacheprovider" > /dev/null || FAILED+=("tests record")
  echo "== compute-sanitizer memcheck"
  SAN="compute-sanitizer --tool memcheck --leak-check full $PY scripts/sanitizer_case.py"
  stage compute-sanitizer "$OUTDIR/sanitizer.log" $SAN
  rc=$?
  show "$OUTDIR/sanitizer.log" 4
  # leaks reported at exit are the objects alive then (see RESULTS.md); any other error fails the stage
  $PY benchmarks/stage_records.py sanitizer "$OUTDIR/sanitizer.log" --status $rc --json "$OUTDIR/sanitizer.json" \
    --command "$SAN" || FAILED+=("compute-sanitizer errors (log: $OUTDIR/sanitizer.log)")
fi

if runs projectors; then
  echo "== projector benchmark"
  stage bench_projectors "$OUTDIR/bench_projectors.log" \
    $PY benchmarks/direct_projectors.py $QUICK --out "$OUTDIR/direct_projectors.json"
  show "$OUTDIR/bench_projectors.log" 70
fi

if runs recon; then
  echo "== reconstruction benchmark"
  stage bench_recon "$OUTDIR/bench_recon.log" $PY benchmarks/direct_recon.py $QUICK --out "$OUTDIR/direct_recon.json"
  show "$OUTDIR/bench_recon.log" 14
  echo "== [HA] section 6 experiment"
  if [ "$MODE" = quick ]; then EXP="--size small --iterations 10"; else EXP="--size paper --iterations 40"; fi
  stage experiment "$OUTDIR/experiment.log" $PY scripts/run_experiment.py "$OUTDIR/experiment" $EXP
  show "$OUTDIR/experiment.log" 16
fi

if runs fine; then
  echo "== DIRECT at 2 mm voxels: the selected projector against the exact one"
  stage bench_fine "$OUTDIR/bench_fine.log" $PY benchmarks/direct_fine_voxels.py --out "$OUTDIR/direct_fine_voxels.json"
  show "$OUTDIR/bench_fine.log" 12
fi

if runs penalised; then
  echo "== penalised reconstruction: tests"
  stage tests_penalised "$OUTDIR/tests_penalised.log" $PY -m pytest tests/test_recon_priors.py \
    tests/test_recon_penalised.py tests/test_parallel.py tests/test_family_experiments.py tests/test_direct_experiment.py \
    -q -rs -p no:cacheprovider
  show "$OUTDIR/tests_penalised.log" 10
  echo "== prior benchmark (RDP kernel, BSREM pass against block-RAMLA)"
  stage bench_priors "$OUTDIR/bench_priors.log" $PY benchmarks/recon_priors.py $QUICK --out "$OUTDIR/recon_priors.json"
  show "$OUTDIR/bench_priors.log" 12
  if command -v ncu > /dev/null; then
    echo "== Nsight Compute: the RDP gradient kernel"
    stage ncu_prior "$OUTDIR/ncu_pair_prior.txt" ncu --set full --kernel-name regex:pair_prior --launch-count 1 \
      $PY scripts/ncu_prior_case.py
    grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|Executed Ipc Active" "$OUTDIR/ncu_pair_prior.txt" | head -6
  fi
  echo "== FIRST and dual-head penalised arms (BSREM-RDP from OSEM: peak-to-valley against noise)"
  if [ "$MODE" = quick ]; then PSIZE=small; else PSIZE=full; fi
  stage penalised_sweeps "$OUTDIR/penalised_sweeps.log" $PY benchmarks/penalised_sweeps.py --size $PSIZE \
    --family "${PENALISED_FAMILIES:-first,dualhead}" \
    --out "$OUTDIR/penalised_sweeps" --json "$OUTDIR/penalised_sweeps.json"
  show "$OUTDIR/penalised_sweeps.log" 40
fi

if runs first; then
  if ! runs tests && [ "$WHAT" != all ]; then
    echo "== FIRST gpu tests"
    stage tests_first "$OUTDIR/tests_first.log" $PY -m pytest tests/test_first_*.py -q -rs -m gpu -p no:cacheprovider
    show "$OUTDIR/tests_first.log" 8
  fi
  echo "== FIRST projector benchmark"
  stage bench_first "$OUTDIR/bench_first.log" $PY benchmarks/first_projectors.py $QUICK --out "$OUTDIR/first_projectors.json"
  show "$OUTDIR/bench_first.log" 32
  echo "== FIRST fast forward: TMA against cp.async staging of the lattice planes (same build, alternated)"
  stage first_staging "$OUTDIR/first_staging.log" $PY benchmarks/first_staging.py --out "$OUTDIR/first_staging.json"
  show "$OUTDIR/first_staging.log" 6
  echo "== compute-sanitizer racecheck of the FIRST case (the shared-memory stagings; memcheck is in the tests stage)"
  stage first_racecheck "$OUTDIR/first_racecheck.log" compute-sanitizer --tool racecheck --error-exitcode 1 \
    $PY scripts/sanitizer_case.py first
  show "$OUTDIR/first_racecheck.log" 3
  echo "== FIRST invariants at full size (per-angle totals, sensitivity smoothness), every method on the GPU"
  stage first_invariants "$OUTDIR/first_invariants.log" \
    $PY benchmarks/first_invariants.py --backend cuda --out "$OUTDIR/first_invariants.json"
  show "$OUTDIR/first_invariants.log" 6
  echo "== FIRST Monte Carlo benchmark"
  stage bench_first_mc "$OUTDIR/bench_first_mc.log" \
    $PY benchmarks/first_monte_carlo.py $QUICK --out "$OUTDIR/first_monte_carlo.json"
  show "$OUTDIR/bench_first_mc.log" 12
  echo "== FIRST experiment (Derenzo + point sources, Monte Carlo data, OSEM per method)"
  if [ "$MODE" = quick ]; then FSIZE=small; else FSIZE=full; fi
  stage first_experiment "$OUTDIR/first_experiment.log" \
    $PY -m directpet.cli demo first --size $FSIZE --quiet --out "$OUTDIR/first_experiment"
  show "$OUTDIR/first_experiment.log" 30
fi

if runs dualhead; then
  if ! runs tests && [ "$WHAT" != all ]; then
    echo "== dual-head gpu tests"
    stage tests_dualhead "$OUTDIR/tests_dualhead.log" $PY -m pytest tests/test_dualhead_*.py -q -rs -m gpu -p no:cacheprovider
    show "$OUTDIR/tests_dualhead.log" 8
  fi
  # quick: the benchmark's --small scanner, which build_dualhead_model.py calls 'medium'
  if [ "$MODE" = quick ]; then DSIZE=small; MSIZE=medium; DSMALL=--small; else DSIZE=full; MSIZE=full; DSMALL=""; fi
  MODEL="/tmp/dualhead_model_$MSIZE.npz"
  echo "== dual-head model build ($MSIZE)"
  stage dualhead_model "$OUTDIR/dualhead_model.log" \
    $PY scripts/build_dualhead_model.py "$MODEL" --size $MSIZE --backend cuda --json "$OUTDIR/dualhead_model.json"
  show "$OUTDIR/dualhead_model.log" 20
  echo "== dual-head projector benchmark"
  stage bench_dualhead "$OUTDIR/bench_dualhead.log" \
    $PY benchmarks/dualhead_projectors.py $DSMALL --model "$MODEL" --json "$OUTDIR/dualhead_projectors.json"
  show "$OUTDIR/bench_dualhead.log" 30
  echo "== dual-head Monte Carlo benchmark"
  stage bench_dualhead_mc "$OUTDIR/bench_dualhead_mc.log" \
    $PY benchmarks/dualhead_monte_carlo.py $QUICK --out "$OUTDIR/dualhead_monte_carlo.json"
  show "$OUTDIR/bench_dualhead_mc.log" 12
  echo "== dual-head experiment (Derenzo + point sources, Monte Carlo data, OSEM)"
  stage dualhead_experiment "$OUTDIR/dualhead_experiment.log" \
    $PY -m directpet.cli demo dualhead --size $DSIZE --quiet --out "$OUTDIR/dualhead_experiment"
  show "$OUTDIR/dualhead_experiment.log" 30
fi

if runs realdata; then
  # petsird / nibabel wheels from .whl/io when the machine has no network
  if ! $PY -c "import petsird, nibabel" 2>/dev/null; then
    stage io_install "$OUTDIR/io_install.log" $PY -m pip install -q --no-index --find-links .whl/io petsird nibabel
  fi
  echo "== real-data tests (PETSIRD, corrections, NIfTI, autograd)"
  stage tests_realdata "$OUTDIR/tests_realdata.log" \
    $PY -m pytest tests/test_io_petsird.py tests/test_direct_corrections.py tests/test_io_nifti.py tests/test_autograd.py \
    tests/test_direct_deposition.py tests/test_direct_monte_carlo.py tests/test_direct_views.py \
    tests/test_direct_workflow.py tests/test_direct_listmode.py tests/test_build_info.py -q -rs -p no:cacheprovider
  show "$OUTDIR/tests_realdata.log" 8
  if [ "${REALDATA_NOTEBOOK:-1}" = 1 ]; then     # REALDATA_NOTEBOOK=0: not the notebook
  echo "== real-data notebook at the 'small' size (cells run as a script, timed)"
  stage realdata_notebook "$OUTDIR/realdata_notebook.log" \
    $PY benchmarks/notebook_timing.py notebooks/real_data_workflow.ipynb --set DIRECTPET_NOTEBOOK_SIZE=small \
    --set DIRECTPET_NOTEBOOK_OUT="$OUTDIR/realdata_notebook" --json "$OUTDIR/realdata_notebook.json"
  show "$OUTDIR/realdata_notebook.log" 25
  fi
  echo "== PETSIRD throughput and normalisation benchmark"
  stage bench_io "$OUTDIR/bench_io.log" $PY benchmarks/io_petsird.py --json "$OUTDIR/io_petsird.json"
  show "$OUTDIR/bench_io.log" 12
  if command -v ncu > /dev/null && [ "${REALDATA_NCU:-1}" = 1 ]; then
    echo "== Nsight Compute: list-mode decoder and deposition, normalisation and acceptance kernels"
    stage ncu_listmode "$OUTDIR/ncu_listmode.txt" ncu --set full --kernel-name regex:"decode_tiles|deposit_events" \
      --launch-count 2 $PY scripts/ncu_file_to_image_case.py listmode
    stage ncu_corrections "$OUTDIR/ncu_corrections.txt" ncu --set full \
      --kernel-name regex:"normalisation_kernel|acceptance_kernel" --launch-count 2 \
      $PY scripts/ncu_file_to_image_case.py corrections
    grep -hE "^  [a-zA-Z_:<>0-9]+\(|Duration|Compute \(SM\) Throughput|DRAM Throughput|Memory Throughput|FP64" \
      "$OUTDIR/ncu_listmode.txt" "$OUTDIR/ncu_corrections.txt" | head -40
  fi
fi

if runs timetoimage; then
  if ! $PY -c "import petsird, nibabel" 2>/dev/null; then
    stage io_install "$OUTDIR/io_install.log" $PY -m pip install -q --no-index --find-links .whl/io petsird nibabel
  fi
  echo "== attenuation at the paper's size: compiled vs map_coordinates (benchmarks/direct_attenuation.py)"
  stage bench_attenuation "$OUTDIR/bench_attenuation.log" $PY benchmarks/direct_attenuation.py \
    --json "$OUTDIR/direct_attenuation.json"
  show "$OUTDIR/bench_attenuation.log" 4
  echo "== file to image: reconstruct_petsird per stage (benchmarks/time_to_image.py)"
  if [ "${TIME_TO_IMAGE:-1}" = 1 ]; then
    stage time_to_image "$OUTDIR/time_to_image.log" $PY benchmarks/time_to_image.py --out "$OUTDIR/time_to_image.json"
    show "$OUTDIR/time_to_image.log" 30
  fi
fi

if runs wheel; then
  # The repaired wheel as a user installs it, against this call's source build (issue 20): built from the
  # same build directory with the same options (nothing is compiled again), repaired by auditwheel (cuFFT
  # left to the toolkit or nvidia-cufft), installed by pip into a folder of its own that goes first on
  # PYTHONPATH (this machine's NumPy, CuPy and pytest live in its Python, which may itself be a venv).
  # Then the gpu-marked tests from a copy of the tree without src/, and the GPU benchmarks under both
  # builds, alternating.
  echo "== wheel"
  W="$OUTDIR/wheel"; WT=$(mktemp -d)
  mkdir -p "$W"
  # built, repaired and checked by scripts/build_wheel.sh (its bare-venv test needs PyPI: not here)
  if stage wheel_build "$W/build.log" env PYTHON="$PY" DIST="$WT" WHEEL_CONFIG="${BUILD_OPTS[*]}" PIP_NO_INDEX=1 \
       PIP_FIND_LINKS="$(pwd)/.whl/build" bash scripts/build_wheel.sh --no-test; then
    grep -cE "Building (CXX|CUDA) object" "$W/build.log" | sed 's/^/objects compiled again for the wheel: /'
    grep -E "symbol tag|MiB|vendored|licences" "$W/build.log" | tee "$W/show.log"
    stage wheel_install "$W/install.log" $PY -m pip install --no-deps --no-index --target "$WT/site" \
      "$WT"/directpet-*manylinux*.whl
    PYTHONPATH="$WT/site" $PY -c "import directpet as d; print('the wheel:', d.__version__, d.__file__); d.show_config()" \
      2>&1 | tee -a "$W/show.log"
    mkdir "$WT/tree"
    (find . -path ./src -prune -o -path ./build -prune -o -path ./.whl -prune -o -path ./.git -prune -o -type f -print0 | \
      xargs -0 cp --parents -t "$WT/tree")
    stage wheel_tests "$W/tests.log" bash -c "cd '$WT/tree' && PYTHONPATH='$WT/site' $PY -m pytest tests -m gpu -q -rs -p no:cacheprovider"
    show "$W/tests.log" 8
    if [ "${WHEEL_BENCH:-1}" = 1 ]; then      # WHEEL_BENCH=0: the tests only
      stage wheel_bench "$W/bench.log" $PY benchmarks/wheel_vs_source.py --wheel "$WT/site" \
        --out "$OUTDIR/wheel_vs_source.json"
      show "$W/bench.log" 30
    fi
  fi
  (cd "$OUTDIR" && tar czf wheel_logs.tgz wheel)
  rm -rf "$WT"
fi

if runs notebooks; then
  # every notebook as a reader runs it on this machine: its GPU default size, cells timed
  for nb in ${NOTEBOOKS:-direct_reconstruction real_data_workflow first_superlor dual_head}; do
    echo "== notebook $nb at its GPU default (cells run as a script, timed)"
    stage "notebook_$nb" "$OUTDIR/notebook_$nb.log" \
      $PY benchmarks/notebook_timing.py "notebooks/$nb.ipynb" --set DIRECTPET_NOTEBOOK_OUT="$OUTDIR/notebook_$nb" \
      --json "$OUTDIR/notebook_$nb.json"
    show "$OUTDIR/notebook_$nb.log" 12
  done
fi

if runs demo; then
  echo "== directpet demo end to end (empty CuPy kernel cache, then warm)"
  stage demo "$OUTDIR/demo.log" $PY benchmarks/demo_timing.py --runs 2 --fresh-cupy-cache \
    --log "$OUTDIR/demo_output.log" --json "$OUTDIR/demo.json" -- --out "$OUTDIR/demo"
  show "$OUTDIR/demo.log" 6
fi

if [[ ",$WHAT," == *",multigpu,"* ]]; then
  export NCCL_NVLS_ENABLE=0          # NVLink multicast stays off on the lent machines
  if ! $PY -c "import distributed" 2>/dev/null; then
    stage dask_install "$OUTDIR/dask_install.log" $PY -m pip install -q --no-index --find-links .whl/dask distributed
  fi
  $PY -c "import cupy.cuda.nccl as n; print('cupy nccl available', n.available)" || true
  echo "== multi-GPU tests"
  stage tests_multigpu "$OUTDIR/tests_multigpu.log" $PY -m pytest tests/test_parallel.py tests/test_sweep.py -q -rs -p no:cacheprovider
  show "$OUTDIR/tests_multigpu.log" 6
  echo "== multi-GPU OSEM benchmark"
  stage bench_multi_gpu "$OUTDIR/bench_multi_gpu.log" $PY benchmarks/multi_gpu.py --json "$OUTDIR/multi_gpu.json"
  show "$OUTDIR/bench_multi_gpu.log" 12
  echo "== Dask sweep ([HA] section 6, 5 kernels x 20 noise realisations) on 1 and 2 GPU workers"
  if [ "$MODE" = quick ]; then SWEEP="--quick"; else SWEEP=""; fi
  stage sweep "$OUTDIR/sweep.log" $PY benchmarks/sweep_ha.py $SWEEP --gpus 1,2 --out "$OUTDIR/sweep" --json "$OUTDIR/multi_gpu.json"
  show "$OUTDIR/sweep.log" 20
fi

finish
