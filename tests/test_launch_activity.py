"""scripts/launch_activity.py, the summary of a kernel's launches under Nsight Compute: the parser and the
sums on a listing written here in ncu's --csv format (no GPU needed)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "launch_activity.py"


def _module():
    spec = importlib.util.spec_from_file_location("launch_activity", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _listing(launches):
    """ncu's --csv output for launches given as {metric: value} dicts (values written with thousands commas)."""
    lines = ["==PROF== Connected to process 1 (/usr/bin/python3)", "case output line", HEADER]
    for i, metrics in enumerate(launches):
        for name, value in metrics.items():
            lines.append(f'"{i}","1","python3","host","void k<1>(int, const float *)","1","7","(32, 1, 1)",'
                         f'"(100, 1, 1)","0","9.0","Command line profiler metrics","{name}","","{value:,}"')
    return "\n".join(lines) + "\n"


LAUNCHES = [
    {"gpu__time_duration.sum": 2_000_000, "launch__grid_size": 7497, "sm__cycles_active.avg": 900_000.5,
     "sm__cycles_elapsed.max": 1_000_000, "sm__warps_active.avg.pct_of_peak_sustained_active": 20.0},
    {"gpu__time_duration.sum": 3_000_000, "launch__grid_size": 7497, "sm__cycles_active.avg": 1_440_000,
     "sm__cycles_elapsed.max": 1_500_000, "sm__warps_active.avg.pct_of_peak_sustained_active": 24.0},
    {"gpu__time_duration.sum": 1_000_000, "launch__grid_size": 100, "sm__cycles_active.avg": 250_000,
     "sm__cycles_elapsed.max": 500_000, "sm__warps_active.avg.pct_of_peak_sustained_active": 10.0},
]


def test_summary_of_a_listing():
    mod = _module()
    launches = mod.parse_csv(_listing(LAUNCHES))
    assert [launch["id"] for launch in launches] == [0, 1, 2]
    assert launches[0]["sm__cycles_active.avg"] == 900_000.5      # thousands commas read back
    s = mod.summarise(launches)
    assert s["launches"] == 3 and s["kernels"] == ["void k<1>"]
    assert s["sum_duration_ms"] == pytest.approx(6.0)
    # all SMs' active cycles over all elapsed cycles, not the mean of the launches' fractions (0.77)
    assert s["sm_active_fraction_of_elapsed"] == pytest.approx((900_000.5 + 1_440_000 + 250_000) / 3_000_000)
    assert (s["warps_active_pct_of_peak_median"], s["warps_active_pct_of_peak_min"],
            s["warps_active_pct_of_peak_max"]) == (20.0, 10.0, 24.0)
    assert s["per_launch_sm_active_fraction"] == pytest.approx([0.9000005, 0.96, 0.5])
    assert s["per_launch_grid_size"] == [7497, 7497, 100]


def test_cli_on_a_saved_listing(tmp_path, capsys):
    mod = _module()
    listing, out = tmp_path / "ncu.csv", tmp_path / "summary.json"
    listing.write_text(_listing(LAUNCHES[:2]))
    mod.main(["--csv", str(listing), "--out", str(out)])
    assert "2 launches of void k<1>" in capsys.readouterr().out
    assert json.loads(out.read_text())["sum_duration_ms"] == pytest.approx(5.0)


def test_bad_listings_are_named():
    mod = _module()
    with pytest.raises(ValueError, match="no ncu metrics header"):
        mod.parse_csv("==PROF== nothing profiled\n")
    with pytest.raises(ValueError, match="no launch"):
        mod.summarise([])
    partial = [{k: v for k, v in LAUNCHES[0].items() if k != "sm__cycles_elapsed.max"}]
    with pytest.raises(ValueError, match="sm__cycles_elapsed.max"):
        mod.summarise(mod.parse_csv(_listing(partial)))


def test_ncu_command_profiles_every_launch_of_the_kernel():
    cmd = _module().ncu_command("back_default_kernel", ["python3", "case.py", "--subsets", "72"])
    assert cmd[:2] == ["ncu", "--csv"] and "regex:back_default_kernel" in cmd
    assert "--launch-count" not in cmd and cmd[-4:] == ["python3", "case.py", "--subsets", "72"]
