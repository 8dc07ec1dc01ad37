set -x
cd $PWD
python3 -m pip install --no-build-isolation --no-deps -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 . > $OUT/build.log 2>&1 || { tail -50 $OUT/build.log; exit 1; }
grep -E "error|warning" $OUT/build.log | head -20
timeout 200 python3 -m pytest tests/test_dualhead_cuda.py tests/test_dualhead_model.py tests/test_dualhead_data.py -q -x -m gpu -p no:cacheprovider > $OUT/tests.log 2>&1; tail -30 $OUT/tests.log
timeout 120 python3 scripts/build_dualhead_model.py /tmp/m.npz --size full --backend cuda > $OUT/model.log 2>&1; tail -30 $OUT/model.log
timeout 150 python3 benchmarks/dualhead_projectors.py --model /tmp/m.npz --json $OUT/bench.json --methods default,alg3 --repeats 1 > $OUT/bench.log 2>&1; tail -40 $OUT/bench.log
