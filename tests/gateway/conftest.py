"""Fixtures for the gateway tests: a fake upstream and one real LiteLLM proxy per module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from gateway_helpers import start_gateway

from apparatus.gateway import Gateway
from apparatus.gateway.fake_upstream import FakeUpstream


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def gateway(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One proxy for the module (start ~6 s), recording bodies."""
    gw = start_gateway(tmp_path_factory.mktemp("gateway"), upstream.url, record_bodies=True)
    yield gw
    gw.stop()


@pytest.fixture
def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60, trust_env=False) as c:
        yield c
