"""Session-scoped services: the probe model server and the LiteLLM gateway.

One pair per pytest process (each xdist worker gets its own), started lazily by
the first cell that needs them and stopped at session end. Their logs go to
``<output>/logs/``. The apparatus classes are imported for typing only here and
at first use below: importing the gateway loads LiteLLM (about a second), which a
session that runs no cell (``--collect-only``) should not pay.

Creating the services (the first cell of a process) sets up the process's session
folder for temp state (:mod:`apparatus.tempstate`), which first sweeps what sessions
killed outright left behind: their temp folders, and a proxy still running.

:meth:`Services.warm_up` starts both in a background thread as soon as the cells are
being collected (``pytest_generate_tests``, unless ``--collect-only`` or ``--tt-estimate``),
so the proxy's start (~6 s, far more on a loaded machine) overlaps the loading of every pack
and the first cell's preparation instead of being waited for inside it; a cell that needs
the gateway sooner waits only for what is left. A session whose cells are all resumed or
deselected pays that start in the background and stops it at its end.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apparatus.gateway import Gateway
    from apparatus.gateway.registry import ModelRegistry
    from apparatus.probe.server import ProbeServer


def worker_id() -> str:
    """The xdist worker id (``gw0``…), ``main`` without xdist: names per-process files."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@dataclass
class Services:
    """Lazily started probe server + gateway for this process."""

    output: Path
    record_bodies: bool = False
    _probe: ProbeServer | None = None
    _gateway: Gateway | None = None
    _registry: ModelRegistry | None = None
    errors: list[str] = field(default_factory=list)
    # One start at a time: the warm-up thread and a cell may ask at once; the second waits.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _warm_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _warming: threading.Thread | None = None
    _warm_error: BaseException | None = None

    def __post_init__(self) -> None:
        from apparatus import tempstate

        tempstate.session_dir()  # sweeps the temp state of dead sessions, once per process

    def warm_up(self) -> None:
        """Start the probe server and gateway in the background (idempotent). A failure is
        kept and raised to the first cell that asks for the gateway, as a lazy start would."""
        # Not under ``_lock``: the start under way holds it, and a second call must not wait.
        with self._warm_lock:
            if self._warming is not None or self._gateway is not None:
                return

            def start() -> None:
                try:
                    self.gateway()
                except BaseException as exc:  # noqa: BLE001 - re-raised in the cell that needs it
                    self._warm_error = exc

            self._warming = threading.Thread(target=start, name="tt-gateway-warm-up", daemon=True)
            self._warming.start()

    @property
    def records_dir(self) -> Path:
        """Where this process's gateway writes its per-run request records."""
        return self.output / ".gateway" / worker_id()

    @property
    def registry(self) -> ModelRegistry:
        """The model registry (``models.yaml``), loaded on first use."""
        if self._registry is None:
            from apparatus.gateway.registry import ModelRegistry

            self._registry = ModelRegistry.load()
        return self._registry

    def probe(self) -> ProbeServer:
        """The probe model server, started on first use."""
        with self._lock:
            return self._start_probe()

    def _start_probe(self) -> ProbeServer:
        if self._probe is None:
            from apparatus.probe.server import ProbeServer

            server = ProbeServer()
            server.start()
            self._probe = server
        return self._probe

    def gateway(self) -> Gateway:
        """The LiteLLM gateway (routing the probe model to :meth:`probe`), started on first use
        (or by :meth:`warm_up`: then this waits for that start and raises its failure)."""
        warming = self._warming
        if warming is not None and warming is not threading.current_thread():
            warming.join()
            if self._warm_error is not None:
                error, self._warm_error = self._warm_error, None
                raise error
        with self._lock:
            return self._start_gateway()

    def _start_gateway(self) -> Gateway:
        if self._gateway is None:
            from apparatus.gateway import Gateway

            logs = self.output / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            self.records_dir.mkdir(parents=True, exist_ok=True)
            gw = Gateway(
                records_dir=self.records_dir,
                log_path=logs / f"gateway-{worker_id()}.log",
                probe_url=self.probe().url,
                registry=self.registry,
                record_bodies=self.record_bodies,
            )
            gw.start()
            self._gateway = gw
        return self._gateway

    def close(self) -> None:
        """Stop what was started (the gateway first: it forwards to the probe server)."""
        if self._warming is not None and self._warming is not threading.current_thread():
            self._warming.join()  # a start under way finishes, then is stopped like any other
        for svc in (self._gateway, self._probe):
            if svc is not None:
                try:
                    svc.stop()
                except Exception as exc:  # noqa: BLE001 - shutdown must not mask results
                    self.errors.append(f"stopping {type(svc).__name__}: {exc}")
        self._gateway = self._probe = None
