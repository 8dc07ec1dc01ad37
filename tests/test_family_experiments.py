"""The FIRST and dual-head experiments' penalised arm (directpet.analysis.experiments.bsrem_arm):
BSREM with the relative difference prior from the last OSEM image of the Monte Carlo Derenzo, its
peak-to-valley against noise, the table and the figure, at the CI size on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

from directpet.dualhead import experiment as dualhead
from directpet.first import experiment as first

FAMILIES = {
    "first": (first, dict(methods=("fast",)), "first_bsrem_sweep.png"),
    "dualhead": (dualhead, dict(n_subsets=24), "dualhead_bsrem_sweep.png"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_penalised_arm_trades_peak_to_valley_for_noise(family, tmp_path):
    exp, options, figure = FAMILIES[family]
    cfg = exp.ExperimentConfig(size="tiny", n_iter=4, backend="cpu", progress=False, bsrem_betas=(0.01, 0.1),
                               bsrem_passes=3, **options)
    res = exp.run_experiment(cfg)
    (method, r), = res.methods.items()
    assert [p.b for p in r.bsrem] == [None, 0.01, 0.1]
    # the arm starts from the OSEM image itself: its point is that image's noise and peak-to-valley
    osem = r.bsrem[0]
    assert osem.pv[2.4].ratio == pytest.approx(r.pv[2.4].ratio, rel=1e-12)
    largest = max(res.derenzo_info.diameters_mm)
    # the prior smooths OSEM's noise away, and with it the rods' contrast, the more the stronger it is
    # (noise alone is not monotone in b: a prior that blurs a rod into a peak makes its core uneven)
    assert max(r.bsrem[1].noise, r.bsrem[2].noise) < 0.8 * osem.noise
    assert r.bsrem[2].pv[largest].ratio < r.bsrem[1].pv[largest].ratio < osem.pv[largest].ratio
    assert all(np.isfinite(p.noise) and p.noise > 0 for p in r.bsrem)
    text = res.table_text()
    assert "BSREM with the relative difference prior, 3 passes" in text and "OSEM" in text
    paths = exp.write_figures(res, str(tmp_path))
    assert paths[-1].endswith(figure) and (tmp_path / figure).stat().st_size > 1000


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_bad_penalised_arm_arguments_are_clear_errors_before_the_simulation(family):
    exp, options, _ = FAMILIES[family]
    with pytest.raises(ValueError, match="bsrem_betas"):
        exp.run_experiment(exp.ExperimentConfig(size="tiny", backend="cpu", progress=False, bsrem_betas=(np.nan,)))
    with pytest.raises(ValueError, match="bsrem_passes"):
        exp.run_experiment(exp.ExperimentConfig(size="tiny", backend="cpu", progress=False, bsrem_betas=(0.1,),
                                                bsrem_passes=0))
    with pytest.raises(ValueError, match=r"bsrem_methods: \['alg9'\] are not among the runs"):
        exp.run_experiment(exp.ExperimentConfig(size="tiny", backend="cpu", progress=False, bsrem_betas=(0.1,),
                                                bsrem_methods=("alg9",), **options))


def test_the_arm_follows_only_the_methods_asked_for():
    cfg = first.ExperimentConfig(size="tiny", n_iter=2, backend="cpu", progress=False, methods=("fast", "matched"),
                                 bsrem_betas=(0.01,), bsrem_passes=1, bsrem_methods=("fast",))
    res = first.run_experiment(cfg)
    assert [p.b for p in res.methods["fast"].bsrem] == [None, 0.01] and res.methods["matched"].bsrem == []
    assert "\n     fast        b" in res.table_text() and "matched        b" not in res.table_text()
