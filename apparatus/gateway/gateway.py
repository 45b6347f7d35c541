"""The gateway process: one LiteLLM proxy on a free loopback port per pytest worker.

Usage::

    with gateway_context(records_dir, log_path, probe_url) as gw:
        url = gw.base_url(run_id, "probe", "anthropic")   # ANTHROPIC_BASE_URL
        key = gw.api_key(run_id)                          # ANTHROPIC_API_KEY
        ...                                               # run the harness
        records = gw.records(run_id)                      # waits until every line is written

Several gateways can run on one machine: each has its own port, config directory,
per-gateway secret and log; records of different runs go to different files.

The proxy runs under the apparatus's supervisor (:mod:`apparatus.lifetime`): it dies with
the process that started it, even of a ``kill -9``, and its config folder (with the
master key) is removed then; the folder lives in that process's session folder
(:mod:`apparatus.tempstate`), which the next session sweeps should anything be left.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Self

import yaml

from apparatus import lifetime, tempstate
from apparatus.gateway.config import (
    CONTROL_HEADER,
    CONTROL_PREFIX,
    SETTINGS_ENV,
    LiveRoute,
    ProxySettings,
    build_litellm_config,
    harness_base_url,
    run_key,
)
from apparatus.gateway.records import REQUESTS_FILE, RUN_ID_RE, read_records
from apparatus.gateway.registry import ModelRegistry
from tracetrial.errors import ApparatusError
from tracetrial.harness import WireFormat

_REPO_ROOT = Path(__file__).resolve().parents[2]


class GatewayError(ApparatusError):
    """The gateway could not start, or was asked for a route it cannot serve."""


#: SIGTERM -> SIGKILL grace when the proxy is stopped.
_STOP_GRACE_S = 10.0


#: How long the proxy may take to answer. On a loaded 2-core machine importing LiteLLM alone
#: has taken over 60 s; ``TT_GATEWAY_START_TIMEOUT_S`` lengthens the wait there.
START_TIMEOUT_S = 120.0


def start_timeout_default() -> float:
    """``TT_GATEWAY_START_TIMEOUT_S`` when set to a positive number, else :data:`START_TIMEOUT_S`."""
    raw = os.environ.get("TT_GATEWAY_START_TIMEOUT_S", "")
    try:
        value = float(raw)
    except ValueError:
        return START_TIMEOUT_S
    return value if value > 0 else START_TIMEOUT_S


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Gateway:
    """A LiteLLM proxy subprocess with TraceTrial's routes and recorder.

    Args:
        records_dir: where ``<run_id>/requests.jsonl`` files are written.
        log_path: the proxy's stdout/stderr.
        probe_url: the probe model server (``/tt/probe/<run_id>/...`` forwards to
            ``<probe_url>/<run_id>/...``); ``None`` disables the probe route.
        registry: model aliases (default: ``models.yaml``).
        record_bodies: also keep raw request bodies (``--tt-record-bodies``).
        env: environment of the proxy (default ``os.environ``); provider keys are read
            from it.
        recorder: load the provider-boundary recorder (switch off only to measure its cost).
    """

    def __init__(self, records_dir: Path, log_path: Path, probe_url: str | None,
                 registry: ModelRegistry | None = None, *, record_bodies: bool = False,
                 env: Mapping[str, str] | None = None, host: str = "127.0.0.1",
                 start_timeout_s: float | None = None, recorder: bool = True):
        self.records_dir = Path(records_dir).resolve()
        self.log_path = Path(log_path).resolve()
        self.probe_url = probe_url.rstrip("/") if probe_url else None
        self.registry = registry or ModelRegistry.load()
        self.record_bodies = record_bodies
        self.host = host
        self.start_timeout_s = start_timeout_s if start_timeout_s is not None else start_timeout_default()
        self.recorder = recorder
        self._env = dict(os.environ if env is None else env)
        self._secret = secrets.token_hex(16)
        self._instance_id = secrets.token_hex(8)
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None   # the proxy's supervisor
        self._proxy_pid: int | None = None
        self._log: IO[bytes] | None = None
        self._workdir: Path | None = None
        self._live: dict[str, LiveRoute] = {}

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        """Start the proxy and wait until it answers (typically ~6 s)."""
        if self._proc is not None:
            return self
        self.records_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # In this process's session folder: swept, master key and all, should we be killed.
        self._workdir = tempstate.mkdtemp("tt-gateway-")
        config, self._live = build_litellm_config(
            self.registry, probe_url=self.probe_url, master_key="sk-" + secrets.token_hex(24), env=self._env,
            recorder=self.recorder)
        (self._workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        settings = ProxySettings(instance_id=self._instance_id, secret=self._secret,
                                 records_dir=str(self.records_dir), record_bodies=self.record_bodies,
                                 live_routes=self._live)
        (self._workdir / "settings.json").write_text(settings.model_dump_json(), encoding="utf-8")
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - held open for the proxy's lifetime
        last_error = ""
        for _attempt in range(3):
            port = _free_port(self.host)
            self._spawn(port)
            ok, last_error = self._wait_ready(port)
            if ok:
                self._port = port
                _LIVE_GATEWAYS.add(self)
                return self
            self._kill()
            if not any(s in last_error.lower() for s in ("address already in use", "another process")):
                break           # a port race is retried on a new port; anything else is fatal
        self.stop()
        raise GatewayError(f"LiteLLM gateway did not start ({last_error}); see {self.log_path}")

    def _spawn(self, port: int) -> None:
        assert self._workdir is not None and self._log is not None
        env = dict(self._env)
        env.update({
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",   # else it downloads a price map at import
            SETTINGS_ENV: str(self._workdir / "settings.json"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")])),
            "NO_PROXY": ",".join(filter(None, ["127.0.0.1,localhost", env.get("NO_PROXY")])),
            "PYTHONUNBUFFERED": "1",
        })
        env["no_proxy"] = env["NO_PROXY"]
        for var in ("HOST", "PORT"):    # litellm's CLI reads these as defaults
            env.pop(var, None)
        self._log.write(f"--- tracetrial gateway {self._instance_id} starting on port {port}\n".encode())
        self._log.flush()
        # Under the supervisor (apparatus.lifetime): the proxy dies with this process, even
        # of a kill -9, and its config folder goes with it; registered for the next
        # session's sweep should the supervisor itself be killed outright.
        self._proc, self._proxy_pid = lifetime.spawn(
            [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(self._workdir / "config.yaml"),
             "--host", self.host, "--port", str(port), "--num_workers", "1"],
            grace_s=_STOP_GRACE_S, cleanup=self._workdir,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=self._workdir, env=env)
        for pid in (self._proc.pid, self._proxy_pid):
            if pid is not None:
                tempstate.register_process(pid)

    def _wait_ready(self, port: int) -> tuple[bool, str]:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        url = f"http://{self.host}:{port}{CONTROL_PREFIX}/health"
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False, f"proxy exited with code {self._proc.returncode}: {self._log_tail()}"
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if json.loads(resp.read()).get("instance_id") == self._instance_id:
                        return True, ""
                    return False, f"port {port} is served by another process"
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.1)
        return False, (f"no answer on port {port} within {self.start_timeout_s:.0f} s "
                       "(a loaded machine may need more: TT_GATEWAY_START_TIMEOUT_S)")

    def _log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            lifetime.stop(proc, grace_s=_STOP_GRACE_S)  # the proxy and anything it started

    def stop(self) -> None:
        """Stop the proxy (idempotent). Records already written stay."""
        self._kill()
        self._port = None
        _LIVE_GATEWAYS.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._workdir is not None:
            for name in ("config.yaml", "settings.json"):
                with contextlib.suppress(OSError):
                    (self._workdir / name).unlink()
            with contextlib.suppress(OSError):
                self._workdir.rmdir()
            self._workdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def port(self) -> int:
        if self._port is None:
            raise GatewayError("the gateway is not running (call start())")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid of the proxy's supervisor (the leader of the proxy's process group)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def proxy_pid(self) -> int | None:
        """The pid of the LiteLLM proxy process itself, while it runs."""
        return self._proxy_pid if self._proc is not None else None

    # ---------------------------------------------------------------- routes

    def route_info(self, model_alias: str, wire_format: WireFormat) -> dict[str, Any]:
        """Route kind (pass-through | translation), upstream and ``native`` for the
        resolved config of ``result.json``."""
        return self.registry.route(model_alias, wire_format, probe_url=self.probe_url).model_dump()

    def base_url(self, run_id: str, model_alias: str, wire_format: WireFormat) -> str:
        """The base URL to give a harness speaking ``wire_format`` for ``run_id``.

        Anthropic bases have no ``/v1`` (the SDK appends ``/v1/messages``); Responses and
        Chat bases end in ``/v1``. Live and translation routes bind the run through
        :meth:`api_key`, which the harness must use as its API key.
        """
        if not RUN_ID_RE.match(run_id):
            raise GatewayError(f"run id {run_id!r} must match {RUN_ID_RE.pattern}")
        entry = self.registry.get(model_alias)
        info = self.registry.route(model_alias, wire_format, probe_url=self.probe_url)
        if entry.kind == "probe":
            if not self.probe_url:
                raise GatewayError("the gateway was started without a probe_url")
            return harness_base_url(self.url, kind="probe", run_id=run_id, alias=model_alias,
                                    wire_format=wire_format)
        missing = self.registry.missing_key(model_alias, self._env)
        if missing:
            raise GatewayError(f"model {model_alias!r} needs {missing} (unset when the gateway started)")
        return harness_base_url(self.url, kind=info.route, run_id=run_id, alias=model_alias,
                                wire_format=wire_format)

    def missing_key(self, model_alias: str) -> str | None:
        """The env var a live alias needs and the gateway was started without (cells using
        the alias should skip naming it); ``None`` when the alias can run."""
        return self.registry.missing_key(model_alias, self._env)

    def api_key(self, run_id: str) -> str:
        """The key a harness must send (any header: x-api-key, Bearer); binds live and
        translation requests to ``run_id``. Never forwarded upstream."""
        return run_key(self._secret, run_id)

    # ---------------------------------------------------------------- records

    def register_run(self, run_id: str, secrets: Sequence[str]) -> None:
        """Give the recorder ``run_id``'s planted secrets before the run's first request:
        its ``requests.jsonl`` and bodies then hold ``[REDACTED]`` where a secret was (each
        record counts them in ``planted_secrets``). Sent over the loopback control route,
        never written to disk."""
        if not RUN_ID_RE.match(run_id):
            raise GatewayError(f"run id {run_id!r} must match {RUN_ID_RE.pattern}")
        req = urllib.request.Request(f"{self.url}{CONTROL_PREFIX}/run/{run_id}", method="POST",
                                     data=json.dumps({"secrets": list(secrets)}).encode(),
                                     headers={CONTROL_HEADER: self._secret, "content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                resp.read()
        except (urllib.error.URLError, OSError) as exc:
            raise GatewayError(f"could not register run {run_id}'s secrets with the gateway: {exc}") from exc

    def records_path(self, run_id: str) -> Path:
        return self.records_dir / run_id / REQUESTS_FILE

    def drain(self, run_id: str, timeout_s: float = 10.0) -> dict[str, int]:
        """Wait until every request of ``run_id`` has its line in ``requests.jsonl``
        (a request still open after ``timeout_s`` is written with an error).
        Returns ``{"arrived", "written", "forced"}``."""
        req = urllib.request.Request(f"{self.url}{CONTROL_PREFIX}/drain/{run_id}?timeout={timeout_s}",
                                     method="POST", data=b"", headers={CONTROL_HEADER: self._secret})
        with urllib.request.urlopen(req, timeout=timeout_s + 10) as resp:
            out: dict[str, int] = json.loads(resp.read())
        return out

    def records(self, run_id: str, *, drain: bool = True, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """The run's records (after :meth:`drain` unless ``drain=False``)."""
        if drain and self.running:
            self.drain(run_id, timeout_s)
        return read_records(self.records_path(run_id))


_LIVE_GATEWAYS: weakref.WeakSet[Gateway] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for gw in list(_LIVE_GATEWAYS):
        gw.stop()


@contextlib.contextmanager
def gateway_context(records_dir: Path, log_path: Path, probe_url: str | None,
                    registry: ModelRegistry | None = None, *, record_bodies: bool = False,
                    env: Mapping[str, str] | None = None) -> Iterator[Gateway]:
    """A started :class:`Gateway`, stopped on exit (session-scoped fixture helper)::

        @pytest.fixture(scope="session")
        def tt_gateway(tmp_path_factory, probe_server):
            base = tmp_path_factory.mktemp("gateway")
            with gateway_context(base / "records", base / "gateway.log", probe_server.url) as gw:
                yield gw
    """
    gw = Gateway(records_dir, log_path, probe_url, registry, record_bodies=record_bodies, env=env)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()
