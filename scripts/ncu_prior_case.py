"""One launch of the compiled RDP gradient kernel (csrc/recon/prior_cuda.cu) at 288 x 288 x 96 for Nsight Compute:
``ncu --set full --kernel-name regex:pair_prior --launch-count 1 python scripts/ncu_prior_case.py``."""

import cupy

from directpet.recon import RelativeDifferencePrior

x = cupy.random.default_rng(1).gamma(2.0, 1.0, (96, 288, 288)).astype(cupy.float32) + 0.01
prior = RelativeDifferencePrior(1.0, (2.0, 2.0, 2.0), gamma=2.0, epsilon=0.01)
prior.gradient(x, check=False)
cupy.cuda.Device().synchronize()
