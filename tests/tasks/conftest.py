"""Per-pack test modules load their pack's ``verifier/selftest.py``, and a selftest imports its
pack's verifier as the top-level module ``score`` (from its own folder, put first on
``sys.path``). Python caches that module by name, so in one process the second pack's selftest
would get the first pack's ``score``. Each test module is collected with no ``score`` cached."""

from __future__ import annotations

import sys
from collections.abc import Generator

import pytest

#: Top-level module names pack files import from their own folder.
PACK_LOCAL_MODULES = ("score", "probe_policy", "selftest")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Forget the pack-local modules before and after collecting each test module."""
    if isinstance(collector, pytest.Module):
        for name in PACK_LOCAL_MODULES:
            sys.modules.pop(name, None)
    try:
        return (yield)
    finally:
        if isinstance(collector, pytest.Module):
            for name in PACK_LOCAL_MODULES:
                sys.modules.pop(name, None)
