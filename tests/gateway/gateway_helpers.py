"""Shared helpers of the gateway tests (imported by name; not a conftest)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from apparatus.gateway import Gateway, ModelRegistry

#: The "real" upstream key the gateway must substitute for the run key.
UPSTREAM_KEY = "sk-fake-upstream-key-0123456789"
KEY_ENV = "TT_TEST_UPSTREAM_KEY"
ABSENT_KEY_ENV = "TT_TEST_ABSENT_KEY"
_PRICE = {"input": 1.0, "cache_read": 0.1, "cache_write": 1.25, "output": 5.0}
FIXTURES = Path(__file__).parent / "fixtures"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_registry(upstream_url: str, dead_url: str) -> ModelRegistry:
    """probe + one live alias per wire format at the fake upstream, a chat alias usable
    through translation, one alias whose key is unset and one whose upstream is down."""
    def live(wire: str, url: str = upstream_url, key: str = KEY_ENV, **extra: Any) -> dict[str, Any]:
        return {"kind": "live", "model": f"fake-{wire}-model", "key_env": key, "upstreams": {wire: url},
                "price": _PRICE, **extra}
    return ModelRegistry.from_data({"catalogue": {"frozen_on": "2026-11-30", "source": "tests"}, "models": {
        "probe": {"kind": "probe", "model": "probe",
                  "price": {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}},
        "fake-anthropic": live("anthropic", translation={"provider": "anthropic", "api_base": upstream_url}),
        "fake-responses": live("responses"),
        "fake-chat": live("chat", translation={"provider": "custom_openai", "api_base": upstream_url + "/v1"}),
        "fake-nokey": live("chat", key=ABSENT_KEY_ENV),
        "fake-dead": live("chat", url=dead_url),
    }})


def gateway_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ABSENT_KEY_ENV}
    env[KEY_ENV] = UPSTREAM_KEY
    return env


def start_gateway(base: Path, upstream_url: str, *, record_bodies: bool) -> Gateway:
    reg = make_registry(upstream_url, f"http://127.0.0.1:{closed_port()}")
    return Gateway(base / "records", base / "gateway.log", upstream_url, reg, record_bodies=record_bodies,
                   env=gateway_env()).start()


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()
