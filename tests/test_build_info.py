"""directpet.build_info() / show_config(): what a build holds and finds, in one call (issue 20)."""

from __future__ import annotations

import io

import directpet


def test_build_info_says_what_the_build_holds_and_finds():
    info = directpet.build_info()
    assert info["version"] == directpet.__version__
    assert info["cpu_dispatch"] in ("x86-64-v4", "x86-64-v3", "baseline", "native", "none")
    assert info["fftw"].startswith("fftw-3")
    assert info["openmp_threads"] >= 1 and info["compiler"]
    assert info["cuda_compiled"] == directpet.has_cuda()
    if directpet.has_cuda():
        assert info["cuda_architectures"]           # the architectures compiled in, e.g. '80-real,90'
    else:
        assert info["cuda_architectures"] is None and info["cuda_devices"] == []
    # one line per usable device, and as many as cuda_device_count() counts
    assert len(info["cuda_devices"]) == directpet.cuda_device_count()
    assert info["numpy"] is not None


def test_show_config_prints_one_line_per_item():
    out = io.StringIO()
    directpet.show_config(file=out)
    text = out.getvalue()
    assert text.startswith(f"directpet {directpet.__version__}")
    for item in ("CPU code path", "FFTW", "CUDA backend", "CUDA runtime", "CUDA devices", "array libraries"):
        assert item in text, item
    assert directpet.build_info()["cpu_dispatch"] in text
