"""Reproducible samples of task ids: how the slow suites stay inside CI's time as the suite grows.

A matrix that grows as tasks × harnesses (every task on every real CLI, the calibration's
unchanged tasks) is sampled per CI run rather than cut by a time-out: the sample is chosen by
a seed — the commit id in CI — so a run can be repeated exactly, and successive commits cover
different tasks. The full matrix stays one flag away (each caller names its own).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["sample_ids"]


def sample_ids(ids: Iterable[str], k: int, seed: str) -> list[str]:
    """``k`` of ``ids`` (all of them when there are fewer), chosen by ``seed``, sorted."""
    ranked = sorted(set(ids), key=lambda i: hashlib.sha256(f"{seed}\0{i}".encode()).hexdigest())
    return sorted(ranked[:max(k, 0)])
