"""Session-scoped services: the probe model server and the LiteLLM gateway.

One pair per pytest process (each xdist worker gets its own), started lazily by
the first cell that needs them and stopped at session end. Their logs go to
``<output>/logs/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def worker_id() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@dataclass
class Services:
    """Lazily started probe server + gateway for this process."""

    output: Path
    record_bodies: bool = False
    _probe: Any = None
    _gateway: Any = None
    _registry: Any = None
    errors: list[str] = field(default_factory=list)

    @property
    def records_dir(self) -> Path:
        return self.output / ".gateway" / worker_id()

    @property
    def registry(self) -> Any:
        if self._registry is None:
            from apparatus.gateway.registry import ModelRegistry

            self._registry = ModelRegistry.load()
        return self._registry

    def probe(self) -> Any:
        if self._probe is None:
            from apparatus.probe.server import ProbeServer

            server = ProbeServer()
            server.start()
            self._probe = server
        return self._probe

    def gateway(self) -> Any:
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
        for svc in (self._gateway, self._probe):
            if svc is not None:
                try:
                    svc.stop()
                except Exception as exc:  # noqa: BLE001 - shutdown must not mask results
                    self.errors.append(f"stopping {type(svc).__name__}: {exc}")
        self._gateway = self._probe = None
