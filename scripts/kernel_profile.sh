#!/usr/bin/env bash
# Instruction-level view of one kernel, for kernel work (issue 17): its SASS from the built extension and
# Nsight Compute's per-instruction counters (executed instructions, stall samples) on one launch.
#
#   scripts/kernel_profile.sh OUTDIR NAME KERNEL_REGEX CASE_SCRIPT [ARGS...]
#
# Writes OUTDIR/NAME.sass (the SASS of every kernel matching KERNEL_REGEX), OUTDIR/NAME.txt (ncu's
# warp-state, instruction and source-counter sections) and OUTDIR/NAME_source.csv (ncu's source page:
# one row per SASS instruction with its executed count and stall samples). The extension must be built
# and installed (scripts/gpu_check.sh OUT quick none). Exit status: non-zero when ncu or the case fails.
set -euo pipefail
OUTDIR=${1:?OUTDIR}; NAME=${2:?NAME}; REGEX=${3:?KERNEL_REGEX}; shift 3
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
SO=$($PY -c "import glob, os, directpet; print(glob.glob(os.path.join(os.path.dirname(directpet.__file__), '_cuda*.so'))[0])")
# the SASS of the matching functions: cuobjdump prints "Function : <mangled name>" before each one
cuobjdump -sass "$SO" | awk -v re="$REGEX" '/Function : /{keep = ($0 ~ re)} keep' > "$OUTDIR/$NAME.sass"
echo "$NAME: $(grep -c 'Function :' "$OUTDIR/$NAME.sass") function(s) of SASS"
ncu --section WarpStateStats --section InstructionStats --section SourceCounters --section LaunchStats \
    --section SpeedOfLight --kernel-name regex:"$REGEX" --launch-count 1 -o "$OUTDIR/$NAME" -f \
    "$PY" "$@" > "$OUTDIR/$NAME.ncu.log" 2>&1
ncu -i "$OUTDIR/$NAME.ncu-rep" > "$OUTDIR/$NAME.txt"
ncu -i "$OUTDIR/$NAME.ncu-rep" --page source --csv --print-source sass > "$OUTDIR/${NAME}_source.csv"
rm -f "$OUTDIR/$NAME.ncu-rep"
grep -E "Duration|Executed Instructions|Issued Warp|Warp Cycles Per Issued" "$OUTDIR/$NAME.txt" | head -8
