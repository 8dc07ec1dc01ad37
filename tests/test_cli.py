"""The ``directpet`` command says what it is and where it runs, in plain words."""

import subprocess
import sys
from pathlib import Path

import directpet

# the directpet that pytest imported (a source tree with its built extension, or the installed package)
HERE = str(Path(directpet.__file__).resolve().parents[1])


def _cli(*args):
    proc = subprocess.run([sys.executable, "-m", "directpet.cli", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": HERE, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_help_and_info_name_the_three_families():
    for text in (_cli("--help"), _cli("info")):
        for family in ("DIRECT", "FIRST", "dual-head"):
            assert family in text, (family, text)


def test_info_says_plainly_where_the_projectors_run():
    text = _cli("info")
    if not directpet.has_cuda():
        assert "CUDA backend not compiled in" in text
    elif directpet.cuda_device_count() == 0:
        assert "no GPU is usable here" in text and "runs on the CPU" in text
    else:
        assert f"{directpet.cuda_device_count()} usable CUDA device(s)" in text


def test_demo_runs_the_penalised_arm_of_every_family_and_names_a_bad_strength(tmp_path, capsys):
    """``--bsrem-betas`` reaches every family's experiment (in this process: the tiny FIRST demo with
    one strength), and a value that is not a number is a usage error naming the option."""
    import pytest

    from directpet.cli import main

    assert main(["demo", "first", "--size", "tiny", "--backend", "cpu", "--methods", "fast", "--iterations", "2",
                 "--bsrem-betas", "0.01", "--bsrem-passes", "1", "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "BSREM with the relative difference prior, 1 pass from" in out
    assert (tmp_path / "first_bsrem_sweep.png").exists()
    for family in ("direct", "dualhead"):
        with pytest.raises(SystemExit):
            main(["demo", family, "--size", "tiny", "--bsrem-betas", "0.1,x"])
        assert "--bsrem-betas: expected a comma list of numbers" in capsys.readouterr().err
