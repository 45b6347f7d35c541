"""The session services' background start (issue 25): ``warm_up`` returns at once, the cell
that then asks for the gateway gets the one started in the background (never a second), and
a failed background start is raised to that cell, once, as a lazy start's would be."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tracetrial_fixtures.services import Services


def test_warm_up_starts_once_in_the_background(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[str] = []
    release = threading.Event()

    def start(self: Services) -> object:
        if self._gateway is not None:
            return self._gateway
        starts.append(threading.current_thread().name)
        release.wait(5)
        self._gateway = "gw"  # type: ignore[assignment]
        return self._gateway

    monkeypatch.setattr(Services, "_start_gateway", start)
    services = Services(output=tmp_path)
    begun = time.monotonic()
    services.warm_up()
    while not starts and time.monotonic() - begun < 5:
        time.sleep(0.01)  # the background start is under way (and holds the start lock)
    services.warm_up()  # idempotent, and never waits for the start under way
    assert time.monotonic() - begun < 4
    release.set()
    assert services.gateway() == "gw" and services.gateway() == "gw"
    assert starts == ["tt-gateway-warm-up"]


def test_a_failed_background_start_reaches_the_first_cell_once(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def start(self: Services) -> object:
        if self._gateway is not None:
            return self._gateway
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("proxy did not answer")
        self._gateway = "gw"  # type: ignore[assignment]
        return self._gateway

    monkeypatch.setattr(Services, "_start_gateway", start)
    services = Services(output=tmp_path)
    services.warm_up()
    with pytest.raises(RuntimeError, match="proxy did not answer"):
        services.gateway()
    assert services.gateway() == "gw" and len(calls) == 2  # the next cell starts it again


def test_close_waits_for_a_start_under_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[str] = []

    class Gw:
        def stop(self) -> None:
            stopped.append("gw")

    def start(self: Services) -> object:
        time.sleep(0.3)
        self._gateway = Gw()  # type: ignore[assignment]
        return self._gateway

    monkeypatch.setattr(Services, "_start_gateway", start)
    services = Services(output=tmp_path)
    services.warm_up()
    services.close()
    assert stopped == ["gw"] and services._gateway is None


@pytest.mark.parametrize(("sandbox", "asked"), [("docker", True), ("auto", True), ("bwrap", False), ("local", False)])
def test_the_cells_warm_up_asks_docker_only_when_the_session_may_use_it(
        monkeypatch: pytest.MonkeyPatch, sandbox: str, asked: bool) -> None:
    """Whether docker can serve (the engine's SDK import and a ping, ~0.3 s) is asked in the
    background at session start when ``--tt-sandbox`` may pick docker, not by the first cell;
    a failing probe is left to the cell (the warm-up never raises)."""
    import apparatus.sandbox as sandbox_pkg
    from tracetrial_fixtures import run

    calls: list[str] = []

    def probe() -> str | None:
        calls.append("docker")
        raise RuntimeError("no engine here")

    monkeypatch.setattr(sandbox_pkg, "docker_reason", probe)
    monkeypatch.setattr(run, "_warm_harnesses", lambda names: None)
    run.warm_up([], sandbox)
    assert calls == (["docker"] if asked else [])
