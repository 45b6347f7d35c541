"""The probe model's HTTP server: an in-process, threaded, loopback-only model API.

Routes (a run is bound by the first path segment)::

    POST /<run_id>/v1/messages            Anthropic Messages   (query string ignored, e.g. ?beta=true)
    POST /<run_id>/v1/messages/count_tokens   token estimate   {"input_tokens": n}
    POST /<run_id>/v1/responses           OpenAI Responses
    POST /<run_id>/v1/chat/completions    Chat Completions
    POST /<run_id>/chat/completions       Chat Completions (DeepSeek Harness posts to {base}/chat/completions)
    HEAD /                                200
    HEAD /<run_id>                        200 if registered, else 404
    GET  /health                          {"status": "ok", "runs": n}

Usage::

    server = ProbeServer().start()
    server.register_run("run-1", task_pack)          # or a path to probe_policy.py
    ... harness talks to f"{server.url}/run-1" (through the gateway) ...
    report = server.finish_run("run-1")              # ProbeRunReport -> gateway/probe.json
    server.stop()

Streaming answers use chunked transfer encoding with one socket write per SSE
event, and TCP_NODELAY (a split event stalls ~40 ms per request on keep-alive).
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from pydantic import ValidationError

from apparatus.probe.engine import Run
from apparatus.probe.loader import PolicyLoadError, PolicyModule, load_policy
from apparatus.probe.report import ProbeOptions, ProbeRunReport
from apparatus.probe.wire import Rendered, render_error
from tracetrial.harness import WireFormat
from tracetrial.task import TaskPack

_ROUTES: list[tuple[re.Pattern[str], WireFormat | None]] = [
    (re.compile(r"^/(?P<run>[^/]+)/v1/messages/count_tokens$"), None),
    (re.compile(r"^/(?P<run>[^/]+)/v1/messages$"), "anthropic"),
    (re.compile(r"^/(?P<run>[^/]+)/v1/responses$"), "responses"),
    (re.compile(r"^/(?P<run>[^/]+)/(?:v1/)?chat/completions$"), "chat"),
]
ROUTE_HELP = ("POST /<run_id>/v1/messages | /<run_id>/v1/responses | /<run_id>/v1/chat/completions | "
              "/<run_id>/chat/completions; HEAD / ; HEAD /<run_id> ; GET /health")


class ProbeServer:
    """Serve the probe model for any number of concurrently registered runs."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._host = host
        self._port = port
        self._runs: dict[str, Run] = {}
        self._runs_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        """Bind (port 0 picks a free port) and serve in a daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        handler = type("ProbeHandler", (_Handler,), {"probe": self})
        httpd = ThreadingHTTPServer((self._host, self._port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        # a short poll interval makes stop() quick (shutdown waits for the next poll)
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="tt-probe-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash); a run's base URL is ``f"{url}/{run_id}"``."""
        if self._httpd is None:
            raise RuntimeError("ProbeServer is not started; call start() first")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def run_url(self, run_id: str) -> str:
        return f"{self.url}/{run_id}"

    # ------------------------------------------------------------------ runs
    def register_run(self, run_id: str, task: TaskPack | Path | str, options: Mapping[str, Any] | None = None) -> None:
        """Bind ``run_id`` to a task pack's ``probe_policy.py`` (or a policy file path).

        ``options`` override the module's ``PROBE_OPTIONS`` key by key (see
        :class:`~apparatus.probe.report.ProbeOptions`). With a task pack, the
        user-turn texts and the task id are filled in. Raises
        :class:`~apparatus.probe.loader.PolicyLoadError` for a bad policy or options
        and ``ValueError`` for a bad or duplicate run id.
        """
        if not re.fullmatch(r"[A-Za-z0-9._~-]+", run_id):
            raise ValueError(f"run id {run_id!r} must be one URL path segment of [A-Za-z0-9._~-]")
        task_id = None
        if isinstance(task, TaskPack):
            module = load_policy(task.policy_py)
            task_id = task.id
            defaults: dict[str, Any] = {"turns": [t.user for t in task.user_turns], "task_id": task.id}
        else:
            module = load_policy(task)
            defaults = {}
        merged = {**defaults, **module.options, **dict(options or {})}
        try:
            opts = ProbeOptions.model_validate(merged)
        except ValidationError as exc:
            raise PolicyLoadError(f"options for run {run_id!r} are invalid: {exc}") from exc
        with self._runs_lock:
            if run_id in self._runs:
                raise ValueError(f"run id {run_id!r} is already registered; finish_run() it first")
            self._runs[run_id] = Run(run_id, module, opts, task_id)

    def register_module(self, run_id: str, module: PolicyModule, options: Mapping[str, Any] | None = None) -> None:
        """Like :meth:`register_run` for an already loaded :class:`PolicyModule`."""
        opts = ProbeOptions.model_validate({**module.options, **dict(options or {})})
        with self._runs_lock:
            if run_id in self._runs:
                raise ValueError(f"run id {run_id!r} is already registered; finish_run() it first")
            self._runs[run_id] = Run(run_id, module, opts, None)

    def report(self, run_id: str) -> ProbeRunReport:
        """A copy of the run's report so far (the run stays registered)."""
        run = self._get(run_id)
        with run.lock:
            return run.report.model_copy(deep=True)

    def finish_run(self, run_id: str) -> ProbeRunReport:
        """Unregister ``run_id`` and return its report; later requests for it get HTTP 404."""
        with self._runs_lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            raise KeyError(f"no probe run registered under {run_id!r}")
        with run.lock:
            return run.report.model_copy(deep=True)

    def _get(self, run_id: str) -> Run:
        with self._runs_lock:
            run = self._runs.get(run_id)
        if run is None:
            raise KeyError(f"no probe run registered under {run_id!r}")
        return run

    def _lookup(self, run_id: str) -> Run | None:
        with self._runs_lock:
            return self._runs.get(run_id)

    def run_ids(self) -> list[str]:
        with self._runs_lock:
            return sorted(self._runs)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TraceTrialProbe/1"
    sys_version = ""
    probe: ProbeServer  # set on the subclass made in start()

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the report is the log; stderr noise would interleave with pytest output

    def date_time_string(self, timestamp: float | None = None) -> str:
        return "Thu, 01 Jan 1970 00:00:00 GMT"  # no wall clock in answers (replay determinism)

    # ------------------------------------------------------------------ plain routes
    def _drain_body(self) -> None:
        """Consume a request body nobody reads (a HEAD or GET can carry one, e.g. the
        gateway forwards Claude Code's ``HEAD /api/hello`` with ``{}``); left unread it
        would be parsed as the start of the next request on a kept-alive connection."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > 0:
            self.rfile.read(length)

    def do_HEAD(self) -> None:
        self._drain_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        run = path.lstrip("/").split("/", 1)[0]
        if path == "" or (run and self.probe._lookup(run) is not None):
            status = 200
        else:
            status = 404
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._drain_body()
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send_json(200, {"status": "ok", "runs": len(self.probe.run_ids())})
        else:
            self._send_json(404, {"error": {"type": "not_found_error", "message": f"no route GET {path}; {ROUTE_HELP}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        for pattern, wire in _ROUTES:
            m = pattern.match(path)
            if m is None:
                continue
            run = self.probe._lookup(m["run"])
            if run is None:
                message = (f"no probe run registered under {m['run']!r}; call ProbeServer.register_run"
                           f"({m['run']!r}, task) before launching the harness (registered: "
                           f"{self.probe.run_ids() or 'none'})")
                self._send(render_error(wire or "anthropic", 404, message, code="tt_unknown_run"))
                return
            if wire is None:
                self._send_json(200, {"input_tokens": max(1, math.ceil(len(raw) / 4))})
                return
            self._send(run.answer(wire, raw, dict(self.headers.items())))
            return
        self._send_json(404, {"error": {"type": "not_found_error", "message": f"no route POST {path}; {ROUTE_HELP}"}})

    # ------------------------------------------------------------------ writing
    def _send_json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode("utf-8")
        self._send(Rendered(status, "application/json", body))

    def _send(self, r: Rendered) -> None:
        self.send_response(r.status)
        self.send_header("Content-Type", r.content_type + ("; charset=utf-8" if not r.streaming else ""))
        if r.streaming:
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in r.events:  # one chunk == one SSE event == one write
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(r.body)))
            self.end_headers()
            try:
                self.wfile.write(r.body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
