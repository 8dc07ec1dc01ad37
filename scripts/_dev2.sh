cd $PWD
python3 -c "import directpet, sys; print(directpet.__file__)"
python3 -m pip install --no-build-isolation --no-deps -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 . > $OUT/build.log 2>&1 || { tail -50 $OUT/build.log; exit 1; }
timeout 150 python3 -m pytest tests/test_dualhead_*.py -q -rs -p no:cacheprovider > $OUT/tests_dualhead.log 2>&1; tail -6 $OUT/tests_dualhead.log
timeout 380 python3 benchmarks/dualhead_projectors.py --model /tmp/m.npz --json $OUT/dualhead_projectors.json --repeats 3 --budget 15 > $OUT/bench.log 2>&1; tail -30 $OUT/bench.log
