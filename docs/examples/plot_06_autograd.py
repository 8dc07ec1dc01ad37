"""
Differentiable projectors for PyTorch
=====================================

:class:`directpet.autograd.TorchOperator` turns any directpet operator (a projector of any family,
restricted to some of its units, or built with the operator algebra) into a PyTorch function.
``y = op(x)`` back-propagates ``A^T dL/dy`` into ``x``, and ``op.T`` is the adjoint, itself
differentiable. CUDA tensors go to the compiled projectors without a copy, and CPU tensors go
through NumPy. This example uses a small FIRST scanner on the CPU to:

* check that autograd's gradient of a least-squares loss is ``A^T (A x - y)``;
* fit an image to Poisson data by gradient descent on the negative log-likelihood, with the
  image parametrised as ``exp(theta)`` so that it stays positive.

PyTorch is optional: ``pip install "directpet[torch]"``. The documentation build runs this example only where
PyTorch is installed.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from directpet import sim
from directpet.autograd import TorchOperator
from directpet.first import RotatingScanner, SuperLORProjector, build_super_lor_table, model_consistent_data

torch.manual_seed(0)
scanner = RotatingScanner(n_rows=6, n_angles=20, n_radial=61, n_columns=20)
P = SuperLORProjector(build_super_lor_table(scanner), "fast", backend="cpu")
truth, _ = sim.derenzo_phantom(scanner.grid, radius_mm=11.0, length_mm=3.0)     # rods along z
data = model_consistent_data(P, truth, counts=1e6, seed=5)

# %%
# The whole sinogram as one differentiable operator, and its gradient against the adjoint.
A = TorchOperator.from_operator(P)
print(A, "| adjoint:", A.T)
y = torch.from_numpy(np.asarray(data.prompts))
x = torch.rand(scanner.grid.shape, dtype=torch.float32, requires_grad=True)
loss = 0.5 * ((A(x) - y) ** 2).sum()
loss.backward()
expected = P.adjoint(P.forward(x.detach().numpy()) - data.prompts)
err = np.abs(x.grad.numpy() - expected).max() / np.abs(expected).max()
print(f"autograd gradient vs A^T (A x - y): relative max difference {err:.1e}")

# %%
# Gradient descent on the Poisson negative log-likelihood ``sum(A x - y log(A x))`` with Adam,
# from a uniform image.
scale = data.meta["image_scale"]          # model_consistent_data scaled the image to reach the counts
theta = torch.full(scanner.grid.shape, float(np.log(truth.mean() * scale)), requires_grad=True)
opt = torch.optim.Adam([theta], lr=0.1)
history = []
for step in range(60):
    opt.zero_grad()
    ybar = A(torch.exp(theta)) + 1e-6
    nll = (ybar - y * torch.log(ybar)).sum()
    nll.backward()
    opt.step()
    history.append(float(nll.detach()))
print(f"negative log-likelihood {history[0]:.6g} -> {history[-1]:.6g} in {len(history)} steps")

image = torch.exp(theta).detach().numpy() / scale
g = scanner.grid
xs, ys = g.centres(2), g.centres(1)
ext = (xs[0] - 0.2, xs[-1] + 0.2, ys[0] - 0.2, ys[-1] + 0.2)
mid = g.nz // 2
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
for ax, (img, title) in zip(axes, ((truth[mid], "truth"), (image[mid], "Adam on the Poisson NLL"))):
    im = ax.imshow(img, origin="lower", extent=ext, cmap="hot")
    ax.set_title(f"{title}, slice {mid}")
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    fig.colorbar(im, ax=ax, shrink=0.85, label="activity (a.u.)")
axes[2].plot(np.arange(1, len(history) + 1), history)
axes[2].set_xlabel("Adam step")
axes[2].set_ylabel("negative log-likelihood")
axes[2].set_title("convergence")
plt.show()
