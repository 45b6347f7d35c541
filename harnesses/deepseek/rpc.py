"""A DeepSeek Harness runtime process driven over stdio JSON-RPC 2.0 (newline-delimited).

The runtime lives for the whole run (its ``session/prompt`` continues a session only inside
the process that created it: a new process refuses a persisted session id as an "id
collision"), so one :class:`Runtime` spans the user turns of a run. Every byte the runtime
writes to stdout/stderr is appended, as it arrives, to the *current* turn's files
(:meth:`Runtime.route`), and every request we send is logged to the turn's
``requests.jsonl`` — the wire, verbatim, is the native stream the normalizer reads.

Requests the runtime sends *to us* (a JSON-RPC message with ``method`` and ``id`` on its
stdout) are answered by the handler registered for their method (``handlers``; the
ask-user provider's ``userQuestions/ask``, :mod:`harnesses.deepseek.ask_user`), each in its own
thread so the stdout reader never waits on it; a method without a handler is answered
"method not found". Our responses are logged to ``requests.jsonl`` too (every line we write).

The process runs under the lifetime supervisor (:mod:`apparatus.lifetime`) in its own process
group; :meth:`Runtime.kill` ends its whole tree (the runtime and any bash children, wherever
their session), which is how a turn's wall clock is enforced.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from apparatus.lifetime import spawn, stop

#: A handler of one request method the runtime sends us: ``request message -> result`` (an
#: exception becomes a JSON-RPC error response carrying its message).
Handler = Callable[[dict[str, Any]], Any]
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603


class Runtime:
    """One runtime process and its JSON-RPC exchange."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                 stdout: Path, stderr: Path, requests: Path, reap: Callable[[], None] | None = None,
                 handlers: Mapping[str, Handler] | None = None):
        self._cond = threading.Condition()
        self._write = threading.Lock()  # one line at a time on the runtime's stdin
        self._handlers = dict(handlers or {})
        self._out: IO[bytes] | None = None
        self._err: IO[bytes] | None = None
        self._req: IO[bytes] | None = None
        self.messages: list[dict[str, Any]] = []  # every parsed JSON object, in wire order
        self.closed = False
        self._next = 0
        self._reap = reap  # the sandbox's: removes what a killed wrapper left (a container)
        self.route(stdout, stderr, requests)
        # Under the lifetime supervisor like every turn's process: the runtime's whole tree
        # (bash children in sessions of their own included) ends with the run, or with us.
        # ``proc`` is the supervisor (its exit status is the runtime's); ``pid`` is the runtime.
        self.proc, self.pid = spawn(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self._threads = [
            threading.Thread(target=self._read_stdout, name="tt-dsh-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="tt-dsh-stderr", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ streams
    def route(self, stdout: Path, stderr: Path, requests: Path) -> None:
        """Send what arrives from now on to these files (the next turn's)."""
        with self._cond:
            for fh in (self._out, self._err, self._req):
                if fh is not None:
                    fh.close()
            stdout.parent.mkdir(parents=True, exist_ok=True)
            self._out, self._err, self._req = stdout.open("ab"), stderr.open("ab"), requests.open("ab")

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._cond:
                if self._out is not None:
                    self._out.write(raw)
                    self._out.flush()
                try:
                    data = json.loads(raw)
                except ValueError:
                    data = None
                if isinstance(data, dict):
                    self.messages.append(data)
                self._cond.notify_all()
            if isinstance(data, dict) and isinstance(data.get("method"), str) and "id" in data:
                threading.Thread(target=self._serve, args=(data,), name="tt-dsh-serve", daemon=True).start()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._cond:
                if self._err is not None:
                    self._err.write(raw)
                    self._err.flush()

    # ------------------------------------------------------------------ requests
    def send(self, method: str, params: Any) -> str:
        """Write one request (logged to the turn's ``requests.jsonl``); returns its id."""
        with self._cond:
            self._next += 1
            rid = f"tt-{self._next}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self._put(message)
        return rid

    def _put(self, message: dict[str, Any]) -> None:
        """Log one message to the turn's ``requests.jsonl`` and write it to the runtime's stdin."""
        line = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._write:
            with self._cond:
                if self._req is not None:
                    self._req.write(line)
                    self._req.flush()
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the process is gone (or its stdin closed); the waiter sees ``closed``

    def _serve(self, request: dict[str, Any]) -> None:
        """Answer one request of the runtime through its method's handler."""
        method = str(request["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        handler = self._handlers.get(method)
        if handler is None:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"the client does not handle {method}"}
        else:
            try:
                reply["result"] = handler(request)
            except Exception as exc:  # noqa: BLE001 - the runtime gets the failure as an error response
                reply["error"] = {"code": INTERNAL_ERROR, "message": f"{method} failed: {exc}"}
        self._put(reply)

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], Any], deadline: float) -> Any:
        """Wait until ``predicate(messages)`` is truthy (returns it), the stdout closes or the
        monotonic ``deadline`` passes (returns ``None``)."""
        with self._cond:
            while True:
                found = predicate(self.messages)
                if found:
                    return found
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0:
                    return None
                self._cond.wait(min(remaining, 0.5))

    def response(self, rid: str, deadline: float) -> dict[str, Any] | None:
        found = self.wait_for(lambda ms: next((m for m in ms if m.get("id") == rid and "method" not in m), None),
                              deadline)
        return found if isinstance(found, dict) else None

    # ------------------------------------------------------------------ lifecycle
    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.closed

    def kill(self, grace_s: float = 2.0) -> None:
        """End the runtime and everything it started (the supervisor ends the whole tree,
        children that left the process group included), then what a killed wrapper left."""
        stop(self.proc, grace_s=grace_s)
        if self._reap is not None:
            self._reap()
        self._finish()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """The protocol's ``shutdown``, then EOF on stdin; the group is ended afterwards."""
        if self.alive:
            rid = self.send("shutdown", None)
            self.response(rid, time.monotonic() + timeout_s)
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def _finish(self) -> None:
        for t in self._threads:
            t.join(timeout=5)
        with self._cond:
            for fh in (self._out, self._err, self._req):
                if fh is not None:
                    fh.close()
            self._out = self._err = self._req = None
