"""Progress reporting of the long compiled runs (event simulations, model builds): a tqdm bar, a
user callback, or nothing."""

from __future__ import annotations


def progress_callback(progress, total: int, *, unit: str, desc: str):
    """``(bar, update)`` for ``progress``: True gives a tqdm bar of ``total`` (``bar``; close it when
    done), a callable is called as ``progress(done)``, None / False give ``(None, None)``.
    ``update(done)`` takes the running count (clamped to ``total`` on the bar)."""
    if progress is None or progress is False:
        return None, None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit=unit, unit_scale=True, desc=desc)

        def update(done):
            bar.update(min(int(done), total) - bar.n)

        return bar, update
    if callable(progress):
        return None, lambda done: progress(int(done))
    raise TypeError(f"progress: expected a bool or a callable, got {type(progress).__name__}")


__all__ = ["progress_callback"]
