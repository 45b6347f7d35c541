"""Gateway object behaviour that needs no running proxy."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from gateway_helpers import make_registry

from apparatus.gateway import Gateway, GatewayError, RegistryError


def _gateway(tmp_path: Path, probe_url: str | None = "http://127.0.0.1:9") -> Gateway:
    reg = make_registry("http://127.0.0.1:9", "http://127.0.0.1:10")
    return Gateway(tmp_path / "records", tmp_path / "gw.log", probe_url, reg, env={})


def test_a_proxy_that_dies_at_start_is_reported_with_its_log(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    gw = _gateway(tmp_path)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(GatewayError, match="proxy exited with code 1"):
        gw.start()
    assert not gw.running
    assert "starting on port" in (tmp_path / "gw.log").read_text()
    with pytest.raises(GatewayError, match="not running"):
        _ = gw.port


def test_base_url_validates_before_anything_is_started(tmp_path: Path) -> None:
    gw = _gateway(tmp_path, probe_url=None)
    gw._port = 4000                     # pretend it runs: base_url is pure given the port
    with pytest.raises(GatewayError, match="must match"):
        gw.base_url("../escape", "probe", "anthropic")
    with pytest.raises(GatewayError, match="without a probe_url"):
        gw.base_url("r1", "probe", "anthropic")
    with pytest.raises(RegistryError, match="unknown model alias"):
        gw.base_url("r1", "nope", "chat")
    with pytest.raises(GatewayError, match="TT_TEST_UPSTREAM_KEY"):   # env={} has no key
        gw.base_url("r1", "fake-chat", "chat")


def test_api_keys_are_per_gateway(tmp_path: Path) -> None:
    a, b = _gateway(tmp_path), _gateway(tmp_path)
    assert a.api_key("r1") != b.api_key("r1")
    assert a.api_key("r1").startswith("tt.r1.") and a.api_key("r1") == a.api_key("r1")


def test_start_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from apparatus.gateway.gateway import START_TIMEOUT_S, start_timeout_default

    monkeypatch.delenv("TT_GATEWAY_START_TIMEOUT_S", raising=False)
    assert start_timeout_default() == START_TIMEOUT_S
    monkeypatch.setenv("TT_GATEWAY_START_TIMEOUT_S", "600")
    assert start_timeout_default() == 600.0
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv("TT_GATEWAY_START_TIMEOUT_S", bad)
        assert start_timeout_default() == START_TIMEOUT_S
