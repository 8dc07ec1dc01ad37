"""The DIRECT [HA] section 6 experiment's penalised arm (issue 19 §3): BSREM with the relative
difference prior over a beta sweep from each model's block-RAMLA image, at a tiny size. A stronger
prior must give a smoother image (lower noise) and, on 8 mm-scale voxels, lower sphere contrast: the
trade-off the figure shows."""

from __future__ import annotations

import pytest

from directpet.cli import main
from directpet.direct.experiment import ExperimentConfig, run_experiment, write_figures


def test_the_bsrem_arm_trades_noise_for_contrast(tmp_path):
    cfg = ExperimentConfig(size="tiny", n_events=2_000_000, n_iter=4, kernels=("invariant-fft", "invariant"),
                           backend="cpu", progress=False, bsrem_betas=(0.003, 0.03, 0.3), bsrem_passes=2,
                           bsrem_kernels=("invariant-fft",))
    res = run_experiment(cfg)
    assert set(res.bsrem) == {"invariant-fft"}            # the kernels asked for only
    for label, points in res.bsrem.items():
        betas, noise, crc = zip(*points)
        assert betas == (0.003, 0.03, 0.3)
        assert noise[0] > noise[1] > noise[2] > 0, (label, noise)
        assert crc[0] > crc[2] > 0, (label, crc)
        last = res.curves[[c.label for c in res.curves].index(label)]
        assert noise[2] < last.noise[-1]              # the strongest prior is smoother than block-RAMLA
    print(res.table())
    assert "BSREM with the relative difference prior" in res.table()
    paths = write_figures(res, str(tmp_path))
    assert paths[-1].endswith("bsrem_beta_sweep.png") and (tmp_path / "bsrem_beta_sweep.png").stat().st_size > 1000


def test_bad_bsrem_arguments_are_clear_errors(capsys):
    with pytest.raises(ValueError, match="bsrem_betas"):
        run_experiment(ExperimentConfig(size="tiny", bsrem_betas=(-1.0,), progress=False, backend="cpu"))
    with pytest.raises(ValueError, match="bsrem_passes"):
        run_experiment(ExperimentConfig(size="tiny", bsrem_betas=(0.1,), bsrem_passes=0, progress=False,
                                        backend="cpu"))
    with pytest.raises(ValueError, match="bsrem_kernels"):
        run_experiment(ExperimentConfig(size="tiny", bsrem_betas=(0.1,), kernels=("invariant",),
                                        bsrem_kernels=("variant1",), progress=False, backend="cpu"))
    with pytest.raises(SystemExit):
        main(["demo", "--bsrem-betas", "0.1,x", "--backend", "cpu"])
    assert "--bsrem-betas: expected a comma list of numbers" in capsys.readouterr().err
